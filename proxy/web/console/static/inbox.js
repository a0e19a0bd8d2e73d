// The approvals inbox: live from the console's stream (snapshot, then added / removed),
// newest first, each with its arguments as pretty JSON text (a confidential call: only
// hash and size), a countdown to its expiry, and approve / deny with a reason.
import { api, ApiError, query } from "./api.js";
import { clear, h, json, when } from "./dom.js";
import { stream } from "./sse.js";
import * as standing from "./standing.js";

const cards = new Map(); // approval_id -> {item, el, expires}
let section = null;
let list = null;
let status = null;
let stopStream = null;
let ticker = null;
let offset = 0; // server clock - this clock, in ms
let context = null;
let standingBox = null;

function serverNow() { return Date.now() + offset; }

function syncClock(nowIso) {
  const t = Date.parse(nowIso);
  if (!Number.isNaN(t)) offset = t - Date.now();
}

function remaining(expires) {
  const s = Math.max(0, Math.floor((expires - serverNow()) / 1000));
  return `expires in ${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function args(item) {
  const digest = h("p", { class: "muted" }, `sha256 ${item.args_hash} · ${item.args_size} bytes`);
  if (item.args_omitted === "confidential") {
    return [h("p", { class: "confidential" }, "Confidential call: its arguments were never stored."), digest];
  }
  if (item.args_omitted === "too_large") {
    return [h("p", null, "Arguments too large to show here."), digest];
  }
  return [h("pre", { class: "args" }, json(item.args)), digest];
}

function card(item) {
  const reason = h("input", { maxlength: 1000, placeholder: "reason (kept with the decision)", "aria-label": "reason" });
  const msg = h("p", { class: "error", role: "alert" });
  const buttons = [];
  const decide = async (decision) => {
    for (const b of buttons) b.disabled = true;
    msg.textContent = "";
    try {
      await api("POST", `/v1/approvals/${encodeURIComponent(item.approval_id)}/decision`,
        { decision, reason: reason.value });
      remove(item.approval_id);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 409 || e.status === 404)) {
        remove(item.approval_id);
        return;
      }
      msg.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
      for (const b of buttons) b.disabled = false;
    }
  };
  buttons.push(h("button", { type: "button", class: "approve", onclick: () => decide("approve") }, "Approve"));
  buttons.push(h("button", { type: "button", class: "deny", onclick: () => decide("deny") }, "Deny"));
  const countdown = h("span", { class: "countdown" });
  const facts = [
    ["agent", item.agent_id], ["team", item.team_id], ["run", item.agent_run_id || "—"],
    ["call", item.call_id], ["requested", when(item.requested_at)],
    ["policy revision", item.policy_revision],
  ];
  const el = h("article", { class: "card", dataset: { approvalId: item.approval_id, callId: item.call_id } },
    h("header", null,
      h("span", { class: "tool" }, item.tool),
      h("span", { class: `badge cat-${item.category || "unknown"}` }, `category ${item.category || "?"}`),
      item.action ? h("span", { class: "badge" }, item.action) : null,
      countdown),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
      h("dt", null, "reasons"),
      h("dd", null, h("ul", null, (item.reasons || []).map((r) => h("li", null, r))))),
    args(item),
    item.preview ? [h("p", { class: "muted" }, "What will run, as its service prepared it:"),
      h("pre", { class: "preview" }, json(item.preview))] : null,
    h("div", { class: "decide" }, reason, buttons),
    msg);
  return { item, el, countdown, expires: Date.parse(item.expires_at) };
}

function tick() {
  for (const [id, c] of cards) {
    if (c.expires <= serverNow()) remove(id);
    else c.countdown.textContent = remaining(c.expires);
  }
}

function empty() {
  const none = list.querySelector(".empty");
  if (cards.size === 0 && !none) list.append(h("p", { class: "empty" }, "No calls are waiting for an approval."));
  if (cards.size > 0 && none) none.remove();
  document.querySelector('#nav button[data-page="inbox"]').textContent =
    cards.size ? `Approvals (${cards.size})` : "Approvals";
}

function add(item, top) {
  if (cards.has(item.approval_id)) return;
  const c = card(item);
  cards.set(item.approval_id, c);
  c.countdown.textContent = remaining(c.expires);
  if (top) list.prepend(c.el); else list.append(c.el);
  empty();
}

function remove(id) {
  const c = cards.get(id);
  if (!c) return;
  cards.delete(id);
  c.el.remove();
  empty();
}

function setStatus(state) {
  status.className = `status ${state}`;
  status.textContent = state === "live" ? "live" : "reconnecting…";
}

export function start(el, ctx) {
  stop();
  context = ctx;
  section = el;
  status = h("span", { class: "status" });
  list = h("div", { class: "cards", id: "inbox-list" });
  standingBox = h("div", { id: "standing" });
  clear(section, h("h2", null, "Calls awaiting approval", status), list, standingBox);
  const path = `/console/api/inbox/stream${query({ team_id: ctx.picked() })}`;
  stopStream = stream(path, {
    snapshot(data) {
      // After a reconnect too: cards still open keep their place and what was typed in them.
      syncClock(data.now);
      const ids = new Set(data.approvals.map((a) => a.approval_id));
      for (const id of [...cards.keys()]) if (!ids.has(id)) remove(id);
      let before = list.firstElementChild;
      for (const item of data.approvals) {
        add(item, false);
        const el = cards.get(item.approval_id).el;
        if (el !== before) list.insertBefore(el, before);
        else before = before.nextElementSibling;
      }
      empty();
    },
    added(data) { syncClock(data.now); add(data.approval, true); },
    removed(data) { remove(data.approval_id); },
  }, setStatus);
  ticker = setInterval(tick, 1000);
}

export function stop() {
  if (stopStream) stopStream();
  if (ticker) clearInterval(ticker);
  stopStream = null;
  ticker = null;
  cards.clear();
}

export function restart() { if (section && context) start(section, context); }

// The inbox itself is live once started; the standing approvals are read on each visit.
export function show(el, ctx) {
  if (standingBox && ctx.features.includes("standing_approvals")) standing.show(standingBox, ctx);
}
