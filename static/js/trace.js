// Entry point of the read-only trace view: load the stored log once, reduce it in one pass,
// then draw the cells, the DAG, the timeline and the totals.

import { attachAnnotations } from "./annotations.js";
import { CellsView } from "./cells.js";
import { Corrections } from "./corrections.js";
import { ForkButtons } from "./fork.js";
import { DagView } from "./dag.js";
import { costLine, formatUsd } from "./cost.js";
import { formatDuration, h } from "./dom.js";
import { drawLazily } from "./render/lazy.js";
import { totals } from "./selectors.js";
import { splitPane } from "./split.js";
import { clearDirty, eventsOf, reduceEvents } from "./store.js";
import { renderTimeline } from "./timeline.js";

const root = document.getElementById("trace");
const $ = (selector) => root.querySelector(selector);
const metrics = { fetchMs: 0, reduceMs: 0, renderMs: 0, events: 0, readyAt: 0 };
window.agentui = { metrics };

function reveal(target) {
  const el = document.getElementById(target);
  if (!el) return;
  el.scrollIntoView({ block: "center" });
  el.focus({ preventScroll: true });
  el.classList.remove("is-flash");
  void el.offsetWidth;
  el.classList.add("is-flash");
}

function renderTotals(model) {
  const t = totals(model);
  const spent = costLine(t.usage, model.task?.price);
  const items = [
    ["Steps", t.steps.toLocaleString("en")],
    ["Tool calls", t.calls.toLocaleString("en")],
    ["Tokens", t.tokens.toLocaleString("en")],
    ["Cost", spent ? (spent.usd == null ? "price unknown" : formatUsd(spent.usd)) : "—", spent?.title],
    ["Wall time", formatDuration(t.wallTime) || "—"],
    ["Human actions", t.humanActions.toLocaleString("en")],
  ];
  $("#totals").replaceChildren(...items.map(([label, value, title]) => h("div", { class: "total" }, h("dt", {}, label), h("dd", { "data-total": label.toLowerCase().replaceAll(" ", "-"), title: title || null }, value))));
}

async function main() {
  const t0 = performance.now();
  let data;
  try {
    // (the request the template's preload started: same address, mode and credentials)
    const response = await fetch(root.dataset.traceUrl, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    data = await response.json();
  } catch (err) {
    $("#trace-error").textContent = `Could not load this trace: ${err.message}`;
    $("#trace-error").hidden = false;
    return;
  }
  const t1 = performance.now();
  const events = eventsOf(data);
  const model = reduceEvents(events);
  if (data.task) model.task = data.task;
  const t2 = performance.now();
  // The DAG view first (it reads its panel's size, cheap while the page is still empty); the
  // graph is drawn once the page is up: a 500-step trace's 1,500 nodes take a moment.
  const dag = new DagView($("#dag"), { onSelect: reveal });
  splitPane($(".nb-layout"), $(".split-handle"));
  const t3 = performance.now();
  renderTimeline($("#timeline"), model, { onSelect: reveal });
  const t4 = performance.now();
  drawLazily(); // 500 cells' tables, charts and Markdown: drawn as they come near the viewport
  new CellsView($("#cells")).update(model);
  attachAnnotations(model, data.annotations, root.dataset.annotationsUrl);
  const corrections = new Corrections($("#corrections-panel"), { url: root.dataset.correctionsUrl, answerUrl: root.dataset.correctedAnswerUrl, reveal });
  corrections.load();
  new ForkButtons(root.dataset.forkUrl).sync(model, model.steps.keys());
  renderTotals(model);
  clearDirty(model);
  // Only human actions: hide the steps nobody edited, rejected, approved or stopped.
  $("#only-human").addEventListener("change", (event) => root.classList.toggle("only-human", event.target.checked));
  const t5 = performance.now();
  Object.assign(metrics, {
    fetchMs: t1 - t0, reduceMs: t2 - t1, renderMs: t5 - t2,
    timelineMs: t4 - t3, cellsMs: t5 - t4, events: events.length,
  });
  Object.assign(window.agentui, { model, dag });
  // After layout and paint: what a person waits for.
  requestAnimationFrame(() => {
    metrics.readyAt = performance.now();
    root.dataset.ready = "true";
    setTimeout(() => {
      const t = performance.now();
      dag.update(model);
      metrics.dagMs = performance.now() - t;
      root.dataset.dagReady = "true";
    });
  });
}

main();
