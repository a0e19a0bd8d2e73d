# Unit tests for toolproxy.router; run by `toolproxy policy test` (pdp.rego_tests), by a
# policy push, and by `opa test`. Inputs are set key by key (see authz_test.rego: rego-cpp
# aborts on a whole-input `with` over rules that read other rules).
package toolproxy.router_test

import rego.v1

import data.toolproxy.router

# The request of agent a1 of team t1; keys of `o` replace the defaults. The rules are a
# function of the request and the data: no `with` needed (see router.rego).
req(o) := {
	"team_id": object.get(o, "team_id", "t1"),
	"agent_id": "a1",
	"task": object.get(o, "task", null),
	"prompt_tokens": object.get(o, "prompt_tokens", 100),
	"completion_tokens": object.get(o, "completion_tokens", 500),
	"cost_ceiling_1t": object.get(o, "cost_ceiling_1t", null),
	"confidential": object.get(o, "confidential", false),
	"kinds": object.get(o, "kinds", ["model", "agent"]),
	"models": object.get(o, "models", ["small", "medium", "large"]),
	"agents": object.get(o, "agents", []),
}

route(o) := router.route(req(o), router.rules)

# The shipped data with other team rules.
with_teams(t) := {
	"models": router.models, "unknown_model": router.unknown_model, "teams": t,
	"tasks": router.tasks, "confidential_max_risk": router.confidential_max_risk,
}

route_teams(o, t) := router.route(req(o), with_teams(t))

model(d) := d.target.id if d.target.kind == "model"

test_cheapest_model_within_the_default_risk if {
	d := route({})
	model(d) == "small"
	"excluded:large:risk" in d.reasons
	"chose:small" in d.reasons
}

test_a_task_needing_quality_gets_a_better_model if {
	d := route({"task": "code"})
	model(d) == "medium"
	"excluded:small:quality" in d.reasons
}

test_no_target_when_quality_needs_more_risk_than_allowed if {
	d := route({"task": "reason"})
	d.target == null
	"no_target_fits" in d.reasons
}

test_pii_only_goes_to_low_risk_models if {
	d := route({"task": "pii", "models": ["medium", "large"]})
	d.target == null
	"max_risk:low" in d.reasons
	"excluded:medium:risk" in d.reasons
}

test_confidential_calls_only_go_to_low_risk_models if {
	d := route({"confidential": true, "task": "code"})
	d.target == null
	"confidential" in d.reasons
}

test_a_cost_ceiling_excludes_the_models_that_cost_more if {
	# 600 tokens: small 0.00012, medium 0.0012
	d := route({"task": "code", "cost_ceiling_1t": 0.001})
	d.target == null
	"excluded:medium:cost" in d.reasons
	route({"task": "code", "cost_ceiling_1t": 0.002}).target.id == "medium"
}

test_an_undescribed_model_is_never_chosen_under_a_ceiling if {
	route({"models": ["other"]}).target.id == "other"
	d := route({"models": ["other"], "cost_ceiling_1t": 100})
	d.target == null
	"excluded:other:cost_unknown" in d.reasons
}

test_only_allowlisted_models_are_chosen if {
	route({"models": ["medium"]}).target.id == "medium"
	route({"models": []}).target == null
}

research := {
	"*": {"max_risk": "medium", "cost_ceiling_1t": null, "prefer": "cheapest", "agents": {}},
	"t_research": {"max_risk": "high", "cost_ceiling_1t": 0.05, "prefer": "quality", "agents": {"triage": "triager"}},
}

test_a_team_rule_replaces_the_default if {
	d := route_teams({"team_id": "t_research"}, research)
	model(d) == "large"
	"team_rule:t_research" in d.reasons
	"prefer:quality" in d.reasons
	other := route_teams({"team_id": "t_other"}, research)
	model(other) == "small"
}

test_the_team_ceiling_applies_with_the_request_one if {
	# large: 600 tokens cost 0.012, under the team's 0.05 but not under the request's 0.01
	d := route_teams({"team_id": "t_research", "cost_ceiling_1t": 0.01}, research)
	model(d) == "medium"
	"cost_ceiling_1t:0.01" in d.reasons
}

test_a_task_label_routes_to_the_teams_registered_agent if {
	d := route_teams({"team_id": "t_research", "task": "triage", "agents": ["triager"]}, research)
	d.target == {"kind": "agent", "id": "triager"}
	"agent_route:triage" in d.reasons
}

test_an_agent_route_needs_the_agent_registered_and_wanted if {
	unregistered := route_teams({"team_id": "t_research", "task": "triage"}, research)
	unregistered.target.kind == "model"
	models_only := route_teams({"team_id": "t_research", "task": "triage", "agents": ["triager"], "kinds": ["model"]}, research)
	models_only.target.kind == "model"
}

test_an_unknown_risk_name_allows_nothing if {
	typo := {"*": {"max_risk": "mediun", "cost_ceiling_1t": null, "prefer": "cheapest", "agents": {}}}
	d := route_teams({}, typo)
	d.target == null
}
