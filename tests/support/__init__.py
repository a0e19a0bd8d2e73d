"""Shared test helpers: infrastructure fixtures' servers, harnesses, fakes of third parties nothing here can run, and helpers tests share (no test imports another test)."""
