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

# The data above, as one value: the rules are a function of a request and of this, so tests
# pass other data without `with` (which rego-cpp evaluates slowly over rules that read rules).
rules := {
	"models": models, "unknown_model": unknown_model, "teams": teams, "tasks": tasks,
	"confidential_max_risk": confidential_max_risk,
}

decision := route(input, rules)

risk_levels := {"low": 1, "medium": 2, "high": 3}

risk_names := ["none", "low", "medium", "high"]

unknown_cost := 1000000000000

# Computed once, in one body: every intermediate value is a local.
route(req, r) := outcome(agent, chosen, notes, task) if {
	team_key := team_key_of(req.team_id, r.teams)
	team_rule := object.get(r.teams, team_key, {})
	task := object.get(req, "task", null)
	task_rule := object.get(r.tasks, task, {})

	# An unknown risk name allows nothing (a typo closes routing rather than opening it).
	max_risk := least([object.get(risk_levels, name, 0) | some name in [
		object.get(team_rule, "max_risk", "high"),
		object.get(task_rule, "max_risk", "high"),
		confidential_risk(req, r),
	]])
	min_quality := object.get(task_rule, "min_quality", 0)
	ceiling := least_or_null([c |
		some c in [object.get(req, "cost_ceiling_1t", null), object.get(team_rule, "cost_ceiling_1t", null)]
		is_number(c)
	])
	prefer := object.get(team_rule, "prefer", "cheapest")
	tokens := req.prompt_tokens + req.completion_tokens

	info := {id: model_info(object.get(r.models, id, r.unknown_model), tokens) | some id in req.models}
	excluded := {[id, why] |
		some id in req.models
		some why in why_not(info[id], task, max_risk, min_quality, ceiling)
	}
	excluded_ids := {pair[0] | some pair in excluded}
	candidates := {id | some id in req.models; "model" in req.kinds; not id in excluded_ids}

	agent := agent_target(req, team_rule, task)
	chosen := best([[id, k[0], k[1]] | some id in candidates; k := order_key(info[id], prefer)])
	notes := (({
		concat(":", ["team_rule", team_key]),
		concat(":", ["max_risk", risk_names[max_risk]]),
		concat(":", ["prefer", prefer]),
	} | task_note(task)) | ((quality_note(min_quality) | ceiling_note(ceiling)) | confidential_note(req))) | {concat(":", ["excluded", pair[0], pair[1]]) | some pair in excluded}
}

team_key_of(team, teams) := team if {
	teams[team]
} else := "*"

confidential_risk(req, r) := r.confidential_max_risk if {
	req.confidential == true
} else := "high"

model_info(p, tokens) := {"cost": model_cost(p, tokens), "quality": p.quality, "risk": object.get(risk_levels, p.risk, 4), "tasks": p.tasks}

model_cost(p, tokens) := (p.cost_per_1k_tokens_1t * tokens) / 1000 if {
	is_number(p.cost_per_1k_tokens_1t)
} else := null

# Why a model does not fit (an empty set: it does).
why_not(m, task, max_risk, min_quality, ceiling) := ((risk_why(m, max_risk) | task_why(m, task)) | quality_why(m, min_quality)) | cost_why(m, ceiling)

risk_why(m, max_risk) := {"risk"} if {
	m.risk > max_risk
} else := set()

task_why(m, task) := {"task"} if {
	task != null
	count(m.tasks) > 0
	not task in m.tasks
} else := set()

quality_why(m, min_quality) := {"quality"} if {
	m.quality < min_quality
} else := set()

cost_why(m, ceiling) := {"cost_unknown"} if {
	ceiling != null
	m.cost == null
} else := {"cost"} if {
	ceiling != null
	m.cost > ceiling
} else := set()

# The best candidate: the smallest [first key, second key], then the smallest id. Entries are
# [id, first, second] (rego-cpp cannot index an object argument from inside a comprehension).
best(entries) := id if {
	count(entries) > 0
	first := least([e[1] | some e in entries])
	tied := [e | some e in entries; e[1] == first]
	second := least([e[2] | some e in tied])
	id := sort([e[0] | some e in tied; e[2] == second])[0]
} else := null

order_key(m, prefer) := [0 - m.quality, known_cost(m.cost)] if {
	prefer == "quality"
} else := [known_cost(m.cost), 0 - m.quality]

known_cost(c) := c if {
	is_number(c)
} else := unknown_cost

# A task label the team hands to one of its registered agents.
agent_target(req, team_rule, task) := id if {
	"agent" in req.kinds
	task != null
	id := object.get(object.get(team_rule, "agents", {}), task, null)
	id in req.agents
} else := null

task_note(task) := {concat(":", ["task", task])} if {
	task != null
} else := set()

quality_note(q) := {sprintf("min_quality:%v", [q])} if {
	q > 0
} else := set()

ceiling_note(c) := {sprintf("cost_ceiling_1t:%v", [c])} if {
	c != null
} else := set()

confidential_note(req) := {"confidential"} if {
	req.confidential == true
} else := set()

outcome(agent, chosen, notes, task) := {"target": {"kind": "agent", "id": agent}, "reasons": array.concat(sorted(notes), [concat(":", ["agent_route", task])])} if {
	agent != null
} else := {"target": {"kind": "model", "id": chosen}, "reasons": array.concat(sorted(notes), [concat(":", ["chose", chosen])])} if {
	chosen != null
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

least_or_null(xs) := least(xs) if {
	count(xs) > 0
} else := null
