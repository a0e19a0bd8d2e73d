# Toolproxy authorization policy: may this subject invoke this tool, with these arguments?
#
# Input (built by pdp.input.build_input): version, subject{agent_id, team_id, roles},
# action ("tool.<name>.invoke"), tool (catalog entry), args, context, grants (capabilities
# granted to this subject, exact strings), phase ("list" | "call").
# Output: data.toolproxy.authz.decision = {allow, require_approval, reasons[], obligations}.
package toolproxy.authz

import rego.v1

category_timeout_ms := {"A": 2000, "B": 3000, "C": 5000, "D": 10000}

category_rate_per_minute := {"A": 600, "B": 120, "C": 30, "D": 5}

tool := input.tool

# Grants name one exact capability; nothing here expands or matches patterns.
granted if input.action in input.grants

# --- who may call what -------------------------------------------------------------------

# Category A read tools are enabled for every agent.
permitted contains "category_a_default" if {
	tool.category == "A"
	tool.action == "read"
}

# Everything else needs a grant naming this exact tool (a write grant never implies another).
permitted contains "granted" if granted

# --- argument-aware and contextual denials -----------------------------------------------

deny contains "team_mismatch" if input.context.team_id != input.subject.team_id

deny contains "grant_required" if {
	count(permitted) == 0
}

# GREENFOOD: agents may create orders and read inventory, never change prices or stock.
greenfood_agent_ops := {"create_order", "get_inventory"}

deny contains "greenfood_op_forbidden" if {
	input.phase == "call"
	tool.tool_id == "greenfood.order"
	not input.args.op in greenfood_agent_ops
	not "admin" in input.subject.roles
}

# data.query: only the named read-only queries the catalog declares.
data_queries := {"tasks_by_status", "usage_by_tool"}

deny contains "unknown_named_query" if {
	input.phase == "call"
	tool.tool_id == "data.query"
	not input.args.query in data_queries
}

# --- decision ----------------------------------------------------------------------------

allow if count(deny) == 0

default require_approval := false

require_approval if {
	allow
	input.phase == "call"
	tool.requires_approval
}

reasons := sort([r | some r in deny]) if count(deny) > 0

reasons := sort([r | some r in permitted]) if count(deny) == 0

timeout_ms := min([tool.timeout_ms, category_timeout_ms[tool.category]])

decision := {
	"allow": allow,
	"require_approval": require_approval,
	"reasons": reasons,
	"obligations": {
		"timeout_ms": timeout_ms,
		"rate": {"per_minute": category_rate_per_minute[tool.category]},
		"redact": [],
	},
}

default allow := false
