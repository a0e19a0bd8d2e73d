"""Plugins: third-party tools in QuickJS sandboxes, installed in a registry, served over NATS."""
