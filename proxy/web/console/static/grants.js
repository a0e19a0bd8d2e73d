// Grants and per-agent overrides of the team: list, add, revoke.
import { api, ApiError, query } from "./api.js";
import { clear, field, h, isoFromLocal, options, table, when } from "./dom.js";

let catalog = null;

export async function tools() {
  if (!catalog) catalog = (await api("GET", "/console/api/catalog")).tools;
  return catalog;
}

export function toolSelect(list) {
  return h("select", { required: true }, options(list.map((t) => [t.tool_id, `${t.tool_id} (${t.category}, ${t.action})`]), ""));
}

export function failure(e) {
  return e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
}

export async function show(section, ctx) {
  const team = ctx.team();
  const grantsBox = h("div");
  const overridesBox = h("div");
  const msg = h("p", { class: "error", role: "alert" });
  clear(section, h("h2", null, `Grants and overrides — team ${team}`), msg,
    h("h3", null, "Grants"), grantsBox, h("h3", null, "Overrides"), overridesBox);
  let list;
  try { list = await tools(); } catch (e) { msg.textContent = failure(e); return; }
  const act = async (fn) => {
    msg.textContent = "";
    try { await fn(); await refresh(); } catch (e) { msg.textContent = failure(e); }
  };
  const refresh = async () => {
    const [g, o] = await Promise.all([
      api("GET", `/v1/admin/grants${query({ team_id: team })}`),
      api("GET", `/v1/admin/overrides${query({ team_id: team })}`),
    ]);
    renderGrants(grantsBox, team, list, g.grants, act);
    renderOverrides(overridesBox, team, list, o.overrides, act);
  };
  try { await refresh(); } catch (e) { msg.textContent = failure(e); }
}

function renderGrants(box, team, list, grants, act) {
  const agent = h("input", { maxlength: 64, size: 14, placeholder: "every agent" });
  const tool = toolSelect(list);
  const expires = h("input", { type: "datetime-local" });
  const add = (event) => {
    event.preventDefault();
    act(() => api("POST", "/v1/admin/grants", {
      team_id: team, agent_id: agent.value.trim() || null, capability: `tool.${tool.value}.invoke`,
      expires_at: isoFromLocal(expires.value) || null,
    }));
  };
  const columns = [
    { label: "agent", get: (g) => g.agent_id || "(every agent)" },
    { label: "capability", get: (g) => g.capability },
    { label: "expires", get: (g) => when(g.expires_at) },
    { label: "by", get: (g) => g.created_by },
    { label: "", get: (g) => h("button", { type: "button", class: "danger", onclick: () => act(() =>
      api("POST", "/v1/admin/grants/revoke", { team_id: team, agent_id: g.agent_id, capability: g.capability })) }, "Revoke") },
  ];
  clear(box,
    grants.length ? table(columns, grants) : h("p", { class: "empty" }, "No grants."),
    h("form", { class: "row", id: "grant-form", onsubmit: add },
      field("agent (empty: the whole team)", agent), field("tool", tool), field("expires", expires),
      h("button", { type: "submit" }, "Add grant")));
}

function renderOverrides(box, team, list, overrides, act) {
  const agent = h("input", { maxlength: 64, size: 14, required: true });
  const tool = toolSelect(list);
  const effect = h("select", null, options([["allow", "allow"], ["deny", "deny"]], "deny"));
  const timeout = h("input", { type: "number", min: 1, max: 60000, size: 7 });
  const rate = h("input", { type: "number", min: 0, max: 1000000, size: 7 });
  const reason = h("input", { maxlength: 500, size: 20 });
  const expires = h("input", { type: "datetime-local" });
  const add = (event) => {
    event.preventDefault();
    act(() => api("POST", "/v1/admin/overrides", {
      team_id: team, agent_id: agent.value.trim(), tool: tool.value, effect: effect.value,
      timeout_ms: timeout.value ? Number(timeout.value) : null,
      rate_per_minute: rate.value ? Number(rate.value) : null,
      reason: reason.value, expires_at: isoFromLocal(expires.value) || null,
    }));
  };
  const columns = [
    { label: "agent", get: (o) => o.agent_id },
    { label: "tool", get: (o) => o.tool },
    { label: "effect", get: (o) => o.effect },
    { label: "deadline", get: (o) => (o.timeout_ms ? `${o.timeout_ms} ms` : "—") },
    { label: "rate/min", get: (o) => (o.rate_per_minute ?? "—") },
    { label: "reason", get: (o) => o.reason },
    { label: "expires", get: (o) => when(o.expires_at) },
    { label: "", get: (o) => h("button", { type: "button", class: "danger", onclick: () => act(() =>
      api("POST", "/v1/admin/overrides/delete", { team_id: team, agent_id: o.agent_id, tool: o.tool })) }, "Delete") },
  ];
  clear(box,
    overrides.length ? table(columns, overrides) : h("p", { class: "empty" }, "No overrides."),
    h("form", { class: "row", id: "override-form", onsubmit: add },
      field("agent", agent), field("tool", tool), field("effect", effect), field("deadline ms", timeout),
      field("rate/min", rate), field("reason", reason), field("expires", expires),
      h("button", { type: "submit" }, "Add override")));
}
