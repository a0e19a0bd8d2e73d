"""Internal tool services reached over NATS, built on the service SDK in services.sdk."""
