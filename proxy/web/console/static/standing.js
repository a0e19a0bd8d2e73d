// Standing approvals of the team (pre-approved calls: a tool, optionally one agent and an
// argument constraint, a call budget and an expiry): listed, added, and revocable at once.
import { api, ApiError, query } from "./api.js";
import { clear, field, h, isoFromLocal, json, table, when } from "./dom.js";
import { toolSelect, tools } from "./grants.js";

const MAX_CALLS = 1000000;

// A JSON object typed in a textarea, or null when it is empty; throws with the field's name.
function objectOf(text, name) {
  if (!text.trim()) return null;
  let value;
  try { value = JSON.parse(text); } catch { throw new Error(`${name} is not valid JSON`); }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`${name} must be a JSON object`);
  return value;
}

// The form: only tools that wait for an approval (a standing one is what replaces it).
function addForm(list, team, act) {
  const held = list.filter((t) => t.requires_approval || t.category === "D");
  const tool = toolSelect(held);
  const agent = h("input", { maxlength: 64, size: 14, placeholder: "every agent" });
  const args = h("textarea", { rows: 3, cols: 32, maxlength: 8192, placeholder: '{"op": "create_order"}' });
  const schema = h("textarea", { rows: 3, cols: 32, maxlength: 8192, placeholder: "a JSON Schema (optional)" });
  const expires = h("input", { type: "datetime-local", required: true });
  const calls = h("input", { type: "number", min: 1, max: MAX_CALLS, size: 7, required: true, value: "10" });
  const reason = h("input", { maxlength: 500, size: 20 });
  const submit = (event) => {
    event.preventDefault();
    act(() => {
      const body = {
        team_id: team(), tool: tool.value, agent_id: agent.value.trim() || null,
        expires_at: isoFromLocal(expires.value), max_calls: Number(calls.value), reason: reason.value,
      };
      const a = objectOf(args.value, "arguments");
      const sch = objectOf(schema.value, "argument schema");
      if (a) body.args = a;
      if (sch) body.args_schema = sch;
      return api("POST", "/v1/admin/standing-approvals", body);
    });
  };
  return h("form", { class: "row", id: "standing-form", onsubmit: submit },
    field("tool", tool), field("agent (empty: the whole team)", agent), field("arguments equal", args),
    field("arguments match", schema), field("expires", expires), field("max calls", calls),
    field("reason", reason), h("button", { type: "submit" }, "Add standing approval"));
}

export async function show(box, ctx) {
  const msg = h("p", { class: "error", role: "alert" });
  const body = h("div");
  const refresh = async () => {
    msg.textContent = "";
    let data;
    try {
      data = await api("GET", `/v1/admin/standing-approvals${query({ team_id: ctx.isAdmin ? ctx.picked() : "" })}`);
    } catch (e) {
      msg.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
      return;
    }
    const rows = data.standing_approvals;
    const revoke = async (s) => {
      try {
        await api("POST", `/v1/admin/standing-approvals/${encodeURIComponent(s.standing_approval_id)}/revoke`);
      } catch (e) {
        msg.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
      }
      await refresh();
    };
    const constraint = (s) => {
      const parts = [];
      if (s.args) parts.push(h("pre", null, `args = ${json(s.args)}`));
      if (s.args_schema) parts.push(h("pre", null, `args match ${json(s.args_schema)}`));
      return parts.length ? parts : "any arguments";
    };
    clear(body, rows.length ? table([
      { label: "tool", get: (s) => s.tool },
      { label: "agent", get: (s) => s.agent_id || "(every agent)" },
      { label: "team", get: (s) => s.team_id },
      { label: "arguments", get: constraint },
      { label: "calls", get: (s) => `${s.used_calls} / ${s.max_calls}`, num: true },
      { label: "expires", get: (s) => when(s.expires_at) },
      { label: "state", get: (s) => s.state },
      { label: "reason", get: (s) => s.reason },
      { label: "by", get: (s) => s.created_by },
      { label: "", get: (s) => (s.state === "active"
        ? h("button", { type: "button", class: "danger", onclick: () => revoke(s) }, "Revoke") : "") },
    ], rows) : h("p", { class: "empty" }, "No standing approvals."));
  };
  const act = async (fn) => {
    msg.textContent = "";
    try {
      await fn();
    } catch (e) {
      msg.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : (e.message || String(e));
      return;
    }
    await refresh();
  };
  let form = "";
  try {
    form = addForm(await tools(), () => ctx.team(), act);
  } catch (e) {
    msg.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
  }
  clear(box, h("h3", null, "Standing approvals ",
    h("button", { type: "button", onclick: () => refresh() }, "Refresh")), msg, body, form);
  await refresh();
}
