// Upstream MCP servers and OpenAPI services: the list (transport, address, last sync and its
// error, tools by state); syncing one and opening its tools; registering (an MCP server, or an
// OpenAPI service by its document's URL; a header secret or OAuth client credentials) and
// removing one are admins' acts (the API decides: a refusal is shown with its code). A secret is
// sent once and never shown again.
import { api } from "./api.js";
import { clear, field, h, options, table, when } from "./dom.js";
import { failure } from "./grants.js";
import { showTools } from "./upstream_tools.js";

const NAME = "^[a-z][a-z0-9_]{0,31}$";
const STATES = ["candidate", "classified", "changed", "gone"];

function target(u) {
  if (u.transport === "stdio") return h("code", null, [u.command, ...(u.args || [])].join(" "));
  if (u.transport === "openapi") {
    return [h("code", null, u.url || "—"), u.document_url ? [" (document ", h("code", null, u.document_url), ")"] : " (document stored)"];
  }
  return h("code", null, u.url || "—");
}

function counts(byState) {
  const parts = STATES.filter((s) => byState && byState[s]).map((s) => h("span", { class: `state state-${s}` }, `${byState[s]} ${s}`));
  return parts.length ? parts.map((p, i) => [i ? ", " : null, p]) : "none yet (sync)";
}

function registerForm(act, note) {
  const name = h("input", { maxlength: 32, size: 14, required: true, pattern: NAME, placeholder: "e.g. tickets" });
  const transport = h("select", { id: "upstream-transport" }, options([
    ["streamable_http", "streamable HTTP"], ["stdio", "stdio (allowlisted command)"],
    ["openapi", "OpenAPI service (its document's URL)"]], "streamable_http"));
  // The first URL and password inputs are the MCP endpoint and the header secret (in that order).
  const url = h("input", { type: "url", maxlength: 2048, size: 32, placeholder: "the server's MCP endpoint" });
  const command = h("input", { maxlength: 64, size: 14, placeholder: "a name in the allowlist" });
  const args = h("input", { maxlength: 1000, size: 18, placeholder: "space-separated" });
  const documentUrl = h("input", { type: "url", maxlength: 2048, size: 32, class: "openapi-document", placeholder: "where its OpenAPI document is" });
  const baseUrl = h("input", { type: "url", maxlength: 2048, size: 32, class: "openapi-base", placeholder: "where its operations are called" });
  const header = h("input", { maxlength: 64, size: 14, placeholder: "e.g. Authorization" });
  const secret = h("input", { type: "password", maxlength: 4096, size: 14, autocomplete: "new-password" });
  const timeout = h("input", { type: "number", min: 100, max: 10000, step: 100, size: 7, placeholder: "5000" });
  const useOauth = h("input", { type: "checkbox", class: "oauth-on" });
  const tokenUrl = h("input", { type: "url", maxlength: 2048, size: 28, class: "oauth-token-url", placeholder: "the authorization server's token endpoint" });
  const clientId = h("input", { maxlength: 256, size: 14, class: "oauth-client-id" });
  const clientSecret = h("input", { type: "password", maxlength: 4096, size: 14, autocomplete: "new-password", class: "oauth-client-secret" });
  const scope = h("input", { maxlength: 1024, size: 14, class: "oauth-scope", placeholder: "optional" });
  const http = field("url", url);
  const stdio = [field("command", command), field("args", args)];
  const openapi = [field("document URL", documentUrl), field("base URL", baseUrl)];
  const headerSecret = [field("secret header (optional)", header), field("secret", secret)];
  const oauth = [field("token URL", tokenUrl), field("client id", clientId), field("client secret", clientSecret), field("scope", scope)];
  const shape = () => {
    const kind = transport.value;
    const withOauth = useOauth.checked;
    http.hidden = kind !== "streamable_http";
    for (const f of stdio) f.hidden = kind !== "stdio";
    for (const f of openapi) f.hidden = kind !== "openapi";
    for (const f of headerSecret) f.hidden = withOauth;
    for (const f of oauth) f.hidden = !withOauth;
    url.required = kind === "streamable_http";
    command.required = kind === "stdio";
    documentUrl.required = baseUrl.required = kind === "openapi";
    tokenUrl.required = clientId.required = clientSecret.required = withOauth;
  };
  transport.addEventListener("change", shape);
  useOauth.addEventListener("change", shape);
  shape();
  const submit = (event) => {
    event.preventDefault();
    const kind = transport.value;
    const body = { name: name.value.trim() };
    let path = "/v1/admin/upstreams";
    if (kind === "openapi") {
      path = "/v1/admin/openapi";
      body.url = documentUrl.value.trim();
      body.base_url = baseUrl.value.trim();
    } else if (kind === "stdio") {
      body.transport = kind;
      body.command = command.value.trim();
      body.args = args.value.split(/\s+/).filter(Boolean);
    } else {
      body.transport = kind;
      body.url = url.value.trim();
    }
    if (useOauth.checked) {
      body.oauth = { token_url: tokenUrl.value.trim(), client_id: clientId.value.trim(), client_secret: clientSecret.value };
      if (scope.value.trim()) body.oauth.scope = scope.value.trim();
    } else if (header.value.trim() || secret.value) {
      body.secret_header = header.value.trim();
      body.secret = secret.value;
    }
    if (timeout.value) body.timeout_ms = Number(timeout.value);
    secret.value = clientSecret.value = ""; // sent once; the page keeps no copy
    act(async () => {
      const answer = await api("POST", path, body);
      const u = answer.upstream;
      const ops = kind === "openapi" ? ` (${answer.operations} operations)` : "";
      note(`Registered: ${u.name}${ops} — sync it to list its tools.`);
      name.value = "";
    });
  };
  return h("form", { class: "row", id: "upstream-form", onsubmit: submit },
    field("name", name), field("transport", transport), http, stdio, openapi, headerSecret,
    field("timeout (ms)", timeout), field("OAuth client credentials", useOauth), oauth,
    h("button", { type: "submit" }, "Register"));
}

export async function show(section, ctx) {
  const msg = h("p", { class: "error", role: "alert", id: "upstream-error" });
  const note = h("p", { class: "passed", id: "upstream-note" });
  const list = h("div", { id: "upstream-list" });
  const tools = h("div", { id: "upstream-tools" });
  let opened = null;
  const act = async (fn) => {
    msg.textContent = "";
    note.textContent = "";
    try { await fn(); } catch (e) { msg.textContent = failure(e); }
    await refresh();
  };
  const open = async (name) => {
    opened = name;
    if (name === null) { clear(tools); return; }
    try { await showTools(tools, name, act, (text) => { note.textContent = text; }, ctx.platform); } catch (e) {
      clear(tools);
      msg.textContent = failure(e);
    }
  };
  const sync = (name) => act(async () => {
    const body = await api("POST", `/v1/admin/upstreams/${encodeURIComponent(name)}/sync`);
    note.textContent = `Synced ${name}: ${body.tools.length} tools listed.`;
    opened = name;
  });
  const remove = (name) => act(async () => {
    await api("DELETE", `/v1/admin/upstreams/${encodeURIComponent(name)}`);
    note.textContent = `Removed: ${name}.`;
    if (opened === name) opened = null;
  });
  const refresh = async () => {
    let rows;
    let states;
    try {
      [rows, states] = await Promise.all([
        api("GET", "/v1/admin/upstreams").then((b) => b.upstreams),
        api("GET", "/console/api/upstreams/tool-states").then((b) => b.upstreams),
      ]);
    } catch (e) { msg.textContent = failure(e); return; }
    clear(list, rows.length ? table([
      { label: "upstream", get: (u) => u.name },
      { label: "transport", get: (u) => u.transport },
      { label: "address", get: target },
      { label: "secret", get: (u) => (!u.has_secret ? "—"
        : u.credentials === "oauth_client_credentials" ? "OAuth client credentials: sealed"
        : `${u.secret_header}: sealed`) },
      { label: "last sync", get: (u) => when(u.synced_at) },
      { label: "sync error", get: (u) => u.sync_error || "", cls: (u) => (u.sync_error ? "failed sync-error" : null) },
      { label: "tools", get: (u) => counts(states[u.name]) },
      { label: "", get: (u) => [
        h("button", { type: "button", class: "open", onclick: () => open(u.name) }, "Tools"),
        ctx.platform ? h("button", { type: "button", class: "sync", onclick: () => sync(u.name) }, "Sync") : null,
        ctx.isAdmin ? h("button", { type: "button", class: "danger remove", onclick: () => remove(u.name) }, "Remove") : null,
      ] },
    ], rows) : h("p", { class: "empty" }, "No upstreams registered."));
    if (opened !== null && !rows.some((u) => u.name === opened)) opened = null;
    await open(opened);
  };
  clear(section, h("h2", null, "Upstreams"),
    h("p", { class: "muted" }, "Existing MCP servers and OpenAPI services behind the gateway. Nothing they list is callable until governance classifies it; a changed definition is unavailable until approved. Syncing, classifying and approving: admins, or the governance of a team the operator named."),
    ctx.platform ? null : h("p", { class: "muted", id: "upstream-readonly" }, "Read-only: syncing, classifying and approving change every team's catalog; your token's role and team do not allow it."),
    msg, note, list, tools,
    ctx.isAdmin ? [h("h3", null, "Register an upstream"), registerForm(act, (text) => { note.textContent = text; })] : null);
  await refresh();
}
