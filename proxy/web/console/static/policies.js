// Policies: the serving revision and its modules (read-only), the Rego unit test results it
// was pushed with, the revisions; the team's rules (its own tightening, editable); admins
// push a new revision from .rego files.
import { api, query } from "./api.js";
import { clear, field, h, isoFromLocal, table, when } from "./dom.js";
import { failure, toolSelect, tools } from "./grants.js";

export async function show(section, ctx) {
  const msg = h("p", { class: "error", role: "alert" });
  const serving = h("div");
  const rules = h("div");
  const push = h("div");
  clear(section, h("h2", null, "Policies"), msg, serving,
    h("h3", null, `Team rules — team ${ctx.team()}`), rules, ctx.isAdmin ? push : null);
  const loadServing = async () => {
    try { renderServing(serving, await api("GET", "/console/api/policy")); } catch (e) { msg.textContent = failure(e); }
  };
  await Promise.all([loadServing(), loadRules(rules, ctx.team(), msg)]);
  if (ctx.isAdmin) renderPush(push, loadServing);
}

function renderServing(box, view) {
  const s = view.serving;
  const t = view.tests;
  const testsPart = t
    ? [h("p", { id: "test-summary" },
        h("span", { class: t.failed ? "failed" : "passed" }, `${t.passed} passed, ${t.failed} failed`),
        ` (${t.tests.join(", ") || "no test files"}; ran ${when(t.ran_at)})`),
       h("details", { open: t.failed > 0, id: "test-results" }, h("summary", null, `${t.results.length} tests`),
         table([
           { label: "package", get: (r) => r.package },
           { label: "test", get: (r) => r.name },
           { label: "result", get: (r) => (r.passed ? "passed" : "failed"), cls: (r) => (r.passed ? "passed" : "failed") },
           { label: "error", get: (r) => r.error || "" },
         ], t.results))]
    : [h("p", { class: "muted" }, "No unit test results were recorded for this revision.")];
  clear(box,
    h("dl", { class: "facts" },
      h("dt", null, "serving revision"), h("dd", { id: "serving-revision" }, s.revision),
      h("dt", null, "engine"), h("dd", null, s.engine),
      h("dt", null, "from"), h("dd", null, s.source === "pushed" ? "pushed through the API" : s.source === "directory" ? "a policy directory" : "unknown")),
    h("h3", null, "Modules (read-only)"),
    Object.keys(view.modules).sort().map((name) =>
      h("details", null, h("summary", null, name), h("pre", null, view.modules[name]))),
    h("h3", null, "Rego unit tests of this revision"), testsPart,
    h("h3", null, "Revisions"),
    view.revisions.length ? table([
      { label: "revision", get: (r) => r.revision },
      { label: "pushed", get: (r) => when(r.created_at) },
      { label: "by", get: (r) => r.created_by },
      { label: "active", get: (r) => (r.active ? "yes" : "") },
      { label: "files", get: (r) => (r.files || []).join(", ") },
    ], view.revisions) : h("p", { class: "muted" }, "No revision was pushed yet."));
}

async function loadRules(box, team, msg) {
  let list;
  let rules;
  try {
    [list, rules] = await Promise.all([tools(), api("GET", `/v1/admin/team-rules${query({ team_id: team })}`)]);
  } catch (e) { msg.textContent = failure(e); return; }
  const act = async (fn) => {
    msg.textContent = "";
    try { await fn(); await loadRules(box, team, msg); } catch (e) { msg.textContent = failure(e); }
  };
  const tool = toolSelect(list);
  const deny = h("input", { type: "checkbox" });
  const approval = h("input", { type: "checkbox" });
  const timeout = h("input", { type: "number", min: 1, max: 60000, size: 7 });
  const rate = h("input", { type: "number", min: 0, max: 1000000, size: 7 });
  const reason = h("input", { maxlength: 500, size: 20 });
  const expires = h("input", { type: "datetime-local" });
  const add = (event) => {
    event.preventDefault();
    act(() => api("POST", "/v1/admin/team-rules", {
      team_id: team, tool: tool.value, deny: deny.checked, require_approval: approval.checked,
      timeout_ms: timeout.value ? Number(timeout.value) : null,
      rate_per_minute: rate.value ? Number(rate.value) : null,
      reason: reason.value, expires_at: isoFromLocal(expires.value) || null,
    }));
  };
  const columns = [
    { label: "tool", get: (r) => r.tool },
    { label: "deny", get: (r) => (r.deny ? "yes" : "") },
    { label: "approval per call", get: (r) => (r.require_approval ? "yes" : "") },
    { label: "deadline", get: (r) => (r.timeout_ms ? `${r.timeout_ms} ms` : "—") },
    { label: "rate/min", get: (r) => (r.rate_per_minute ?? "—") },
    { label: "reason", get: (r) => r.reason },
    { label: "expires", get: (r) => when(r.expires_at) },
    { label: "", get: (r) => h("button", { type: "button", class: "danger", onclick: () => act(() =>
      api("POST", "/v1/admin/team-rules/delete", { team_id: team, tool: r.tool })) }, "Delete") },
  ];
  clear(box,
    rules.team_rules.length ? table(columns, rules.team_rules) : h("p", { class: "empty" }, "No team rules."),
    h("form", { class: "row", id: "rule-form", onsubmit: add },
      field("tool", tool), field("deny", deny), field("approval per call", approval),
      field("deadline ms", timeout), field("rate/min", rate), field("reason", reason),
      field("expires", expires), h("button", { type: "submit" }, "Set rule")));
}

function renderPush(box, reload) {
  const files = h("input", { type: "file", multiple: true, accept: ".rego", "aria-label": "policy files" });
  const out = h("p", { role: "status" });
  const push = async (event) => {
    event.preventDefault();
    out.className = "";
    out.textContent = "Testing and pushing…";
    try {
      const modules = {};
      for (const f of files.files) modules[f.name] = await f.text();
      const done = await api("POST", "/v1/admin/policies", { modules });
      out.className = "passed";
      out.textContent = `Revision ${done.revision} is active.${done.note ? ` (${done.note})` : ""}`;
      await reload();
    } catch (e) {
      out.className = "failed";
      out.textContent = failure(e);
    }
  };
  clear(box, h("h3", null, "Push a new revision (admins)"),
    h("p", { class: "muted" }, "Every module of the new revision, with its *_test.rego files: the tests must pass. It applies to every team."),
    h("form", { class: "row", id: "push-form", onsubmit: push }, files, h("button", { type: "submit" }, "Test and push")),
    out);
}
