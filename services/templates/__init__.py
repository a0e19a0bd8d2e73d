"""Category B agent templates (seed 001): template.list, template.read (read; every agent of
the team may call them without a grant, by policy), template.create, template.update and
template.delete (write; each needs its own grant). An update reports a template.updated event
to the proxy, which writes it with the call's other events."""
