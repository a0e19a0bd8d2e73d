"""The admin and governance routes under /v1/admin: grants, overrides, team rules, quotas, standing approvals, egress, external APIs, plugins, agents, policies and the decision log."""
