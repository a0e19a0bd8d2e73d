// The whole catalog, as governance governs it: every tool (not only those the policy lets this
// identity call), its source, class, availability and pin; a row opens its definition, shown
// as text (a description or schema is never markup here).
import { api, query } from "./api.js";
import { clear, h, json, options, table } from "./dom.js";
import { failure } from "./grants.js";

const MAX_PAGES = 20; // of 500 tools each

export async function everyTool(source) {
  const out = [];
  let after = "";
  for (let i = 0; i < MAX_PAGES; i += 1) {
    const page = await api("GET", `/v1/admin/catalog${query({ limit: 500, source, after })}`);
    out.push(...page.tools);
    if (!page.next) break;
    after = page.next;
  }
  return out;
}

function pinText(pin) {
  if (!pin) return "—";
  return [pin.state, pin.version, pin.hash ? `${String(pin.hash).slice(0, 12)}…` : null].filter(Boolean).join(" ");
}

function detail(t) {
  return h("div", { class: "detail", id: "tool-detail" },
    h("h3", null, t.tool_id),
    h("dl", { class: "facts" },
      h("dt", null, "source"), h("dd", null, t.source),
      h("dt", null, "class"), h("dd", null, `category ${t.category}, ${t.action}, risk ${t.risk}`),
      h("dt", null, "approval per call"), h("dd", null, t.requires_approval ? "yes" : "no"),
      h("dt", null, "network"), h("dd", null, t.network ? "yes" : "no"),
      h("dt", null, "cost (1T)"), h("dd", null, t.cost ? json(t.cost) : "—"),
      h("dt", null, "deadline"), h("dd", null, t.timeout_ms ? `${t.timeout_ms} ms` : "—"),
      h("dt", null, "pin"), h("dd", null, t.pin ? json(t.pin) : "none (shipped with its service)")),
    h("h3", null, "Description"), h("pre", { class: "description" }, t.description || ""),
    h("div", { class: "cols" },
      h("div", null, h("h3", null, "Input schema"), h("pre", { class: "input-schema" }, json(t.input_schema))),
      h("div", null, h("h3", null, "Output schema"), h("pre", { class: "output-schema" }, json(t.output_schema)))));
}

export async function show(section) {
  const msg = h("p", { class: "error", role: "alert" });
  const list = h("div", { id: "catalog-list" });
  const more = h("div");
  const source = h("select", { id: "catalog-source" }, options(
    [["", "every source"], ["builtin", "built-in"], ["plugin", "plugin"], ["upstream", "upstream"], ["openapi", "OpenAPI"]], ""));
  const load = async () => {
    msg.textContent = "";
    clear(more);
    let tools;
    try { tools = await everyTool(source.value); } catch (e) { msg.textContent = failure(e); return; }
    clear(list, tools.length ? table([
      { label: "tool", get: (t) => t.tool_id },
      { label: "source", get: (t) => t.source },
      { label: "class", get: (t) => `${t.category}/${t.action}` },
      { label: "risk", get: (t) => t.risk || "—" },
      { label: "approval", get: (t) => (t.requires_approval ? "per call" : "") },
      { label: "network", get: (t) => (t.network ? "yes" : "") },
      { label: "available", get: (t) => (t.available ? "yes" : "no"), cls: (t) => (t.available ? "passed" : "failed") },
      { label: "pin", get: (t) => pinText(t.pin) },
    ], tools, (t, tr) => {
      for (const r of list.querySelectorAll("tr.picked")) r.classList.remove("picked");
      tr.classList.add("picked");
      clear(more, detail(t));
    }) : h("p", { class: "empty" }, "No tools."));
  };
  source.addEventListener("change", load);
  clear(section, h("h2", null, "Catalog"),
    h("p", { class: "muted" }, "Every tool, whatever the policy lets you call. Pick one to read its definition."),
    h("div", { class: "row" }, source), msg, list, more);
  await load();
}
