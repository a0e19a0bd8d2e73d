// Standing approvals of the team (pre-approved calls: a tool, optionally one agent and an
// argument constraint, a call budget and an expiry): listed, and revocable at once.
import { api, ApiError, query } from "./api.js";
import { clear, h, json, table, when } from "./dom.js";

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
  clear(box, h("h3", null, "Standing approvals ",
    h("button", { type: "button", onclick: () => refresh() }, "Refresh")), msg, body);
  await refresh();
}
