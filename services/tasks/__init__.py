"""Category B tasks: task.list, task.get (read), task.create, task.update, task.complete and
task.assign (write). Tasks may belong to a project of their team; updates name the version
they read (optimistic concurrency: a stale one is version_conflict, nothing written)."""
