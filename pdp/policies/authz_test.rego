# Unit tests for toolproxy.authz; run by `toolproxy policy test` (pdp.rego_tests) and `opa test`.
#
# Inputs are built whole by `doc` below rather than patched with object.union: OPA merges
# nested objects recursively, rego-cpp replaces them, and tests must mean the same on both.
# Run with no input at all (as `opa test` does): every key the policy reads is set by `decide`.
package toolproxy.authz_test

import rego.v1

import data.toolproxy.authz

tools := {
	"math": tool("math", "A", "read", false, 1500),
	"memory.write": tool("memory.write", "A", "write", false, 2000),
	"task.list": tool("task.list", "B", "read", false, 3000),
	"task.create": tool("task.create", "B", "write", false, 3000),
	"task.purge": tool("task.purge", "B", "write", true, 3000),
	"data.query": tool("data.query", "C", "read", false, 8000),
	"greenfood.order": tool("greenfood.order", "D", "write", true, 5000),
	"browser.full": tool("browser.full", "D", "read", false, 20000),
	"energy.meter.read": tool("energy.meter.read", "D", "read", true, 5000),
	"water.valve.set": tool("water.valve.set", "D", "write", true, 5000),
	"plugin.echo": object.union(tool("plugin.echo", "B", "read", false, 3000), {"plugin": true}),
	"template.list": tool("template.list", "B", "read", false, 3000),
	"template.read": tool("template.read", "B", "read", false, 3000),
	"template.create": tool("template.create", "B", "write", false, 3000),
	"template.update": tool("template.update", "B", "write", false, 3000),
	"template.delete": tool("template.delete", "B", "write", false, 3000),
	"text.wordfreq": object.union(tool("text.wordfreq", "A", "read", false, 2000), {"plugin": true}),
}

tool(id, category, action, requires_approval, timeout_ms) := {
	"tool_id": id, "version": "1.0.0", "category": category, "action": action, "risk": "low",
	"network": false, "requires_approval": requires_approval, "timeout_ms": timeout_ms,
	"plugin": false,
}

# The input for one call of `name` by agent-1 of team t1; keys of `o` replace the defaults.
doc(name, o) := {
	"version": 1,
	"subject": {
		"agent_id": "agent-1", "team_id": "t1", "roles": object.get(o, "roles", ["agent"]),
		"scopes": object.get(o, "scopes", []),
	},
	"action": concat("", ["tool.", name, ".invoke"]),
	"tool": object.get(o, "tool", tools[name]),
	"args": object.get(o, "args", {}),
	"context": {
		"team_id": object.get(o, "team_id", "t1"),
		"agent_run_id": "ar-1",
		"confidential": object.get(o, "confidential", false),
	},
	"grants": object.get(o, "grants", []),
	"overrides": object.get(o, "overrides", []),
	"team_rules": object.get(o, "team_rules", []),
	"approval": object.get(o, "approval", null),
	"phase": object.get(o, "phase", "call"),
}

grant(name) := concat("", ["tool.", name, ".invoke"])

# Key by key, not `with input as inp`: rego-cpp aborts compiling a whole-input `with` over
# rules that read other rules. Replacing each key means the same on OPA.
decide(name, o) := d if {
	inp := doc(name, o)
	d := authz.decision with input.version as inp.version
		with input.subject as inp.subject
		with input.action as inp.action
		with input.tool as inp.tool
		with input.args as inp.args
		with input.context as inp.context
		with input.grants as inp.grants
		with input.overrides as inp.overrides
		with input.team_rules as inp.team_rules
		with input.approval as inp.approval
		with input.phase as inp.phase
}

allowed(d, reasons) if {
	d.allow == true
	d.require_approval == false
	d.reasons == reasons
}

denied(d, reasons) if {
	d.allow == false
	d.require_approval == false
	d.reasons == reasons
}

pending(d, reasons) if {
	d.allow == true
	d.require_approval == true
	d.reasons == reasons
}

obligations(name) := d.obligations if {
	d := decide(name, {})
}

approved := {"state": "approved", "args_match": true}

order := {"op": "create_order", "product_id": "milk", "qty": 2}

gf := [grant("greenfood.order")]

# --- categories and grants ------------------------------------------------------------------

test_category_a_read_is_allowed_for_everyone if {
	allowed(decide("math", {"args": {"expr": "1+2"}}), ["category_a_default"])
}

test_category_a_read_with_a_grant_lists_both_reasons if {
	allowed(decide("math", {"grants": [grant("math")]}), ["category_a_default", "granted"])
}

test_category_a_write_needs_a_grant if {
	denied(decide("memory.write", {}), ["grant_required"])
	allowed(decide("memory.write", {"grants": [grant("memory.write")]}), ["granted"])
}

test_category_b_needs_a_grant if {
	denied(decide("task.list", {}), ["grant_required"])
	denied(decide("task.create", {}), ["grant_required"])
	allowed(decide("task.list", {"grants": [grant("task.list")]}), ["granted"])
	allowed(decide("task.create", {"grants": [grant("task.create")]}), ["granted"])
}

test_category_c_needs_a_grant if {
	args := {"query": "tasks_by_status"}
	denied(decide("data.query", {"args": args}), ["grant_required"])
	allowed(decide("data.query", {"args": args, "grants": [grant("data.query")]}), ["granted"])
}

test_a_grant_never_implies_another_tool if {
	denied(decide("task.create", {"grants": [grant("task.list")]}), ["grant_required"])
	denied(decide("task.list", {"grants": [grant("task.create")]}), ["grant_required"])
}

test_grants_match_exactly_never_by_prefix_or_pattern if {
	near_misses := [
		"tool.task.invoke", "tool.task.*.invoke", "tool.*.invoke",
		"tool.task.create", "task.create", "tool.task.create.invoke.x",
	]
	denied(decide("task.create", {"grants": near_misses}), ["grant_required"])
}

# --- overrides ------------------------------------------------------------------------------

test_override_allow_stands_in_for_a_grant if {
	ov := [{"tool": "task.create", "effect": "allow", "timeout_ms": null, "rate_per_minute": null}]
	allowed(decide("task.create", {"overrides": ov}), ["override_allow"])
}

test_override_deny_beats_the_category_a_default if {
	ov := [{"tool": "math", "effect": "deny", "timeout_ms": null, "rate_per_minute": null}]
	denied(decide("math", {"overrides": ov}), ["override_deny"])
}

test_override_deny_beats_a_grant if {
	ov := [{"tool": "task.list", "effect": "deny", "timeout_ms": null, "rate_per_minute": null}]
	denied(decide("task.list", {"overrides": ov, "grants": [grant("task.list")]}), ["override_deny"])
}

test_override_deny_beats_an_override_allow if {
	ov := [
		{"tool": "task.list", "effect": "allow", "timeout_ms": null, "rate_per_minute": null},
		{"tool": "task.list", "effect": "deny", "timeout_ms": null, "rate_per_minute": null},
	]
	denied(decide("task.list", {"overrides": ov}), ["override_deny"])
}

test_overrides_for_other_tools_do_not_apply if {
	ov := [
		{"tool": "task.list", "effect": "allow", "timeout_ms": 100, "rate_per_minute": 1},
		{"tool": "math", "effect": "deny", "timeout_ms": null, "rate_per_minute": null},
	]
	d := decide("task.create", {"overrides": ov})
	denied(d, ["grant_required"])
	d.obligations.timeout_ms == 3000
	d.obligations.rate.per_minute == 120
}

# --- team rules (a team's own governance tightens its team) ---------------------------------

rule(name, o) := object.union(
	{"tool": name, "deny": false, "require_approval": false, "timeout_ms": null, "rate_per_minute": null},
	o,
)

test_team_rule_deny_beats_the_category_a_default_and_grants if {
	r := [rule("math", {"deny": true})]
	denied(decide("math", {"team_rules": r}), ["team_rule_deny"])
	denied(decide("math", {"team_rules": r, "grants": [grant("math")]}), ["team_rule_deny"])
	denied(decide("math", {"team_rules": r, "phase": "list"}), ["team_rule_deny"])
}

test_team_rule_deny_beats_an_override_allow if {
	ov := [{"tool": "task.create", "effect": "allow", "timeout_ms": null, "rate_per_minute": null}]
	r := [rule("task.create", {"deny": true})]
	denied(decide("task.create", {"overrides": ov, "team_rules": r}), ["team_rule_deny"])
}

test_team_rule_never_allows if {
	r := [rule("task.create", {"rate_per_minute": 5})]
	denied(decide("task.create", {"team_rules": r}), ["grant_required"])
}

test_team_rule_requires_an_approval_per_call if {
	r := [rule("math", {"require_approval": true})]
	pending(decide("math", {"team_rules": r}), ["approval_required", "category_a_default"])
	allowed(decide("math", {"team_rules": r, "approval": approved}), ["approved", "category_a_default"])
	allowed(decide("math", {"team_rules": r, "phase": "list"}), ["category_a_default"])
}

test_team_rule_rate_and_timeout_only_tighten if {
	d := decide("math", {"team_rules": [rule("math", {"rate_per_minute": 10, "timeout_ms": 200})]})
	allowed(d, ["category_a_default"])
	d.obligations.rate.per_minute == 10
	d.obligations.timeout_ms == 200
	loose := decide("math", {"team_rules": [rule("math", {"rate_per_minute": 100000, "timeout_ms": 60000})]})
	loose.obligations.rate.per_minute == 600
	loose.obligations.timeout_ms == 1500
}

# An override's rate replaces the category's, lower or higher (the route lets only admins
# raise it); the lowest of several overrides wins.
test_override_rate_replaces_the_category_default if {
	raised := [{"tool": "task.list", "effect": "allow", "timeout_ms": null, "rate_per_minute": 6000}]
	decide("task.list", {"overrides": raised}).obligations.rate.per_minute == 6000
	lower := [{"tool": "task.list", "effect": "allow", "timeout_ms": null, "rate_per_minute": 3}]
	decide("task.list", {"overrides": lower}).obligations.rate.per_minute == 3
	both := array.concat(raised, lower)
	decide("task.list", {"overrides": both}).obligations.rate.per_minute == 3
}

test_team_rule_rate_caps_an_override_rate if {
	ov := [{"tool": "task.list", "effect": "allow", "timeout_ms": null, "rate_per_minute": 1000}]
	d := decide("task.list", {"overrides": ov, "team_rules": [rule("task.list", {"rate_per_minute": 50})]})
	d.obligations.rate.per_minute == 50
}

test_team_rules_for_other_tools_do_not_apply if {
	r := [rule("task.list", {"deny": true, "rate_per_minute": 1, "timeout_ms": 10})]
	d := decide("math", {"team_rules": r})
	allowed(d, ["category_a_default"])
	d.obligations == {"timeout_ms": 1500, "rate": {"per_minute": 600}, "redact": []}
}

# --- team and confidential mode -------------------------------------------------------------

test_team_mismatch_denies_even_category_a if {
	denied(decide("math", {"team_id": "t2"}), ["team_mismatch"])
	denied(decide("task.list", {"team_id": "t2", "grants": [grant("task.list")]}), ["team_mismatch"])
}

test_no_context_team_is_no_mismatch if {
	allowed(decide("math", {"team_id": null}), ["category_a_default"])
}

test_confidential_mode_excludes_category_d if {
	o := {"confidential": true, "grants": gf, "args": order, "approval": approved}
	denied(decide("greenfood.order", o), ["confidential_excludes_category_d"])
}

test_confidential_mode_hides_category_d_from_the_list if {
	o := {"confidential": true, "grants": [grant("browser.full")], "phase": "list"}
	denied(decide("browser.full", o), ["confidential_excludes_category_d"])
}

test_confidential_mode_excludes_plugins if {
	o := {"confidential": true, "grants": [grant("plugin.echo")]}
	denied(decide("plugin.echo", o), ["confidential_excludes_plugins"])
	allowed(decide("plugin.echo", {"grants": [grant("plugin.echo")]}), ["granted"])
}

test_plugin_category_a_tool_is_not_default_enabled if {
	denied(decide("text.wordfreq", {}), ["grant_required"])
	denied(decide("text.wordfreq", {"phase": "list"}), ["grant_required"])
	allowed(decide("text.wordfreq", {"grants": [grant("text.wordfreq")]}), ["granted"])
	allowed(decide("math", {}), ["category_a_default"])
}

test_confidential_mode_redacts_args_and_output if {
	d := decide("math", {"confidential": true})
	allowed(d, ["category_a_default"])
	d.obligations.redact == ["args", "output"]
}

test_normal_mode_redacts_nothing if {
	d := decide("math", {})
	d.obligations.redact == []
}

# --- argument-aware rules -------------------------------------------------------------------

test_greenfood_agents_may_order_and_read_inventory if {
	o1 := {"grants": gf, "args": order, "approval": approved}
	allowed(decide("greenfood.order", o1), ["approved", "granted"])
	o := {"grants": gf, "args": {"op": "get_inventory"}, "approval": approved}
	allowed(decide("greenfood.order", o), ["approved", "granted"])
}

test_greenfood_agents_may_not_change_prices_or_stock if {
	forbidden := [
		{"op": "set_price", "product_id": "milk", "price": 1},
		{"op": "adjust_stock", "product_id": "milk", "delta": 5},
		{"product_id": "milk"},
	]
	every args in forbidden {
		denied(decide("greenfood.order", {"grants": gf, "args": args}), ["greenfood_op_forbidden"])
	}
}

test_greenfood_admin_may_set_prices if {
	o := {
		"roles": ["admin", "agent"], "grants": gf, "approval": approved,
		"args": {"op": "set_price", "product_id": "milk", "price": 1},
	}
	allowed(decide("greenfood.order", o), ["approved", "granted"])
}

test_greenfood_without_grant_reports_both_denials if {
	d := decide("greenfood.order", {"args": {"op": "set_price"}})
	denied(d, ["grant_required", "greenfood_op_forbidden"])
}

test_data_query_allows_only_named_queries if {
	g := [grant("data.query")]
	allowed(decide("data.query", {"grants": g, "args": {"query": "tasks_by_status"}}), ["granted"])
	allowed(decide("data.query", {"grants": g, "args": {"query": "usage_by_tool"}}), ["granted"])
	allowed(decide("data.query", {"grants": g, "args": {"query": "files_by_tag"}}), ["granted"])
	allowed(decide("data.query", {"grants": g, "args": {"query": "projects_by_status"}}), ["granted"])
	denied(decide("data.query", {"grants": g, "args": {"query": "files"}}), ["unknown_named_query"])
	sql := {"query": "select * from grants"}
	denied(decide("data.query", {"grants": g, "args": sql}), ["unknown_named_query"])
	denied(decide("data.query", {"grants": g, "args": {}}), ["unknown_named_query"])
}

test_argument_rules_do_not_apply_when_listing if {
	allowed(decide("data.query", {"grants": [grant("data.query")], "phase": "list"}), ["granted"])
	allowed(decide("greenfood.order", {"grants": gf, "phase": "list"}), ["granted"])
}

# --- agent templates: read by default, each write by its own grant (seed 001) ---------------

template_writes := ["template.create", "template.update", "template.delete"]

test_template_reads_need_no_grant if {
	allowed(decide("template.list", {}), ["default_read"])
	allowed(decide("template.read", {"args": {"template_id": "x"}}), ["default_read"])
	allowed(decide("template.read", {"grants": [grant("template.read")]}), ["default_read", "granted"])
}

test_template_reads_are_listed_without_a_grant if {
	allowed(decide("template.list", {"phase": "list"}), ["default_read"])
	allowed(decide("template.read", {"phase": "list"}), ["default_read"])
	every name in template_writes {
		denied(decide(name, {"phase": "list"}), ["grant_required"])
	}
}

test_template_writes_are_denied_without_a_grant if {
	every name in template_writes {
		denied(decide(name, {}), ["grant_required"])
	}
}

test_a_template_update_grant_allows_only_the_update if {
	g := [grant("template.update")]
	allowed(decide("template.update", {"grants": g}), ["granted"])
	denied(decide("template.create", {"grants": g}), ["grant_required"])
	denied(decide("template.delete", {"grants": g}), ["grant_required"])
}

test_default_reads_still_yield_to_deny_overrides_team_rules_and_team_checks if {
	ov := [{"tool": "template.read", "effect": "deny", "timeout_ms": null, "rate_per_minute": null}]
	denied(decide("template.read", {"overrides": ov}), ["override_deny"])
	r := [{"tool": "template.list", "deny": true, "require_approval": false, "timeout_ms": null, "rate_per_minute": null}]
	denied(decide("template.list", {"team_rules": r}), ["team_rule_deny"])
	denied(decide("template.list", {"team_id": "t2"}), ["team_mismatch"])
}

test_default_read_needs_a_read_tool_that_is_not_a_plugin if {
	# A write tool or a plugin that took a default-read name would still need its grant.
	w := tool("template.read", "B", "write", false, 3000)
	denied(decide("template.read", {"tool": w}), ["grant_required"])
	p := object.union(tool("template.read", "B", "read", false, 3000), {"plugin": true})
	denied(decide("template.read", {"tool": p}), ["grant_required"])
}

# --- approvals ------------------------------------------------------------------------------

test_category_d_call_without_approval_is_allowed_pending_approval if {
	d := decide("greenfood.order", {"grants": gf, "args": order})
	pending(d, ["approval_required", "granted"])
}

test_pending_approval_still_requires_approval if {
	o := {"grants": gf, "args": order, "approval": {"state": "pending", "args_match": true}}
	pending(decide("greenfood.order", o), ["approval_required", "granted"])
}

test_approved_call_with_the_same_args_is_allowed if {
	o := {"grants": [grant("greenfood.order")], "args": order, "approval": approved}
	allowed(decide("greenfood.order", o), ["approved", "granted"])
}

test_approval_for_other_args_is_no_approval if {
	o := {"grants": gf, "args": order, "approval": {"state": "approved", "args_match": false}}
	denied(decide("greenfood.order", o), ["approval_args_mismatch"])
}

test_denied_and_expired_approvals_deny if {
	no := {"grants": gf, "args": order, "approval": {"state": "denied", "args_match": true}}
	denied(decide("greenfood.order", no), ["approval_denied"])
	late := {"grants": gf, "args": order, "approval": {"state": "expired", "args_match": true}}
	denied(decide("greenfood.order", late), ["approval_expired"])
}

test_unknown_approval_state_fails_closed if {
	o := {"grants": gf, "args": order, "approval": {"state": "maybe", "args_match": true}}
	denied(decide("greenfood.order", o), ["approval_invalid"])
}

test_requires_approval_flag_applies_below_category_d if {
	g := [grant("task.purge")]
	pending(decide("task.purge", {"grants": g}), ["approval_required", "granted"])
	allowed(decide("task.purge", {"grants": g, "approval": approved}), ["approved", "granted"])
}

test_category_d_read_tool_needs_approval_too if {
	d := decide("browser.full", {"grants": [grant("browser.full")]})
	pending(d, ["approval_required", "granted"])
}

test_listing_never_needs_approval if {
	o := {"grants": gf, "phase": "list", "approval": {"state": "denied", "args_match": false}}
	allowed(decide("greenfood.order", o), ["granted"])
}

test_an_approval_never_replaces_a_grant if {
	denied(decide("greenfood.order", {"args": order, "approval": approved}), ["grant_required"])
}

test_an_approval_is_ignored_where_none_is_needed if {
	o := {"grants": [grant("task.list")], "approval": {"state": "denied", "args_match": false}}
	allowed(decide("task.list", o), ["granted"])
}

test_denial_reasons_are_all_listed_sorted if {
	o := {"team_id": "t2", "confidential": true, "args": {"op": "set_price"}}
	denied(decide("greenfood.order", o), [
		"confidential_excludes_category_d",
		"grant_required",
		"greenfood_op_forbidden",
		"team_mismatch",
	])
}

# --- obligations ----------------------------------------------------------------------------

test_category_defaults_cap_timeouts_and_set_rates if {
	obligations("math") == {"timeout_ms": 1500, "rate": {"per_minute": 600}, "redact": []}
	obligations("task.list") == {"timeout_ms": 3000, "rate": {"per_minute": 120}, "redact": []}
	obligations("data.query") == {"timeout_ms": 5000, "rate": {"per_minute": 30}, "redact": []}
	obligations("greenfood.order") == {"timeout_ms": 5000, "rate": {"per_minute": 5}, "redact": []}
	obligations("browser.full") == {"timeout_ms": 10000, "rate": {"per_minute": 5}, "redact": []}
}

test_override_timeout_only_tightens if {
	tight := [{"tool": "task.list", "effect": "allow", "timeout_ms": 500, "rate_per_minute": null}]
	d1 := decide("task.list", {"overrides": tight})
	d1.obligations.timeout_ms == 500
	loose := [{"tool": "task.list", "effect": "allow", "timeout_ms": 60000, "rate_per_minute": null}]
	d2 := decide("task.list", {"overrides": loose})
	d2.obligations.timeout_ms == 3000
}

test_override_rate_replaces_the_category_rate if {
	ov := [{"tool": "task.list", "effect": "allow", "timeout_ms": null, "rate_per_minute": 1000}]
	d := decide("task.list", {"overrides": ov})
	d.obligations.rate.per_minute == 1000
	d.obligations.timeout_ms == 3000
}

test_deny_override_limits_apply_too if {
	ov := [{"tool": "math", "effect": "deny", "timeout_ms": 100, "rate_per_minute": 2}]
	d := decide("math", {"overrides": ov})
	d.obligations.timeout_ms == 100
	d.obligations.rate.per_minute == 2
}

test_a_tool_without_timeout_gets_the_category_default if {
	t := object.union(tools["task.list"], {"timeout_ms": null})
	d := decide("task.list", {"tool": t})
	d.obligations.timeout_ms == 3000
}

test_unknown_category_fails_closed_with_a_decision if {
	t := object.union(tools["task.list"], {"category": "Z"})
	denied(decide("task.list", {"tool": t, "grants": [grant("task.list")]}), ["invalid_input"])
}

# --- standing approvals ---------------------------------------------------------------------

standing := {"state": "standing", "args_match": true, "standing_approval_id": "sa-1"}

test_a_standing_approval_stands_for_a_per_call_approval if {
	o := {"grants": [grant("energy.meter.read")], "args": {"meter_id": "em-1"}, "approval": standing}
	allowed(decide("energy.meter.read", o), ["granted", "standing_approval"])
}

test_a_standing_approval_never_replaces_a_grant if {
	o := {"args": {"meter_id": "em-1"}, "approval": standing}
	denied(decide("energy.meter.read", o), ["grant_required"])
}

test_a_standing_approval_that_does_not_match_or_name_itself_fails_closed if {
	other := {"state": "standing", "args_match": false, "standing_approval_id": "sa-1"}
	g := [grant("energy.meter.read")]
	denied(decide("energy.meter.read", {"grants": g, "approval": other}), ["approval_invalid"])
	nameless := {"state": "standing", "args_match": true}
	denied(decide("energy.meter.read", {"grants": g, "approval": nameless}), ["approval_invalid"])
}

test_a_team_rule_asking_for_approval_per_call_excludes_standing_approvals if {
	r := [rule("energy.meter.read", {"require_approval": true})]
	o := {"grants": [grant("energy.meter.read")], "args": {"meter_id": "em-1"}, "approval": standing, "team_rules": r}
	denied(decide("energy.meter.read", o), ["standing_approval_per_call_rule"])
	per_call := {"grants": [grant("energy.meter.read")], "approval": approved, "team_rules": r}
	allowed(decide("energy.meter.read", per_call), ["approved", "granted"])
}

test_a_standing_approval_does_not_lift_a_denial if {
	o := {"grants": gf, "args": {"op": "set_price"}, "approval": standing}
	denied(decide("greenfood.order", o), ["greenfood_op_forbidden"])
}

# --- operator-only tools --------------------------------------------------------------------

test_water_valve_set_is_denied_to_agents_even_granted_and_approved if {
	o := {"grants": [grant("water.valve.set")], "args": {"valve_id": "v", "open": false}, "approval": approved}
	denied(decide("water.valve.set", o), ["operator_only_tool"])
	denied(decide("water.valve.set", {"grants": [grant("water.valve.set")], "phase": "list"}), ["operator_only_tool"])
}

test_water_valve_set_is_for_admins_with_a_grant_and_an_approval if {
	g := [grant("water.valve.set")]
	o := {"roles": ["admin"], "grants": g, "args": {"valve_id": "v", "open": false}}
	pending(decide("water.valve.set", o), ["approval_required", "granted"])
	done := object.union(o, {"approval": approved})
	allowed(decide("water.valve.set", done), ["approved", "granted"])
}

# --- delegated least privilege: tool scopes -----------------------------------------------

test_a_token_without_tool_scopes_is_governed_by_grants_alone if {
	allowed(decide("math", {"scopes": ["mcp", "openid"]}), ["category_a_default"])
	allowed(decide("task.create", {"scopes": ["mcp"], "grants": [grant("task.create")]}), ["granted"])
}

test_tool_scopes_allow_only_the_tools_they_name if {
	allowed(decide("math", {"scopes": ["mcp", "tool.math.invoke"]}), ["category_a_default"])
	denied(decide("memory.write", {"scopes": ["tool.math.invoke"], "grants": [grant("memory.write")]}), ["scope_excludes_tool"])
	denied(decide("math", {"scopes": ["tool.task.list.invoke"], "phase": "list"}), ["scope_excludes_tool"])
}

test_a_tool_scope_is_no_grant if {
	denied(decide("task.create", {"scopes": ["tool.task.create.invoke"]}), ["grant_required"])
	allowed(decide("task.create", {"scopes": ["tool.task.create.invoke"], "grants": [grant("task.create")]}), ["granted"])
}

test_tool_scopes_match_exactly if {
	denied(decide("task.list", {"scopes": ["tool.task.invoke"], "grants": [grant("task.list")]}), ["scope_excludes_tool"])
	denied(decide("task.list", {"scopes": ["tool.*.invoke"], "grants": [grant("task.list")]}), ["scope_excludes_tool"])
}
