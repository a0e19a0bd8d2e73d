// Tool sets of the team: a named subset of the catalog, served as its own MCP endpoint
// (/mcp/sets/<name>, still filtered by the policy). Listed, created (or replaced), deleted.
import { api, query } from "./api.js";
import { clear, field, h, options, table, when } from "./dom.js";
import { everyTool } from "./catalog.js";
import { failure } from "./grants.js";

const NAME = "^[a-z][a-z0-9_\\-]{0,63}$";

function form(team, tools, act) {
  const name = h("input", { maxlength: 64, size: 16, required: true, pattern: NAME, placeholder: "e.g. research" });
  const pick = h("select", { multiple: true, size: 8, required: true },
    options(tools.map((t) => [t.tool_id, `${t.tool_id} (${t.source}, ${t.category}/${t.action})`]), null));
  const description = h("input", { maxlength: 500, size: 24 });
  const submit = (event) => {
    event.preventDefault();
    const chosen = [...pick.selectedOptions].map((o) => o.value);
    act(() => api("POST", "/v1/admin/toolsets", {
      name: name.value.trim(), team_id: team, tools: chosen, description: description.value,
    }));
  };
  return h("form", { class: "row", id: "toolset-form", onsubmit: submit },
    field("name", name), field("tools (several: Ctrl or ⌘)", pick), field("description", description),
    h("button", { type: "submit" }, "Save tool set"));
}

export async function show(section, ctx) {
  const team = ctx.team();
  const msg = h("p", { class: "error", role: "alert" });
  const list = h("div", { id: "toolset-list" });
  const formBox = h("div");
  clear(section, h("h2", null, `Tool sets — team ${team}`),
    h("p", { class: "muted" }, "Each set is an MCP endpoint of its own for this team's agents. A set grants nothing: the policy still decides every tool."),
    msg, list, formBox);
  const refresh = async () => {
    const data = await api("GET", `/v1/admin/toolsets${query({ team_id: team })}`);
    clear(list, data.toolsets.length ? table([
      { label: "name", get: (s) => s.name },
      { label: "endpoint", get: (s) => h("code", null, s.endpoint) },
      { label: "tools", get: (s) => s.tools.join(", ") },
      { label: "description", get: (s) => s.description },
      { label: "updated", get: (s) => `${when(s.updated_at)} by ${s.updated_by}` },
      { label: "", get: (s) => h("button", { type: "button", class: "danger", onclick: () => act(() =>
        api("DELETE", `/v1/admin/toolsets/${encodeURIComponent(s.name)}${query({ team_id: team })}`)) }, "Delete") },
    ], data.toolsets) : h("p", { class: "empty" }, "No tool sets."));
  };
  const act = async (fn) => {
    msg.textContent = "";
    try { await fn(); await refresh(); } catch (e) { msg.textContent = failure(e); }
  };
  try {
    const tools = await everyTool("");
    clear(formBox, form(team, tools, act));
    await refresh();
  } catch (e) { msg.textContent = failure(e); }
}
