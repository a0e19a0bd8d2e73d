// Plugins: every installed version, enabled or not; enabling one version (which disables any
// other) and disabling; installing a bundle and removing a disabled version are admins' acts.
// Manifests and definitions are third-party text: shown as text, never as markup.
import { api } from "./api.js";
import { clear, field, h, json, table, when } from "./dom.js";
import { failure } from "./grants.js";

const MAX_BUNDLE = 512 * 1024;

// The bytes of a file as base64 (btoa takes a binary string; built in chunks).
async function base64Of(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function installForm(act, note) {
  const file = h("input", { type: "file", accept: ".tar.gz,.tgz,application/gzip", required: true });
  const submit = (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) return;
    act(async () => {
      if (chosen.size > MAX_BUNDLE) throw new Error(`a bundle is at most ${MAX_BUNDLE} bytes`);
      const body = await api("POST", "/v1/admin/plugins", { bundle_base64: await base64Of(chosen) });
      const p = body.plugin;
      const problems = p.schema_portability && !p.schema_portability.portable ? p.schema_portability.problems : [];
      note(`${body.created ? "Installed" : "Already installed"}: ${p.name} ${p.version}` +
        (problems.length ? ` — its schemas are not portable: ${problems.join("; ")}` : ""));
      file.value = "";
    });
  };
  return h("form", { class: "row", id: "plugin-install", onsubmit: submit },
    field("bundle (.tar.gz)", file), h("button", { type: "submit" }, "Install"));
}

function definition(p) {
  return h("details", null, h("summary", null, "definition"),
    h("pre", { class: "plugin-tool" }, json(p.tool)),
    h("pre", { class: "plugin-manifest" }, json(p.manifest)));
}

export async function show(section, ctx) {
  const msg = h("p", { class: "error", role: "alert" });
  const note = h("p", { class: "passed", id: "plugin-note" });
  const list = h("div", { id: "plugin-list" });
  const act = async (fn) => {
    msg.textContent = "";
    note.textContent = "";
    try { await fn(); } catch (e) { msg.textContent = failure(e); }
    await refresh();
  };
  const refresh = async () => {
    let rows;
    try { rows = (await api("GET", "/v1/admin/plugins")).plugins; } catch (e) { msg.textContent = failure(e); return; }
    const buttons = (p) => !ctx.platform ? null : [
      p.enabled
        ? h("button", { type: "button", class: "danger disable", onclick: () => act(() => api("POST", "/v1/admin/plugins/disable", { name: p.name })) }, "Disable")
        : h("button", { type: "button", class: "enable", onclick: () => act(() => api("POST", "/v1/admin/plugins/enable", { name: p.name, version: p.version })) }, `Enable ${p.version}`),
      ctx.isAdmin && !p.enabled
        ? h("button", { type: "button", class: "danger remove", onclick: () => act(() => api("POST", "/v1/admin/plugins/remove", { name: p.name, version: p.version })) }, "Remove")
        : null,
    ];
    clear(list, rows.length ? table([
      { label: "plugin", get: (p) => p.name },
      { label: "version", get: (p) => p.version },
      { label: "state", get: (p) => (p.enabled ? "enabled" : "installed"), cls: (p) => (p.enabled ? "passed" : null) },
      { label: "available", get: (p) => (p.available ? "yes" : "no") },
      { label: "class", get: (p) => `${p.tool.category}/${p.tool.action}` },
      { label: "description", get: (p) => [p.tool.description, definition(p)] },
      { label: "sha256", get: (p) => h("code", null, `${String(p.sha256).slice(0, 16)}…`) },
      { label: "installed", get: (p) => `${when(p.installed_at)} by ${p.installed_by}` },
      { label: "", get: buttons },
    ], rows) : h("p", { class: "empty" }, "No plugins installed."));
  };
  clear(section, h("h2", null, "Plugins"),
    h("p", { class: "muted" }, "Enabling or disabling changes every team's catalog: admins, or the governance of a team the operator named."),
    msg, note, list,
    ctx.isAdmin ? [h("h3", null, "Install a bundle"), installForm(act, (text) => { note.textContent = text; })] : null);
  await refresh();
}
