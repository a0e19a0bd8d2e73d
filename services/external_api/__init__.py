"""external_api.call: requests to APIs an admin registered, with their secret injected."""
