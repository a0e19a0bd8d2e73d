// The console's entry: session (log in, reload, log out), navigation, the admin's team pick.
import { api, ApiError, onLoggedOut, setCsrf } from "./api.js";
import * as inbox from "./inbox.js";
import * as decisions from "./decisions.js";
import * as grants from "./grants.js";
import * as policies from "./policies.js";
import * as usage from "./usage.js";
import * as catalog from "./catalog.js";
import * as toolsets from "./toolsets.js";
import * as plugins from "./plugins.js";
import * as upstreams from "./upstreams.js";

const PAGES = { inbox, decisions, grants, policies, usage, catalog, toolsets, plugins, upstreams };
const $ = (id) => document.getElementById(id);
const ctx = {
  identity: null,
  features: [],
  platform: false, // may change every team's catalog (plugins, upstream tools)
  get isAdmin() { return this.identity && this.identity.role === "admin"; },
  // The team the pages act on: a governance token's own; an admin's pick (default: its own).
  team() {
    if (!this.isAdmin) return this.identity.team_id;
    return $("team-input").value.trim() || this.identity.team_id;
  },
  // What an admin typed (the inbox shows every team when nothing is).
  picked() { return this.isAdmin ? $("team-input").value.trim() : ""; },
};
let current = null;

function show(name) {
  current = name;
  for (const b of document.querySelectorAll("#nav button")) b.classList.toggle("active", b.dataset.page === name);
  for (const [key, page] of Object.entries(PAGES)) {
    const section = $(`page-${key}`);
    section.hidden = key !== name;
    if (key === name) page.show(section, ctx);
  }
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
}

function enter(session) {
  setCsrf(session.csrf_token);
  ctx.identity = session.identity;
  ctx.features = session.features || [];
  ctx.platform = Boolean(session.platform_governance);
  const i = session.identity;
  $("who-name").textContent = `${i.agent_id}@${i.team_id} (${i.role})`;
  $("team-pick").hidden = !ctx.isAdmin;
  $("login").hidden = true;
  $("nav").hidden = false;
  $("who").hidden = false;
  inbox.start($("page-inbox"), ctx);
  const wanted = location.hash.slice(1);
  show(PAGES[wanted] ? wanted : "inbox");
}

function leave(message) {
  inbox.stop();
  ctx.identity = null;
  for (const key of Object.keys(PAGES)) $(`page-${key}`).hidden = true;
  $("nav").hidden = true;
  $("who").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  if (!$("token-paste").hidden) $("login-token").focus();
}

const SIGNIN_ERRORS = {
  agents_not_allowed: "the console is for governance and admin identities",
  signin_expired: "the sign-in took too long or began elsewhere: sign in again",
  signin_state_mismatch: "the sign-in did not match the one this browser began: sign in again",
  signin_refused: "the identity provider did not sign you in",
  identity_provider_unavailable: "the identity provider cannot be reached; try again shortly",
};

async function signinOptions() {
  try {
    const o = await api("GET", "/console/signin/options");
    $("signin-provider").hidden = !o.provider;
    $("token-paste").hidden = !o.token_paste;
  } catch { /* the token paste stays */ }
  const failed = new URLSearchParams(location.search).get("signin_error");
  if (failed) {
    history.replaceState(null, "", location.pathname + location.hash);
    return `Sign-in failed: ${SIGNIN_ERRORS[failed] || failed}.`;
  }
  return "";
}

async function login(event) {
  event.preventDefault();
  const input = $("login-token");
  const token = input.value.trim();
  input.value = "";
  $("login-error").textContent = "";
  try {
    enter(await api("POST", "/console/session", { token }));
  } catch (e) {
    $("login-error").textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
  }
}

async function logout() {
  try { await api("DELETE", "/console/session"); } catch { /* ended either way */ }
  setCsrf(null);
  leave("Logged out.");
}

async function boot() {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", logout);
  for (const b of document.querySelectorAll("#nav button")) b.addEventListener("click", () => show(b.dataset.page));
  $("team-input").addEventListener("change", () => { inbox.restart(); if (current) show(current); });
  onLoggedOut(() => leave("Your session has ended: log in again."));
  const failure = await signinOptions();
  try {
    enter(await api("GET", "/console/session"));
  } catch {
    leave(failure);
  }
}

boot();
