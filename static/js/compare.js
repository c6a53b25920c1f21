// Entry point of the compare view: two stored logs, each reduced like the trace view's, drawn
// side by side. Steps are aligned by turn and by their number in the turn (a fork shares its
// original's first steps, so they line up); inputs, tool-call arguments, results and outputs
// that differ between the two sides are marked, and each side gets its totals.

import { formatDuration, h } from "./dom.js";
import { liveSteps, shownAttempt, totals } from "./selectors.js";
import { eventsOf, reduceEvents } from "./store.js";

const root = document.getElementById("compare");
const $ = (selector) => root.querySelector(selector);
const metrics = { fetchMs: 0, reduceMs: 0, renderMs: 0, rows: 0, readyAt: 0 };
window.agentui = { metrics };

const TOTALS = [
  ["Steps", (t) => t.steps.toLocaleString("en")],
  ["Tool calls", (t) => t.calls.toLocaleString("en")],
  ["Tokens", (t) => t.tokens.toLocaleString("en")],
  ["Wall time", (t) => formatDuration(t.wallTime) || "—"],
];

/** Key order does not make arguments different: {"b":1,"a":2} equals {"a":2,"b":1}. */
function stable(value) {
  if (Array.isArray(value)) return `[${value.map(stable).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stable(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** What the compare view shows of one step, as plain values that compare with ===. */
function facts(step) {
  const attempt = shownAttempt(step);
  const calls = attempt && attempt.calls.size
    ? [...attempt.calls.values()].map((c) => ({ name: c.name, args: stable(c.kwargs), result: c.output ?? "" }))
    : (step.pendingCalls || []).map((c) => ({ name: c.tool_name, args: stable(c.tool_kwargs), result: "" }));
  const output = attempt ? attempt.output || attempt.streams.map((s) => s.text).join("\n") : "";
  return { kind: step.kind, status: step.status, input: step.input ?? "", calls, output, usage: attempt?.usage?.total_tokens || 0 };
}

/** The two notebooks' turns, paired by index, with their steps paired by number. */
function align(models) {
  const turns = models.map((m) => [...m.turns.values()]);
  const rows = [];
  const count = Math.max(...turns.map((t) => t.length));
  for (let i = 0; i < count; i++) {
    const pair = turns.map((t) => t[i] || null);
    const steps = pair.map((turn, side) => (turn ? liveSteps(models[side], turn) : []));
    rows.push({ kind: "turn", index: i + 1, pair });
    const n = Math.max(...steps.map((s) => s.length));
    for (let j = 0; j < n; j++) rows.push({ kind: "step", turn: i + 1, number: j + 1, pair: steps.map((s) => (s[j] ? facts(s[j]) : null)) });
    rows.push({ kind: "answer", turn: i + 1, pair });
  }
  return rows;
}

function field(name, label, text, differs) {
  return h("div", { class: `compare-field${differs ? " is-different" : ""}`, "data-field": name }, h("span", { class: "field-label" }, label), h("pre", { class: "compare-text" }, text || "—"));
}

function callList(calls, other) {
  return h(
    "ol",
    { class: "compare-calls", "data-field": "calls" },
    calls.map((call, i) => {
      const twin = other ? other.calls[i] : null;
      const argsDiffer = !twin || twin.name !== call.name || twin.args !== call.args;
      const resultDiffers = !twin || twin.result !== call.result;
      return h(
        "li",
        { class: "compare-call" },
        h("code", { class: `compare-args${argsDiffer ? " is-different" : ""}` }, `${call.name}(${call.args})`),
        call.result !== "" ? h("span", { class: `compare-result${resultDiffers ? " is-different" : ""}` }, `→ ${call.result}`) : null,
      );
    }),
  );
}

function stepCell(row, side) {
  const mine = row.pair[side];
  const other = row.pair[1 - side];
  if (!mine) return h("div", { class: "compare-cell is-missing is-different" }, h("p", { class: "muted" }, "No such step here."));
  const differs = (key) => !other || other[key] !== mine[key];
  const callsDiffer = !other || stable(other.calls) !== stable(mine.calls);
  return h(
    "div",
    { class: "compare-cell", "data-side": side },
    h("div", { class: "compare-cell-head" }, h("span", { class: "badge kind" }, mine.kind), h("span", { class: `badge status status-${mine.status}${differs("status") ? " is-different" : ""}` }, mine.status), mine.usage ? h("span", { class: "cell-meta" }, `${mine.usage.toLocaleString("en")} tokens`) : null),
    mine.input || other?.input ? field("input", "Input", mine.input, differs("input")) : null,
    mine.calls.length ? h("div", { class: `compare-field${callsDiffer ? " has-different" : ""}` }, h("span", { class: "field-label" }, "Tool calls"), callList(mine.calls, other)) : null,
    mine.output || other?.output ? field("output", "Output", mine.output, differs("output")) : null,
  );
}

function rowDiffers(row) {
  const [a, b] = row.pair;
  if (row.kind === "step") return !a || !b || stable(a) !== stable(b);
  if (row.kind === "turn") return (a?.input ?? null) !== (b?.input ?? null);
  return (a?.response ?? null) !== (b?.response ?? null);
}

function drawRow(row) {
  const differs = rowDiffers(row);
  const attrs = { class: `compare-row compare-${row.kind}${differs ? " row-differs" : ""}`, "data-differs": String(differs) };
  if (row.kind === "step") {
    attrs["data-turn"] = row.turn;
    attrs["data-step"] = row.number;
    return h(
      "section",
      attrs,
      h("div", { class: "compare-gutter" }, h("strong", {}, `Step ${row.number}`), differs ? h("span", { class: "badge differs" }, "differs") : h("span", { class: "muted" }, "same")),
      stepCell(row, 0),
      stepCell(row, 1),
    );
  }
  const texts = row.pair.map((turn) => (row.kind === "turn" ? turn?.input : turn?.response) ?? "");
  const label = row.kind === "turn" ? "You" : "Answer";
  if (row.kind === "answer" && !texts[0] && !texts[1]) return null;
  return h(
    "section",
    { ...attrs, "data-turn": row.kind === "turn" ? row.index : row.turn },
    h("div", { class: "compare-gutter" }, h("strong", {}, row.kind === "turn" ? `Turn ${row.index}` : "Answer"), differs ? h("span", { class: "badge differs" }, "differs") : null),
    ...texts.map((text) => h("div", { class: "compare-cell" }, field(row.kind === "turn" ? "message" : "answer", label, text, differs))),
  );
}

function drawTotals(models) {
  const sums = models.map((model) => totals(model));
  root.querySelectorAll("[data-totals]").forEach((dl, side) => {
    dl.replaceChildren(
      ...TOTALS.map(([label, show]) => {
        const value = show(sums[side]);
        const differs = value !== show(sums[1 - side]);
        return h("div", { class: `total${differs ? " is-different" : ""}` }, h("dt", {}, label), h("dd", { "data-total": label.toLowerCase().replaceAll(" ", "-") }, value));
      }),
    );
  });
}

function summary(rows) {
  const steps = rows.filter((r) => r.kind === "step");
  const differing = steps.filter(rowDiffers);
  if (!differing.length) return `All ${steps.length} aligned steps are the same.`;
  const first = differing[0];
  return `${differing.length} of ${steps.length} aligned steps differ; the first is turn ${first.turn}, step ${first.number}.`;
}

async function load(url) {
  // as the page's <link rel="preload"> asked for it, so the preloaded response is the one used
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  return response.json();
}

async function main() {
  const heads = [...root.querySelectorAll(".compare-head")];
  const t0 = performance.now();
  let exports;
  try {
    exports = await Promise.all(heads.map((head) => load(head.dataset.exportUrl)));
  } catch (err) {
    $("#compare-error").textContent = `Could not load the traces: ${err.message}`;
    $("#compare-error").hidden = false;
    return;
  }
  const t1 = performance.now();
  const models = exports.map((data) => {
    const model = reduceEvents(eventsOf(data));
    if (data.task) model.task = data.task; // a fork's wall time counts from its own start
    return model;
  });
  const t2 = performance.now();
  const rows = align(models);
  drawTotals(models);
  $("#compare-summary").textContent = summary(rows);
  $("#compare-rows").replaceChildren(...rows.map(drawRow).filter(Boolean));
  $("#only-different").addEventListener("change", (event) => root.classList.toggle("only-different", event.target.checked));
  const t3 = performance.now();
  Object.assign(metrics, { fetchMs: t1 - t0, reduceMs: t2 - t1, renderMs: t3 - t2, rows: rows.length });
  Object.assign(window.agentui, { models, rows });
  requestAnimationFrame(() => {
    metrics.readyAt = performance.now();
    root.dataset.ready = "true";
  });
}

main();
