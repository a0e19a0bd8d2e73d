"""The native API for agents: invoke and list tools, calls, results, events, approvals, usage, runs, turns, and the probes."""
