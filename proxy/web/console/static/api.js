// The console's requests: same origin, the session cookie (sent by the browser, unreadable
// here) and the CSRF token in a header on every request.

let csrf = null;
const listeners = new Set();

export function setCsrf(token) { csrf = token; }
export function csrfToken() { return csrf; }
export function onLoggedOut(fn) { listeners.add(fn); }
export function loggedOut() { csrf = null; for (const fn of listeners) fn(); }

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (csrf) headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method, headers, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await r.json(); } catch { data = null; }
  if (!r.ok) {
    const e = (data && data.error) || {};
    if (r.status === 401 && path !== "/console/session") loggedOut();
    throw new ApiError(r.status, e.code || `http_${r.status}`, e.message || r.statusText);
  }
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}
