// Server-sent events read over fetch (EventSource cannot send the CSRF header), with
// reconnects (each reconnect starts from a fresh snapshot).
import { csrfToken, loggedOut } from "./api.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parse(block, handlers) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const c = line.indexOf(":");
    const name = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? "" : line.slice(c + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") event = value;
    else if (name === "data") data.push(value);
  }
  if (data.length && handlers[event]) handlers[event](JSON.parse(data.join("\n")));
}

export function stream(path, handlers, onState) {
  let stopped = false;
  let ctrl = null;
  (async () => {
    let backoff = 500;
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const r = await fetch(path, {
          headers: { Accept: "text/event-stream", "X-CSRF-Token": csrfToken() || "" },
          credentials: "same-origin", cache: "no-store", signal: ctrl.signal,
        });
        if (r.status === 401) { loggedOut(); return; }
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        onState("live");
        backoff = 500;
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value.replace(/\r\n?/g, "\n");
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (block.startsWith("event: ended")) { loggedOut(); return; }
            parse(block, handlers);
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      onState("reconnecting");
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 10000);
    }
  })();
  return () => { stopped = true; if (ctrl) ctrl.abort(); };
}
