// Entry point of the compare view: two notebooks side by side, as the server compared them
// (runs/traces/compare.py, the same answer as the REST API's GET /api/v1/compare). Steps are
// aligned by turn and by their number in the turn (a fork shares its original's first steps, so
// they line up); inputs, tool-call arguments, results and outputs that differ are marked, and
// each side gets its totals. This module only draws.

import { hasPlaceholders, renderChain } from "./chain.js";
import { formatUsd } from "./cost.js";
import { formatDuration, h } from "./dom.js";
import { proseNodes, revealText } from "./hidden.js";

const root = document.getElementById("compare");
const $ = (selector) => root.querySelector(selector);
const metrics = { fetchMs: 0, reduceMs: 0, renderMs: 0, rows: 0, readyAt: 0 };
window.agentui = { metrics };

const TOTALS = [
  ["Steps", (t) => t.steps.toLocaleString("en")],
  ["Tool calls", (t) => t.tool_calls.toLocaleString("en")],
  ["Tokens", (t) => t.tokens.toLocaleString("en")],
  ["Wall time", (t) => formatDuration(t.wall_time_s) || "—"],
  // last: a long "price unknown" wraps alone, the counts stay on one line
  ["Cost", (t) => (t.cost_usd == null ? "price unknown" : formatUsd(t.cost_usd))],
];

/** A text field; a Chain of Abstraction's reasoning (`[FUNC name(args) = yN]`) as chips, each
 * naming its call and filled in with the result `results` has for it on this side. */
function field(name, label, text, differs, results = null) {
  const body = h("pre", { class: "compare-text", dir: "auto" });
  if (results && text && hasPlaceholders(text)) renderChain(body, text, results, { showCall: true });
  else body.append(...proseNodes(text || "—"));
  return h("div", { class: `compare-field${differs ? " is-different" : ""}`, "data-field": name }, h("span", { class: "field-label" }, label), body);
}

/** A call's arguments as a table of name and value (the stored JSON object), or as written when
 * they are not an object (cut short, or a model's malformed arguments). */
function argumentTable(args) {
  let parsed;
  try {
    parsed = JSON.parse(args);
  } catch {
    parsed = undefined;
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return h("code", { class: "compare-args-raw" }, revealText(args));
  const names = Object.keys(parsed);
  if (!names.length) return h("span", { class: "muted" }, "no arguments");
  return h(
    "table",
    { class: "compare-arg-table" },
    h("tbody", {}, names.map((key) => h("tr", {}, h("th", { scope: "row" }, revealText(key)), h("td", { dir: "auto" }, revealText(typeof parsed[key] === "string" ? parsed[key] : JSON.stringify(parsed[key])))))),
  );
}

function callList(calls) {
  return h(
    "ol",
    { class: "compare-calls", "data-field": "calls" },
    calls.map((call) =>
      h(
        "li",
        { class: "compare-call" },
        h(
          "div",
          { class: `compare-args${call.args_differ ? " is-different" : ""}` },
          h("code", { class: "tool-name" }, call.output_name ? `${call.output_name} = ${revealText(call.name)}` : revealText(call.name)),
          argumentTable(call.args),
        ),
        call.result !== "" ? h("span", { class: `compare-result${call.result_differs ? " is-different" : ""}` }, `→ ${call.result}`) : null,
      ),
    ),
  );
}

/** Per side, per turn: each chain result's call (`y2` → its result), for the chips. */
function chainResults(rows) {
  const found = [new Map(), new Map()];
  for (const row of rows) {
    if (row.kind !== "step") continue;
    row.pair.forEach((facts, side) => {
      if (!facts) return;
      if (!found[side].has(row.turn)) found[side].set(row.turn, new Map());
      const byName = found[side].get(row.turn);
      for (const call of facts.calls) {
        if (!call.output_name || byName.has(call.output_name)) continue;
        // a call not run yet has no value: its chip says it is pending
        if (call.result !== "") byName.set(call.output_name, { output: call.result, isError: false, status: "completed" });
      }
    });
  }
  return found;
}

let results = [new Map(), new Map()];

function stepCell(row, side) {
  const mine = row.pair[side];
  const other = row.pair[1 - side];
  if (!mine) return h("div", { class: "compare-cell is-missing is-different" }, h("p", { class: "muted" }, "No such step here."));
  const differs = (key) => row.different.includes(key) || row.different.includes("step");
  const callsDiffer = differs("calls");
  return h(
    "div",
    { class: "compare-cell", "data-side": side },
    h("div", { class: "compare-cell-head" }, h("span", { class: "badge kind" }, mine.kind), h("span", { class: `badge status status-${mine.status}${differs("status") ? " is-different" : ""}` }, mine.status), mine.tokens ? h("span", { class: "cell-meta" }, `${mine.tokens.toLocaleString("en")} tokens`) : null),
    mine.input || other?.input ? field("input", "Input", mine.input, differs("input")) : null,
    mine.calls.length ? h("div", { class: `compare-field${callsDiffer ? " has-different" : ""}` }, h("span", { class: "field-label" }, "Tool calls"), callList(mine.calls)) : null,
    mine.output || other?.output ? field("output", "Output", mine.output, differs("output"), results[side].get(row.turn) || new Map()) : null,
  );
}

function drawRow(row) {
  const differs = row.differs;
  const attrs = { class: `compare-row compare-${row.kind}${differs ? " row-differs" : ""}`, "data-differs": String(differs) };
  if (row.kind === "step") {
    attrs["data-turn"] = row.turn;
    attrs["data-step"] = row.step;
    return h(
      "section",
      attrs,
      h("div", { class: "compare-gutter" }, h("strong", {}, `Step ${row.step}`), differs ? h("span", { class: "badge differs" }, "differs") : h("span", { class: "muted" }, "same")),
      stepCell(row, 0),
      stepCell(row, 1),
    );
  }
  const texts = row.pair.map((side) => side?.text ?? "");
  const label = row.kind === "turn" ? "You" : "Answer";
  if (row.kind === "answer" && !texts[0] && !texts[1]) return null;
  return h(
    "section",
    { ...attrs, "data-turn": row.turn },
    h("div", { class: "compare-gutter" }, h("strong", {}, row.kind === "turn" ? `Turn ${row.turn}` : "Answer"), differs ? h("span", { class: "badge differs" }, "differs") : null),
    ...texts.map((text) => h("div", { class: "compare-cell" }, field(row.kind === "turn" ? "message" : "answer", label, text, differs))),
  );
}

function drawTotals(sides) {
  root.querySelectorAll("[data-totals]").forEach((dl, side) => {
    dl.replaceChildren(
      ...TOTALS.map(([label, show]) => {
        const value = show(sides[side].totals);
        const differs = value !== show(sides[1 - side].totals);
        return h("div", { class: `total${differs ? " is-different" : ""}` }, h("dt", {}, label), h("dd", { "data-total": label.toLowerCase().replaceAll(" ", "-") }, value));
      }),
    );
  });
}

async function load(url) {
  // as the page's <link rel="preload"> asked for it, so the preloaded response is the one used
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  return response.json();
}

async function main() {
  const t0 = performance.now();
  let data;
  try {
    data = await load(root.dataset.url);
  } catch (err) {
    $("#compare-error").textContent = `Could not load the comparison: ${err.message}`;
    $("#compare-error").hidden = false;
    return;
  }
  const t1 = performance.now();
  drawTotals(data.sides);
  $("#compare-summary").textContent = data.summary.text;
  results = chainResults(data.rows);
  $("#compare-rows").replaceChildren(...data.rows.map(drawRow).filter(Boolean));
  $("#only-different").addEventListener("change", (event) => root.classList.toggle("only-different", event.target.checked));
  const t2 = performance.now();
  Object.assign(metrics, { fetchMs: t1 - t0, reduceMs: 0, renderMs: t2 - t1, rows: data.rows.length });
  Object.assign(window.agentui, { comparison: data, rows: data.rows });
  requestAnimationFrame(() => {
    metrics.readyAt = performance.now();
    root.dataset.ready = "true";
  });
}

main();
