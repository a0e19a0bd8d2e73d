"""The secrets and names the proxy under test is configured with, for tests that must present or look for them."""

from __future__ import annotations

import uuid

TEST_SECRET = "test-secret-" + "x" * 40
# The fake upstream's key: unique per run, so a test can look for it anywhere it must not be.
TEST_LLM_KEY = f"sk-fake-{uuid.uuid4().hex}"
TEST_LLM_MODELS = ("small", "medium", "large")
