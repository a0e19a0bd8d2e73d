"""The Toolproxy gateway: the policy enforcement point between agents and internal tools."""
