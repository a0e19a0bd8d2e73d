// One upstream's tools: each with its state; a candidate's definition and the form that
// classifies it; a changed tool's pinned and new definitions side by side with the changed
// lines marked, and the approval that re-pins the hash shown. Every definition is the
// upstream's text: put in as text only, invisible characters made visible.
import { api } from "./api.js";
import { clear, field, h, json, options } from "./dom.js";
import { lineDiff } from "./linediff.js";

const FLAGS = {
  instructions_to_model: "its description or schema has sentences aimed at the model, not at a reader (tool poisoning?)",
  invisible_characters: "it carries invisible or direction-changing characters (shown below as ⟦U+…⟧)",
};
// Zero-width, word joiner, BOM, bidirectional overrides and isolates, Unicode tag characters.
const INVISIBLE = /[\u200B-\u200D\u2060\uFEFF\u202A-\u202E\u2066-\u2069]|\uDB40[\uDC00-\uDC7F]/g;

export function visible(text) {
  return String(text).replace(INVISIBLE, (c) => `⟦U+${c.codePointAt(0).toString(16).toUpperCase()}⟧`);
}

// The same value whatever order its keys were stored in (Postgres' jsonb reorders them).
function sorted(value) {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted(value[k])]));
  }
  return value;
}

// A definition as governance reads it: the description as it is, the schemas pretty-printed.
export function definitionText(d) {
  return [`title: ${d.title ?? "—"}`, "description:", d.description || "", "",
    "input schema:", json(sorted(d.input_schema ?? null)), "",
    "output schema:", json(sorted(d.output_schema ?? null)), "",
    "annotations:", json(sorted(d.annotations ?? null))].join("\n");
}

function pinnedDefinition(pinned) {
  try { return JSON.parse(pinned.definition_text); } catch { return { description: pinned.description, input_schema: pinned.input_schema }; }
}

const short = (hash) => `${String(hash).slice(0, 12)}…`;

function lines(cls, marked) {
  return h("pre", { class: `diff ${cls}` },
    marked.map((l) => h("span", { class: `line ${l.mark}` }, visible(l.text) || " ")));
}

function difference(t, approve) { // approve: null when this identity may not
  const d = lineDiff(definitionText(pinnedDefinition(t.pinned)), definitionText(t));
  return h("div", { class: "pin-diff" },
    h("div", { class: "cols" },
      h("div", null, h("h4", null, `Pinned (approved) — ${short(t.pinned.hash)}`), lines("pinned", d.left)),
      h("div", null, h("h4", null, `Now listed — ${short(t.hash)}`), lines("current", d.right))),
    d.bounded ? null : h("p", { class: "muted" }, "Too long to mark the changed lines: read both whole."),
    approve && h("div", { class: "decide" },
      h("span", null, "Approving pins the definition shown on the right, hash ", h("code", { class: "hash" }, t.hash),
        " (if it changed again meanwhile, the approval is refused)."),
      h("button", { type: "button", class: "approve", onclick: approve }, "Approve new definition")));
}

function classifyForm(t, classify) {
  const given = t.classification || t.suggested || {};
  const category = h("select", { required: true, class: "category" },
    options([["", "—"], ["A", "A"], ["B", "B"], ["C", "C"], ["D", "D"]], given.category || ""));
  const action = h("select", { required: true, class: "action" },
    options([["", "—"], ["read", "read"], ["write", "write"]], given.action || ""));
  const risk = h("select", { class: "risk" },
    options([["", "(from the category)"], ["low", "low"], ["medium", "medium"], ["high", "high"], ["critical", "critical"]], given.risk || ""));
  const cost = h("input", { type: "number", min: 0, step: "any", size: 6, class: "cost",
    value: given.cost && given.cost.per_call ? String(given.cost.per_call) : "" });
  const approval = h("input", { type: "checkbox", class: "requires-approval", checked: Boolean(given.requires_approval) });
  // A flagged definition is classified only by someone who says they read it.
  const read = (t.flags || []).length ? h("input", { type: "checkbox", class: "read-flagged", required: true }) : null;
  const submit = (event) => {
    event.preventDefault();
    const body = { category: category.value, action: action.value, requires_approval: approval.checked };
    if (risk.value) body.risk = risk.value;
    if (cost.value) body.cost = { per_call: Number(cost.value) };
    classify(body);
  };
  return h("form", { class: "row classify", onsubmit: submit },
    field("category", category), field("action", action), field("risk", risk),
    field("cost per call (1T)", cost), field("approval per call", approval),
    read && field("I read the flagged definition", read),
    h("button", { type: "submit" }, t.state === "candidate" ? "Classify" : "Classify again"),
    t.suggested ? h("span", { class: "muted" }, `the upstream's annotations suggest: ${json(t.suggested)}`) : null);
}

function definition(t) {
  return [h("h4", null, "Description"), h("pre", { class: "description" }, visible(t.description || "")),
    h("div", { class: "cols" },
      h("div", null, h("h4", null, "Input schema"), h("pre", { class: "input-schema" }, visible(json(sorted(t.input_schema ?? null))))),
      h("div", null, h("h4", null, "Output schema"), h("pre", { class: "output-schema" }, visible(json(sorted(t.output_schema ?? null))))))];
}

function card(name, t, act, note, canGovern) {
  const path = `/v1/admin/upstreams/${encodeURIComponent(name)}/tools/${encodeURIComponent(t.tool)}`;
  const classify = (body) => act(async () => {
    const entry = (await api("POST", `${path}/classify`, body)).tool;
    note(`Classified: ${entry.tool_id} (${body.category}/${body.action}).`);
  });
  const approve = () => act(async () => {
    const entry = (await api("POST", `${path}/approve`, { hash: t.hash })).tool;
    note(`Approved: ${entry.tool_id} is pinned to ${short(entry.hash)}.`);
  });
  const flags = (t.flags || []).length ? h("div", { class: "flags", role: "note" },
    h("strong", null, "Read this definition closely: "),
    h("ul", null, t.flags.map((f) => h("li", null, h("code", null, f), " — ", FLAGS[f] || "flagged by the gateway")))) : null;
  const report = t.schema_portability;
  const portability = report && !report.portable ? h("div", { class: "portability", role: "note" },
    h("strong", null, "Schemas some clients refuse "),
    "(strict model APIs, MCP clients that check them; the tool works for the others):",
    h("ul", null, report.problems.map((p) => h("li", null, h("code", null, visible(p)))))) : null;
  const c = t.classification;
  let body;
  const form = canGovern ? classifyForm(t, classify) : null;
  if (t.state === "changed") body = difference(t, canGovern ? approve : null);
  else if (t.state === "candidate") body = [definition(t), form];
  else if (t.state === "gone") body = h("p", { class: "muted" }, "No longer listed by the upstream: unavailable until it returns.");
  else body = h("details", null, h("summary", null, canGovern ? "definition, classify again" : "definition"), definition(t), form);
  return h("div", { class: `card upstream-tool state-${t.state}`, dataset: { tool: t.tool } },
    h("header", null, h("span", { class: "tool" }, t.tool), h("span", { class: `badge state state-${t.state}` }, t.state),
      t.tool_id ? h("code", null, t.tool_id) : null,
      c ? h("span", { class: `badge cat-${c.category}` }, `${c.category}/${c.action}${c.requires_approval ? ", approval per call" : ""}`) : null,
      h("code", { class: "muted" }, short(t.hash))),
    t.title ? h("p", null, visible(t.title)) : null, flags, portability, body);
}

export async function showTools(box, name, act, note, canGovern) {
  const tools = (await api("GET", `/v1/admin/upstreams/${encodeURIComponent(name)}/tools`)).tools;
  const order = { changed: 0, candidate: 1, classified: 2, gone: 3 };
  tools.sort((a, b) => (order[a.state] ?? 9) - (order[b.state] ?? 9) || a.tool.localeCompare(b.tool));
  clear(box, h("h3", null, `Tools of ${name}`),
    tools.length ? h("div", { class: "cards" }, tools.map((t) => card(name, t, act, note, canGovern)))
      : h("p", { class: "empty" }, "No tools listed: sync the upstream."));
}
