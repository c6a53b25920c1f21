// Small DOM and formatting helpers shared by the page modules.

import { revealJson } from "./hidden.js";

/**
 * Create an element: h("button", {class: "x", onclick: fn, disabled: true}, "Label", child).
 * `null`, `undefined` and `false` children and attributes are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "value") el.value = value;
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child == null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value != null) el.setAttribute(key, String(value));
  }
  return el;
}

/** Seconds as "850 ms", "2.4 s" or "3 min 05 s". */
export function formatDuration(seconds) {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 1) return `${Math.max(1, Math.round(seconds * 1000))} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${String(Math.round(seconds % 60)).padStart(2, "0")} s`;
}

/** `value` as indented JSON, its hidden characters (hidden.js) as \u escapes: the same value. */
export function prettyJson(value) {
  try {
    return revealJson(JSON.stringify(value, null, 2));
  } catch {
    return String(value);
  }
}

/** `text` as a sentence: a full stop added unless it already ends one ("please." stays, not "please.."). */
export function sentence(text) {
  const value = String(text ?? "").trimEnd();
  return /[.!?…]["'”’)\]]*$/.test(value) ? value : `${value}.`;
}

export function truncate(text, max) {
  const value = String(text ?? "");
  return value.length > max ? `${value.slice(0, max - 1)}…` : value;
}

/** A stable DOM id for an engine id (uuids are valid, but keep it safe for selectors). */
export function domId(prefix, id) {
  return `${prefix}-${String(id).replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** Replace an element's children. */
export function replaceChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/**
 * Make `el`'s children `children` (as `h` takes them), leaving in place every node that is
 * already there and stays: a kept node never leaves the page, so a selection, focus or scroll
 * inside it survives the redraw.
 */
export function keepChildren(el, ...children) {
  const wanted = [];
  const collect = (items) => {
    for (const child of items) {
      if (child == null || child === false) continue;
      if (Array.isArray(child)) collect(child);
      else wanted.push(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  };
  collect(children);
  const kept = new Set(wanted);
  for (const child of [...el.childNodes]) if (!kept.has(child)) child.remove();
  let cursor = el.firstChild;
  for (const node of wanted) {
    if (node === cursor) cursor = cursor.nextSibling;
    else el.insertBefore(node, cursor);
  }
}

/** POST `body` as JSON with the page's CSRF token: the answer's JSON, or `{error}` saying why not. */
export async function postJson(url, body) {
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  try {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    // the page's views say `error`; the REST API's problems say `detail`
    return response.ok ? data : { error: data.error || data.detail || `the server answered ${response.status}` };
  } catch (err) {
    return { error: `Could not reach the server: ${err.message}` };
  }
}
