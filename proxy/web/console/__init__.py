"""The governance console: a static page at /console, sessions exchanged for a governance or
admin token, and the console's own API (the live approvals inbox, the policy view)."""
