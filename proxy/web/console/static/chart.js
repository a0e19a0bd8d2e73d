// Bar charts drawn as SVG elements (createElementNS; labels are text nodes): no library,
// no CDN, no inline style (the Content-Security-Policy allows none).
import { svg } from "./dom.js";

function nice(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

function short(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  return String(Math.round(n * 100) / 100);
}

// Vertical bars, one per label (days).
export function columns(title, labels, values, cls) {
  const W = 760; const H = 220; const L = 48; const B = 40; const T = 28;
  const top = nice(Math.max(0, ...values));
  const step = (W - L - 10) / Math.max(1, labels.length);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const nodes = [svg("text", { x: 8, y: 18, class: "title" }, title)];
  for (const f of [0, 0.5, 1]) {
    nodes.push(svg("line", { x1: L, x2: W - 8, y1: y(top * f), y2: y(top * f), class: "axis" }));
    nodes.push(svg("text", { x: L - 6, y: y(top * f) + 4, "text-anchor": "end" }, short(top * f)));
  }
  labels.forEach((label, i) => {
    const v = values[i];
    const x = L + i * step + step * 0.15;
    nodes.push(svg("rect", { x, y: y(v), width: Math.max(1, step * 0.7), height: Math.max(0, H - B - y(v)), class: cls },
      svg("title", null, `${label}: ${v}`)));
    if (labels.length <= 16 || i % Math.ceil(labels.length / 16) === 0) {
      nodes.push(svg("text", { x: x + step * 0.35, y: H - B + 14, "text-anchor": "middle" }, label.slice(5)));
    }
  });
  return svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": title }, nodes);
}

// Horizontal bars, one per label (tools).
export function rows(title, labels, values, cls) {
  const W = 760; const row = 22; const L = 180; const T = 30;
  const H = T + row * Math.max(1, labels.length) + 10;
  const top = nice(Math.max(0, ...values));
  const x = (v) => (W - L - 70) * (v / top);
  const nodes = [svg("text", { x: 8, y: 18, class: "title" }, title)];
  labels.forEach((label, i) => {
    const yy = T + i * row;
    nodes.push(svg("text", { x: L - 8, y: yy + 14, "text-anchor": "end" }, label));
    nodes.push(svg("rect", { x: L, y: yy + 3, width: Math.max(1, x(values[i])), height: row - 8, class: cls },
      svg("title", null, `${label}: ${values[i]}`)));
    nodes.push(svg("text", { x: L + x(values[i]) + 6, y: yy + 14 }, short(values[i])));
  });
  return svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": title }, nodes);
}
