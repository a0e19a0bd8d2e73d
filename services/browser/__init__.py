"""The browser tools: browser.lite (internal, B) and browser.full (internet, D)."""
