// The decision log: filters (agent, tool, result, phase, time); a row opens the policy input
// and output of that decision and its policy revision.
import { api, ApiError, query } from "./api.js";
import { clear, field, h, isoFromLocal, json, options, table, when } from "./dom.js";

const RESULTS = [["", "any"], ["allow", "allow"], ["deny", "deny"], ["approval_required", "approval required"], ["error", "error"]];
const PHASES = [["", "any"], ["call", "call"], ["list", "list"]];

export function show(section, ctx) {
  const f = {
    agent_id: h("input", { maxlength: 64, size: 14 }),
    tool: h("input", { maxlength: 64, size: 16 }),
    result: h("select", null, options(RESULTS, "")),
    phase: h("select", null, options(PHASES, "call")),
    since: h("input", { type: "datetime-local" }),
    until: h("input", { type: "datetime-local" }),
  };
  const out = h("div");
  const detail = h("div");
  const load = async (event) => {
    if (event) event.preventDefault();
    const params = {
      team_id: ctx.isAdmin ? ctx.team() : "", agent_id: f.agent_id.value.trim(), tool: f.tool.value.trim(),
      result: f.result.value, phase: f.phase.value, since: isoFromLocal(f.since.value),
      until: isoFromLocal(f.until.value), limit: 200,
    };
    clear(detail);
    try {
      const data = await api("GET", `/v1/admin/decisions${query(params)}`);
      render(out, detail, data.decisions);
    } catch (e) {
      clear(out, h("p", { class: "error" }, e instanceof ApiError ? `${e.code}: ${e.message}` : String(e)));
    }
  };
  const form = h("form", { class: "row", onsubmit: load },
    field("agent", f.agent_id), field("tool", f.tool), field("result", f.result),
    field("phase", f.phase), field("since", f.since), field("until", f.until),
    h("button", { type: "submit" }, "Filter"));
  clear(section, h("h2", null, "Decision log"), form, out, detail);
  load();
}

function render(out, detail, rows) {
  if (!rows.length) {
    clear(out, h("p", { class: "empty" }, "No decisions match."));
    return;
  }
  const columns = [
    { label: "time", get: (d) => when(d.time) },
    { label: "agent", get: (d) => d.agent_id },
    { label: "tool", get: (d) => d.tool },
    { label: "phase", get: (d) => d.phase },
    { label: "result", get: (d) => d.result, cls: (d) => `result-${d.result}` },
    { label: "reasons", get: (d) => (d.reasons || []).join(", ") },
    { label: "revision", get: (d) => d.policy_revision },
  ];
  let picked = null;
  clear(out, table(columns, rows, (d, tr) => {
    if (picked) picked.classList.remove("picked");
    picked = tr;
    tr.classList.add("picked");
    open(detail, d);
  }));
}

function open(detail, d) {
  const output = d.output || { result: d.result, reasons: d.reasons, error_code: d.error_code };
  clear(detail, h("section", { class: "detail", id: "decision-detail" },
    h("h3", null, `Decision ${d.decision_id}`),
    h("dl", { class: "facts" },
      h("dt", null, "policy revision"), h("dd", null, d.policy_revision),
      h("dt", null, "engine"), h("dd", null, d.engine),
      h("dt", null, "call"), h("dd", null, d.call_id || "—"),
      h("dt", null, "latency"), h("dd", null, `${Math.round(d.latency_us)} µs`)),
    h("div", { class: "cols" },
      h("div", null, h("h3", null, "Policy input"), h("pre", { class: "input" }, d.input ? json(d.input) : "(not kept)")),
      h("div", null, h("h3", null, "Policy output"), h("pre", { class: "output" }, json(output))))));
  detail.scrollIntoView({ block: "nearest" });
}
