"""The proxy's side of plugins: registry routes, the enabled set, internal() relaying."""
