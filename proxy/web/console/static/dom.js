// DOM helpers. Strings always become text nodes (textContent), never HTML: nothing that came
// from an agent or a tool (arguments, reasons, outputs) can turn into markup or script.
// Event handlers are only ever functions given by this code (addEventListener).

const PROPS = new Set(["value", "checked", "disabled", "hidden", "type", "selected", "multiple"]);

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) {
      if (typeof v === "function") el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.setAttribute("class", v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (PROPS.has(k)) {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

// <input type="datetime-local"> value (local time) -> ISO 8601 in UTC, or "".
export function isoFromLocal(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

export function table(columns, rows, onPick) {
  const head = h("tr", null, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.label)));
  const body = rows.map((row) => {
    const tr = h("tr", { class: onPick ? "pick" : null },
      columns.map((c) => h("td", { class: c.num ? "num" : (c.cls ? c.cls(row) : null) }, c.get(row))));
    if (onPick) tr.addEventListener("click", () => onPick(row, tr));
    return tr;
  });
  return h("table", null, h("thead", null, head), h("tbody", null, body));
}

export function field(label, control) {
  return h("label", null, label, control);
}

export function options(values, selected) {
  return values.map(([value, label]) => h("option", { value, selected: value === selected }, label));
}
