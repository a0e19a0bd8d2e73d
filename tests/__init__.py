"""Toolproxy's test suites: real Postgres, real NATS with JetStream, real Rego."""
