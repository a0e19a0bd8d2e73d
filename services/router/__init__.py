"""Category C `router.route`: picks the model (or registered agent) for a request by the
routing rules in policy data (pdp/policies/router.rego) and says why."""
