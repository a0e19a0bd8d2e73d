"""What the policy reads, kept in Postgres: grants, overrides, team rules, quotas, standing approvals and approvals."""
