"""Turns: the agent runtime above the gateway (a deterministic demo agent and a model loop),
running every tool call through the same pipeline as the native API."""
