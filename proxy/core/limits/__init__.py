"""Rate limits and daily quotas, shared by every replica through NATS JetStream key-value."""
