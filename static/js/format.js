// Dates and numbers as people read them, the same on every page.
//
// A date shows how long ago it was ("3 minutes ago", "yesterday"; a full date once it is more
// than a week old), in the browser's language, and its full date and time in a tooltip. It is a
// <time datetime="…" data-when>: made here by `timeElement`, or written by a template (with a
// server-formatted fallback inside) and rewritten when this module loads. The base template
// loads it on every page, and it keeps the relative times current while the page stays open.
//
// A number shows at most two decimals (13,681.71), small ones three significant digits; the
// exact value is in its tooltip and one click away (`numberView`).

const WEEK_S = 7 * 24 * 3600;
const STEPS = [
  ["year", 365 * 24 * 3600],
  ["month", 30 * 24 * 3600],
  ["week", WEEK_S],
  ["day", 24 * 3600],
  ["hour", 3600],
  ["minute", 60],
];

const fullFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const exactFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "medium" });
const relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** A Date for epoch seconds (the engine's `at`), epoch milliseconds as a Date, or an ISO string. */
export function toDate(value) {
  if (value == null || value === "") return null;
  const date = value instanceof Date ? value : typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

/** The date and time in full, as the tooltip says it ("Thursday, 26 November 2026 at 17:20:05"). */
export function exactDate(value) {
  const date = toDate(value);
  return date ? exactFormat.format(date) : "";
}

/** A local date and time ("26 Nov 2026, 17:20"). */
export function formatDate(value) {
  const date = toDate(value);
  return date ? fullFormat.format(date) : String(value ?? "");
}

/** How long ago (or how far ahead) `value` is: "just now", "3 minutes ago", "yesterday"; the
 * date itself once it is over a week away. */
export function relativeTime(value, now = Date.now()) {
  const date = toDate(value);
  if (!date) return String(value ?? "");
  const seconds = (date.getTime() - now) / 1000;
  const size = Math.abs(seconds);
  if (size < 45) return relativeFormat.format(0, "second").replace(/^now$/, "just now");
  if (size > WEEK_S) return formatDate(date);
  for (const [unit, length] of STEPS) {
    if (size >= length) return relativeFormat.format(Math.round(seconds / length), unit);
  }
  return relativeFormat.format(Math.round(seconds / 60) || Math.sign(seconds), "minute");
}

function fill(el) {
  const date = toDate(el.getAttribute("datetime"));
  if (!date) return;
  el.textContent = relativeTime(date);
  el.title = exactDate(date);
}

/** A <time> element for `value` that this module keeps current. */
export function timeElement(value, className = "") {
  const el = document.createElement("time");
  const date = toDate(value);
  if (className) el.className = className;
  if (!date) return el;
  el.dateTime = date.toISOString();
  el.dataset.when = "";
  fill(el);
  return el;
}

/** Rewrite every <time datetime data-when> under `root` (server-rendered ones, or to refresh). */
export function formatTimes(root = document) {
  for (const el of root.querySelectorAll("time[datetime][data-when]")) fill(el);
}

const grouped = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const small = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 3 });

/** A data value as people read it: grouped, at most two decimals, small values to three
 * significant digits. Whole numbers under 10,000 stay as written, so years and ids read as
 * themselves (2024, not 2,024). */
export function formatNumber(value) {
  const n = typeof value === "number" ? value : Number(value);
  if (!Number.isFinite(n)) return String(value ?? "");
  if (Number.isInteger(n) && Math.abs(n) < 10_000) return String(n);
  if (n !== 0 && Math.abs(n) < 0.01) return small.format(n);
  return grouped.format(n);
}

const NUMBER_TEXT = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

/** The number a text is, if it is nothing but one ("13681.710000000001"), else null. */
export function numberIn(text) {
  if (typeof text === "number") return Number.isFinite(text) ? text : null;
  if (typeof text !== "string" || !NUMBER_TEXT.test(text)) return null;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

/** A number shown rounded; a click (or Enter) switches to the exact value and back. */
export function numberView(raw, className = "") {
  const exact = String(raw).trim();
  const shown = formatNumber(numberIn(exact) ?? exact);
  const el = document.createElement("button");
  el.type = "button";
  el.className = `number-view ${className}`.trim();
  el.textContent = shown;
  el.dataset.raw = exact;
  el.title = `Exact value: ${exact} (click to show it)`;
  el.setAttribute("aria-pressed", "false");
  el.addEventListener("click", () => {
    const showExact = el.getAttribute("aria-pressed") !== "true";
    el.textContent = showExact ? exact : shown;
    el.setAttribute("aria-pressed", String(showExact));
  });
  return el;
}

formatTimes();
setInterval(() => formatTimes(), 30_000);
