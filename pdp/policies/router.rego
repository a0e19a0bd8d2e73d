# Routing rules: which model (or registered agent) serves a request — router.route, and
# llm.chat with model "auto". Policy data like the authorization rules: governance changes it
# by pushing a policy revision (compiled and unit-tested before it is activated), and the
# router service follows the active revision within a second. Evaluated by regopy in the
# router service, never by the proxy's PDP; written for OPA 1.x too (`opa test` runs it).
#
# Input (built by services.router.rules.route_input):
#   team_id, agent_id, task (a label or null), prompt_tokens, completion_tokens,
#   cost_ceiling_1t (or null), confidential, kinds (["model"] and/or ["agent"]),
#   models (the allowlist, TOOLPROXY_LLM_MODELS), agents (the team's registered agent ids).
# Output: data.toolproxy.router.decision = {target: {kind, id} | null, reasons[]}.
package toolproxy.router

import rego.v1

# --- the data governance edits -------------------------------------------------------------

# Each model: its price per 1,000 tokens (prompt and completion) in 1T, the risk of sending a
# team's data there, a quality tier, and the task labels it serves ([]: any).
models := {
	"small": {"cost_per_1k_tokens_1t": 0.0002, "risk": "low", "quality": 1, "tasks": []},
	"medium": {"cost_per_1k_tokens_1t": 0.002, "risk": "medium", "quality": 2, "tasks": []},
	"large": {"cost_per_1k_tokens_1t": 0.02, "risk": "high", "quality": 3, "tasks": []},
}

# An allowlisted model the data does not describe: any task, medium risk, the lowest quality
# and an unknown price (so never chosen under a cost ceiling).
unknown_model := {"cost_per_1k_tokens_1t": null, "risk": "medium", "quality": 0, "tasks": []}

# Per team ("*": every team without an entry of its own): the highest risk its data may go
# to, a ceiling on one call's estimated cost (null: none), what to prefer among the models
# that fit ("cheapest" or "quality"), and task labels handled by one of its registered agents.
teams := {"*": {"max_risk": "medium", "cost_ceiling_1t": null, "prefer": "cheapest", "agents": {}}}

# Per task label: a tighter risk, a minimum quality.
tasks := {
	"pii": {"max_risk": "low"},
	"code": {"min_quality": 2},
	"reason": {"min_quality": 3},
}

# Confidential calls only go to models of at most this risk.
confidential_max_risk := "low"

# --- the rules -----------------------------------------------------------------------------

risk_levels := {"low": 1, "medium": 2, "high": 3}

risk_names := ["none", "low", "medium", "high"]

team_key := input.team_id if {
	teams[input.team_id]
} else := "*"

team_rule := object.get(teams, team_key, {})

task := object.get(input, "task", null)

task_rule := object.get(tasks, task, {})

confidential_risk := confidential_max_risk if {
	input.confidential == true
} else := "high"

# An unknown risk name allows nothing (a typo closes routing rather than opening it).
max_risk := least([object.get(risk_levels, r, 0) | some r in [
	object.get(team_rule, "max_risk", "high"),
	object.get(task_rule, "max_risk", "high"),
	confidential_risk,
]])

min_quality := object.get(task_rule, "min_quality", 0)

ceilings := [c |
	some c in [object.get(input, "cost_ceiling_1t", null), object.get(team_rule, "cost_ceiling_1t", null)]
	is_number(c)
]

ceiling := least(ceilings)

prefer := object.get(team_rule, "prefer", "cheapest")

profile(id) := p if {
	p := models[id]
} else := unknown_model

estimated_cost(id) := c if {
	rate := profile(id).cost_per_1k_tokens_1t
	is_number(rate)
	c := (rate * (input.prompt_tokens + input.completion_tokens)) / 1000
}

# [model, why] for every allowlisted model that does not fit.
excluded contains [id, "risk"] if {
	some id in input.models
	object.get(risk_levels, profile(id).risk, 4) > max_risk
}

excluded contains [id, "task"] if {
	some id in input.models
	task != null
	served := profile(id).tasks
	count(served) > 0
	not task in served
}

excluded contains [id, "quality"] if {
	some id in input.models
	profile(id).quality < min_quality
}

excluded contains [id, "cost_unknown"] if {
	some id in input.models
	count(ceilings) > 0
	not estimated_cost(id)
}

excluded contains [id, "cost"] if {
	some id in input.models
	estimated_cost(id) > ceiling
}

excluded_ids := {pair[0] | some pair in excluded}

candidates := {id | some id in input.models; "model" in input.kinds; not id in excluded_ids}

cost_rank(id) := c if {
	c := estimated_cost(id)
} else := 1000000000000

quality(id) := profile(id).quality

better(a, b) if {
	prefer == "quality"
	quality(a) > quality(b)
}

better(a, b) if {
	prefer == "quality"
	quality(a) == quality(b)
	cost_rank(a) < cost_rank(b)
}

better(a, b) if {
	prefer != "quality"
	cost_rank(a) < cost_rank(b)
}

better(a, b) if {
	prefer != "quality"
	cost_rank(a) == cost_rank(b)
	quality(a) > quality(b)
}

better(a, b) if {
	quality(a) == quality(b)
	cost_rank(a) == cost_rank(b)
	a < b
}

beaten contains b if {
	some a in candidates
	some b in candidates
	better(a, b)
}

chosen_model := m if {
	some m in candidates
	not m in beaten
}

# A task label the team hands to one of its registered agents.
agent_route := id if {
	"agent" in input.kinds
	task != null
	id := object.get(object.get(team_rule, "agents", {}), task, null)
	id in input.agents
}

notes contains concat(":", ["team_rule", team_key])

notes contains concat(":", ["task", task]) if task != null

notes contains concat(":", ["max_risk", risk_names[max_risk]])

notes contains sprintf("min_quality:%v", [min_quality]) if min_quality > 0

notes contains sprintf("cost_ceiling_1t:%v", [ceiling]) if count(ceilings) > 0

notes contains "confidential" if input.confidential == true

notes contains concat(":", ["prefer", prefer])

notes contains concat(":", ["excluded", pair[0], pair[1]]) if {
	some pair in excluded
}

decision := {"target": {"kind": "agent", "id": id}, "reasons": array.concat(sorted(notes), [concat(":", ["agent_route", task])])} if {
	id := agent_route
} else := {"target": {"kind": "model", "id": id}, "reasons": array.concat(sorted(notes), [concat(":", ["chose", id])])} if {
	id := chosen_model
} else := {"target": null, "reasons": array.concat(sorted(notes), ["no_target_fits"])}

# A sorted array of a set's members (rego-cpp's sort of a set returns a set).
sorted(s) := sort([x | some x in s])

# The smallest number. Not min(): rego-cpp's min orders numbers as text.
least(xs) := m if {
	some m in xs
	every x in xs {
		m <= x
	}
}
