"""Agent registration (agent.invoke's directory): the /v1/admin/agents routes."""
