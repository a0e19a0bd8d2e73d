// Usage of the team: calls and tokens per day and per tool, as SVG charts.
import { api, query } from "./api.js";
import { clear, field, h } from "./dom.js";
import { columns, rows } from "./chart.js";
import { failure } from "./grants.js";

const DAY = 86400000;
const iso = (t) => new Date(t).toISOString().slice(0, 10);

function days(from, to) {
  const out = [];
  for (let t = Date.parse(from); t <= Date.parse(to); t += DAY) out.push(iso(t));
  return out;
}

export function show(section, ctx) {
  const today = Date.now();
  const from = h("input", { type: "date", value: iso(today - 13 * DAY) });
  const to = h("input", { type: "date", value: iso(today) });
  const out = h("div", { id: "usage-charts" });
  const load = async (event) => {
    if (event) event.preventDefault();
    const params = { team_id: ctx.team(), from: from.value, to: to.value };
    try {
      const [byDay, byTool] = await Promise.all([
        api("GET", `/v1/usage${query({ ...params, group_by: "day" })}`),
        api("GET", `/v1/usage${query({ ...params, group_by: "tool" })}`),
      ]);
      const labels = days(byDay.from, byDay.to);
      const seen = new Map(byDay.groups.map((g) => [g.key, g]));
      const perDay = (k) => labels.map((d) => (seen.get(d) ? seen.get(d)[k] : 0));
      const tools = byTool.groups.map((g) => g.key);
      const t = byDay.totals;
      clear(out,
        h("p", null, `${t.calls || 0} calls, ${t.tokens_used || 0} tokens, cost ${t.cost_1t || 0} (1T) from ${byDay.from} to ${byDay.to}`),
        h("p", { class: "legend" }, h("span", { class: "k-calls" }, "calls"), h("span", { class: "k-tokens" }, "tokens")),
        columns("Calls per day", labels, perDay("calls"), "bar-calls"),
        columns("Tokens per day", labels, perDay("tokens_used"), "bar-tokens"),
        tools.length ? [
          rows("Calls per tool", tools, byTool.groups.map((g) => g.calls), "bar-calls"),
          rows("Tokens per tool", tools, byTool.groups.map((g) => g.tokens_used), "bar-tokens"),
        ] : h("p", { class: "empty" }, "No calls in this range."));
    } catch (e) {
      clear(out, h("p", { class: "error" }, failure(e)));
    }
  };
  clear(section, h("h2", null, `Usage — team ${ctx.team()}`),
    h("form", { class: "row", onsubmit: load }, field("from", from), field("to", to), h("button", { type: "submit" }, "Show")),
    out);
  load();
}
