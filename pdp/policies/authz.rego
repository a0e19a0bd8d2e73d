# Toolproxy authorization policy: may this subject invoke this tool, with these arguments?
#
# Input (built by pdp.input.build_input, pinned by tests/test_pdp_input.py):
#   version, subject{agent_id, team_id, roles, scopes}, action ("tool.<name>.invoke"),
#   tool{tool_id, version, category, action, risk, network, requires_approval, timeout_ms, plugin},
#   args, context{team_id, agent_run_id, confidential}, grants (exact capabilities),
#   overrides (this subject's per-tool overrides), team_rules (the subject's own team's rules
#   for this tool: {tool, deny, require_approval, timeout_ms, rate_per_minute}; they only
#   tighten), approval (null | {state, args_match} | {state: "standing", args_match,
#   standing_approval_id}), phase ("list" | "call").
# Output: data.toolproxy.authz.decision = {allow, require_approval, reasons[], obligations}.
#
# Written for both engines: regopy (rego-cpp, embedded) and OPA 1.x (server). Bodies that use
# `not` or `with` keep their braces, and rules stay few: rego-cpp pays per rule evaluated.
package toolproxy.authz

import rego.v1

category_timeout_ms := {"A": 2000, "B": 3000, "C": 5000, "D": 10000}

category_rate_per_minute := {"A": 600, "B": 120, "C": 30, "D": 5}

# The rate rule, stated once (docs/governance/grants-and-overrides.md#rates): an agent's rate
# for a tool is its category's default unless an override sets one, and a team rule's rate can
# only lower the result. Who may set what is the admin overrides route's to enforce (the
# policy does not see who wrote an override): a team's governance only tightens (at most the
# category's default); raising a rate above it takes an admin (at most 1,000,000/min).

# Input fields bound once: in rego-cpp each `input.` lookup costs more than a rule reference.
tool := input.tool

context := input.context

phase := input.phase

# This subject's overrides for this very tool (the list may name other tools).
tool_overrides := [o | some o in input.overrides; o.tool == tool.tool_id]

override_effects := {o.effect | some o in tool_overrides}

# What a decision reads besides the subject's team, roles and scopes, tool, grants, overrides,
# team rules, approval and phase: the arguments only for these tools, never the run id, and never
# the agent's id itself (what is the agent's own — its grants, its overrides — is in the input
# already). The proxy's decision cache keys on exactly this (a policy that does not declare it is
# taken to read everything): agents of one team with the same grants share a decision. A test
# checks the declaration against the decision table. Add a tool here with any argument-aware
# rule; set "agent_id" to true with any rule on `input.subject.agent_id`.
input_reads := {"args": ["data.query", "greenfood.order"], "agent_run_id": false, "agent_id": false}

# The subject's own team's rules for this tool, set by that team's governance. Optional in the
# input (older callers, the decision table's cases): absent means none.
default input_team_rules := []

input_team_rules := input.team_rules

team_rules := [r | some r in input_team_rules; r.tool == tool.tool_id]

# --- who may call what -------------------------------------------------------------------

# Category A read tools are enabled for every agent, except plugins' (third-party code):
# a team opts in to a plugin tool with a grant naming it.
permitted contains "category_a_default" if {
	tool.category == "A"
	tool.action == "read"
	object.get(tool, "plugin", false) != true
}

# Read tools every agent may call without a grant (seed 001: agent templates can be listed
# and read by default). Their write tools still need a grant each; a plugin never counts.
default_read_tools := {"template.list", "template.read"}

permitted contains "default_read" if {
	tool.action == "read"
	tool.tool_id in default_read_tools
	object.get(tool, "plugin", false) != true
}

# Everything else needs a grant or an allow override naming this exact tool: exact string
# membership only, so a grant for one tool never implies another.
permitted contains "granted" if input.action in input.grants

permitted contains "override_allow" if "allow" in override_effects

# --- delegated least privilege ----------------------------------------------------------

# A token that carries tool scopes (`tool.<name>.invoke`, granted by an OpenID provider or
# `toolproxy token --scope`) may list and call only those tools, and only what its grants
# allow besides; a token without any tool scope is governed by the grants alone. `scopes` is
# optional in the input (older callers, the decision table's first cases): absent means none.
tool_scopes := {s | some s in object.get(input.subject, "scopes", []); startswith(s, "tool."); endswith(s, ".invoke")}

# --- denials -------------------------------------------------------------------------------

deny contains "scope_excludes_tool" if {
	count(tool_scopes) > 0
	not input.action in tool_scopes
}

deny contains "grant_required" if count(permitted) == 0

# An explicit deny override beats everything, category A defaults and grants included.
deny contains "override_deny" if "deny" in override_effects

# A team rule's denial: the team's governance switched this tool off for its whole team.
deny contains "team_rule_deny" if {
	some r in team_rules
	r.deny == true
}

deny contains "team_mismatch" if {
	context.team_id != null
	context.team_id != input.subject.team_id
}

deny contains reason if {
	context.confidential == true
	some reason in confidential_denials
}

confidential_denials contains "confidential_excludes_category_d" if tool.category == "D"

confidential_denials contains "confidential_excludes_plugins" if tool.plugin == true

# Operator-only tools: agents neither see nor call them (an admin token may).
operator_tools := {"water.valve.set"}

deny contains "operator_only_tool" if {
	tool.tool_id in operator_tools
	not "admin" in input.subject.roles
}

# Argument-aware rules: only a call has arguments.
deny contains reason if {
	phase == "call"
	some reason in argument_denials
}

# GREENFOOD: agents may create orders and read inventory, never change prices or stock.
greenfood_agent_ops := {"create_order", "get_inventory"}

# Missing arguments are read with object.get: on OPA, `not input.args.op in s` is undefined
# (not true) when `op` is absent, so the denial would silently not fire.
argument_denials contains "greenfood_op_forbidden" if {
	tool.tool_id == "greenfood.order"
	not object.get(input.args, "op", null) in greenfood_agent_ops
	not "admin" in input.subject.roles
}

# data.query: only the named read-only queries the catalog declares.
data_queries := {"files_by_tag", "projects_by_status", "tasks_by_status", "usage_by_tool"}

argument_denials contains "unknown_named_query" if {
	tool.tool_id == "data.query"
	not object.get(input.args, "query", null) in data_queries
}

# --- approval (calls only; a granted category D tool is still listed) ---------------------

needs_approval if {
	phase == "call"
	tool.category == "D"
}

needs_approval if {
	phase == "call"
	tool.requires_approval == true
}

needs_approval if {
	phase == "call"
	some r in team_rules
	r.require_approval == true
}

# The team asked for an approval of every call of this tool: no standing approval covers it.
per_call_rule if {
	some r in team_rules
	r.require_approval == true
}

# No approval requested yet counts as pending.
default approval_state := "pending"

approval_state := input.approval.state

# [allow, require_approval, reason]. An approval given for other arguments is no approval;
# an unknown state fails closed. A standing approval (governance's pre-approval, already
# matched against its argument constraint and counted) stands for a per-call approval, unless
# a team rule asks for an approval per call.
approval_outcome := [true, true, "approval_required"] if {
	approval_state == "pending"
} else := [true, false, "approved"] if {
	approval_state == "approved"
	input.approval.args_match == true
} else := [false, false, "standing_approval_per_call_rule"] if {
	approval_state == "standing"
	per_call_rule
} else := [true, false, "standing_approval"] if {
	approval_state == "standing"
	input.approval.args_match == true
	is_string(input.approval.standing_approval_id)
} else := [false, false, "approval_args_mismatch"] if {
	approval_state == "approved"
} else := [false, false, "approval_denied"] if {
	approval_state == "denied"
} else := [false, false, "approval_expired"] if {
	approval_state == "expired"
} else := [false, false, "approval_invalid"]

# --- decision ------------------------------------------------------------------------------

# [allow, require_approval, reasons]: base denials first, then the approval, then the grant.
verdict := [false, false, sorted(deny)] if {
	count(deny) > 0
} else := [true, false, sorted(permitted)] if {
	not needs_approval
} else := [true, approval_outcome[1], sorted(permitted | {approval_outcome[2]})] if {
	approval_outcome[0]
} else := [false, false, [approval_outcome[2]]]

# A sorted array of a set's members. Not sort(set): rego-cpp returns a set there, OPA an array.
sorted(s) := sort([x | some x in s])

# Overrides and team rules only tighten the timeout; an override's rate replaces the
# category's, and a team rule's rate can only lower the result.
# Most subjects have neither: that case skips the general computation.
timeout_ms := tool.timeout_ms if {
	tool_overrides == []
	team_rules == []
	is_number(tool.timeout_ms)
	tool.timeout_ms > 0
	tool.timeout_ms < category_timeout_ms[tool.category]
} else := category_timeout_ms[tool.category] if {
	tool_overrides == []
	team_rules == []
} else := least(timeout_candidates)

timeout_candidates := [t |
	some t in array.concat(
		array.concat([tool.timeout_ms, category_timeout_ms[tool.category]], [o.timeout_ms | some o in tool_overrides]),
		[r.timeout_ms | some r in team_rules],
	)
	is_number(t)
	t > 0
]

subject_rate_per_minute := least(override_rates) if {
	tool_overrides != []
	override_rates != []
} else := category_rate_per_minute[tool.category]

rate_per_minute := least(array.concat([subject_rate_per_minute], team_rates)) if {
	team_rates != []
} else := subject_rate_per_minute

override_rates := [r | some o in tool_overrides; r := o.rate_per_minute; is_number(r); r >= 0]

team_rates := [r | some t in team_rules; r := t.rate_per_minute; is_number(r); r >= 0]

# The smallest number. Not min(): rego-cpp's min, max and sort order numbers as text
# (min([5000, 10000]) is 10000 there).
least(xs) := m if {
	some m in xs
	every x in xs {
		m <= x
	}
}

redact := ["args", "output"] if {
	context.confidential == true
} else := []

default decision := {
	"allow": false,
	"require_approval": false,
	"reasons": ["invalid_input"],
	"obligations": {"timeout_ms": 1000, "rate": {"per_minute": 1}, "redact": ["args", "output"]},
}

decision := {
	"allow": verdict[0],
	"require_approval": verdict[1],
	"reasons": verdict[2],
	"obligations": {
		"timeout_ms": timeout_ms,
		"rate": {"per_minute": rate_per_minute},
		"redact": redact,
	},
}
