"""The proxy↔service contract: tool manifests, the NATS protocol (subjects, headers, replies), argument validation and bounds, categories, token estimates."""
