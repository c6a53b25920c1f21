// A tool's tabular result as a table an analyst can work with: sticky header, row count,
// "N more rows", sort by a column, copy as TSV, and the full result as CSV from the server, in
// the order sorted on screen.

import { h } from "../dom.js";
import { formatNumber } from "../format.js";

/** Rows drawn at first; the rest of what the tool returned comes with "Show N more rows". */
export const SHOWN_ROWS = 50;

/**
 * The table in a tool's output, or null: `{columns, rows}` (the SQL tool, `example_rows` from
 * describe_table) or a list of records. `total` is how many rows the source had in all.
 */
export function asTable(value) {
  if (Array.isArray(value)) {
    if (!value.length || !value.every((r) => r && typeof r === "object" && !Array.isArray(r))) return null;
    const keys = new Map();
    for (const record of value) for (const key of Object.keys(record)) keys.set(key, true);
    const columns = [...keys.keys()];
    return { columns, rows: value.map((r) => columns.map((c) => r[c])), total: value.length, capped: false };
  }
  if (value && typeof value === "object") {
    const columns = value.columns;
    const rows = value.rows ?? value.example_rows;
    const named = Array.isArray(columns) && columns.length && columns.every((c) => typeof c === "string");
    if (!named || !Array.isArray(rows) || !rows.every(Array.isArray)) return null;
    const total = Number.isInteger(value.total_rows) ? value.total_rows : rows.length;
    return { columns, rows, total, capped: Boolean(value.truncated) };
  }
  return null;
}

const LONG_CELL_CHARS = 40;

/** A cell: a number rounded for reading, with its exact value in the tooltip and data-raw. */
function cell(value) {
  if (typeof value !== "number") {
    const text = cellText(value);
    // a cell is cut at 24rem (render.css); a long text keeps all of itself in its tooltip
    return h("td", { title: text.length > LONG_CELL_CHARS ? text : null }, text);
  }
  return numberCell(value);
}

/** A number's cell, rounded for reading, the exact value in its tooltip and data-raw (the Data
 * page's previews too). */
export function numberCell(value) {
  const shown = formatNumber(value);
  const exact = String(value);
  return h("td", { class: "num", title: shown === exact ? null : exact, "data-raw": exact }, shown);
}

function cellText(value) {
  if (value == null) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// OWASP's rule for CSV/TSV injection (the server's CSV does the same: runs/traces/results.py):
// a cell starting with = + - @ tab or CR is a formula to a spreadsheet, so it gets a leading
// single quote; numbers, and text that is a plain number, stay as they are.
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A cell's text as a spreadsheet may read it without running anything. */
export function safeCell(value) {
  const text = cellText(value);
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}

/** Tab-separated text of a table (formula cells neutralised; tabs and newlines inside values
 * become spaces). */
export function toTsv(columns, rows) {
  const clean = (v) => safeCell(v).replace(/[\t\r\n]+/g, " ");
  return [columns, ...rows].map((row) => row.map(clean).join("\t")).join("\n");
}

// The order "Sort by" gives, the same as the server's for a sorted CSV download
// (runs/presets/tools/cell_order.py; no localeCompare, whose order depends on the browser's
// locale): numbers before text, by value; text in runs of digits (by value: "item 9" before
// "item 10") and the rest (lower-cased), then as written; empty cells last either way; rows
// with equal cells keep their order (Array.prototype.sort is stable).
const DIGIT_RUNS = /([0-9]+)/;
const byUnits = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function compareText(a, b) {
  const x = a.split(DIGIT_RUNS);
  const y = b.split(DIGIT_RUNS);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    let d;
    if (i % 2) {
      const p = x[i].replace(/^0+/, "");
      const q = y[i].replace(/^0+/, "");
      d = p.length - q.length || byUnits(p, q);
    } else {
      d = byUnits(x[i].toLowerCase(), y[i].toLowerCase());
    }
    if (d) return d;
  }
  return x.length - y.length || byUnits(a, b);
}

/** Two non-empty cells in "Sort by" order (ascending). */
export function compareCells(a, b) {
  const an = typeof a === "number";
  const bn = typeof b === "number";
  if (an && bn) return a - b;
  if (an !== bn) return an ? -1 : 1;
  return compareText(cellText(a), cellText(b));
}

/** `rows` sorted by the cell at `index`, `dir` "ascending" or "descending"; empty cells last. */
export function sortRows(rows, index, dir) {
  const sign = dir === "ascending" ? 1 : -1;
  return [...rows].sort((r, s) => {
    const a = r[index];
    const b = s[index];
    if (a == null) return b == null ? 0 : 1;
    if (b == null) return -1;
    return sign * compareCells(a, b);
  });
}

const plural = (n, one, many) => `${n.toLocaleString("en")} ${n === 1 ? one : many}`;

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h("textarea", { class: "visually-hidden", "aria-hidden": "true" });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

/**
 * The table view. `csvUrl` (optional) downloads every row from the server.
 * @returns {HTMLElement}
 */
export function resultTable(table, { csvUrl = null } = {}) {
  const { columns } = table;
  let rows = table.rows;
  let shown = Math.min(SHOWN_ROWS, rows.length);
  let sortBy = null; // {index, dir}
  const tbody = h("tbody");
  const heads = columns.map((name, index) =>
    h("th", { scope: "col", "aria-sort": "none" }, h("button", { type: "button", class: "rt-sort", title: `Sort by ${name}`, onclick: () => sort(index) }, name)),
  );
  const more = h("button", { type: "button", class: "button-link rt-more", onclick: () => showAll() });
  const count = h("span", { class: "rt-count" });
  const status = h("span", { class: "rt-status muted", role: "status" });

  function drawRows() {
    const fragment = document.createDocumentFragment();
    for (const row of rows.slice(0, shown)) {
      fragment.append(h("tr", {}, row.map(cell)));
    }
    tbody.replaceChildren(fragment);
    const hidden = rows.length - shown;
    more.hidden = hidden <= 0;
    more.textContent = `Show ${plural(hidden, "more row", "more rows")}`;
    const parts = [plural(table.total, "row", "rows")];
    if (table.total > rows.length) parts.push(`${rows.length.toLocaleString("en")} came back, ${(table.total - rows.length).toLocaleString("en")} more rows in the CSV`);
    else if (table.capped) parts.push("more rows matched than came back");
    count.textContent = parts.join(" · ");
  }

  function sort(index) {
    const dir = sortBy?.index === index && sortBy.dir === "ascending" ? "descending" : "ascending";
    sortBy = { index, dir };
    rows = sortRows(table.rows, index, dir);
    heads.forEach((th, i) => th.setAttribute("aria-sort", i === index ? dir : "none"));
    pointDownload();
    drawRows();
  }

  // The download follows the sort: the server sorts every row by the same rules.
  function pointDownload() {
    if (!download) return;
    if (!sortBy) {
      download.href = csvUrl;
      download.title = "Every row, in the order the tool returned them";
      return;
    }
    const url = new URL(csvUrl, location.href);
    url.searchParams.set("sort", String(sortBy.index));
    url.searchParams.set("order", sortBy.dir === "ascending" ? "asc" : "desc");
    download.href = url.pathname + url.search;
    download.title = `Every row, sorted by ${columns[sortBy.index]} (${sortBy.dir}) as on screen`;
  }

  function showAll() {
    shown = rows.length;
    drawRows();
  }

  const copy = h("button", {
    type: "button",
    class: "button-link",
    onclick: async () => {
      status.textContent = (await copyText(toTsv(columns, rows))) ? `Copied ${plural(rows.length, "row", "rows")} as TSV` : "Could not copy";
    },
  }, "Copy TSV");
  const download = csvUrl ? h("a", { class: "button-link rt-csv", href: csvUrl, download: "" }, "Download CSV") : null;
  pointDownload();
  drawRows();
  return h(
    "div",
    { class: "result-table" },
    h("div", { class: "rt-bar" }, count, h("span", { class: "rt-actions" }, copy, download, status)),
    h("div", { class: "rt-scroll" }, h("table", {}, h("thead", {}, h("tr", {}, heads)), tbody)),
    more,
  );
}
