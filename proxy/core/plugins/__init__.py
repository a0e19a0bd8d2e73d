"""The proxy's side of plugins: the enabled set, running plugin calls, and internal() relaying."""
