"""Plumbing every process shares: the NATS bus and reply inbox, JetStream and KV, the Postgres pool and LISTEN follower, logs, ids, tracing, sealing, and the embedded servers."""
