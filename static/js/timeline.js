// The trace timeline: every step run and every tool call as a bar over wall-clock time, one row
// each, so calls that ran in parallel show as overlapping bars; the time a step waited for a
// person is a span of its own in the step's row, naming who decided. Built in one pass.

import { domId, formatDuration, h } from "./dom.js";
import { resultName } from "./chain.js";
import { revealText } from "./hidden.js";
import { liveSteps } from "./selectors.js";

const DECIDED = { approved: "approved", auto_approved: "approved", budget_raised: "budget raised", stopped: "stopped" };

/** Who ended a wait for a person, as its span says: "approved by ana", "approved by a rule",
 * "stopped automatically (the deadline passed)"; "" while it still waits. */
export function waitDecision(decision) {
  if (!decision) return "";
  const verb = DECIDED[decision.action] || decision.action.replaceAll("_", " ");
  if (decision.automatic) return `${verb} automatically (${decision.automatic})`;
  if (decision.action === "auto_approved") return decision.rule ? `${verb} by a rule` : `${verb} automatically`;
  return `${verb} by ${decision.by}`;
}

function waitBars(step) {
  const bars = step.waits.map((w) => ({ start: w.start, end: w.end, status: "waiting", wait: waitDecision(w.decision) || "ended" }));
  // still waiting (not after a stop: a turn that ended waits for no one)
  if (step.waitingSince != null && step.waiting) bars.push({ start: step.waitingSince, end: null, status: "waiting", wait: "" });
  return bars;
}

/** Rows in display order: per step its waits for a person and its runs (one row), then its
 * tool calls. */
export function timelineRows(model) {
  const rows = [];
  for (const turn of model.turns.values()) {
    liveSteps(model, turn).forEach((step, i) => {
      const runs = step.attempts
        .filter((a) => a.startedAt != null)
        .map((a) => ({ start: a.startedAt, end: a.endedAt, status: a.status }));
      const bars = [...waitBars(step), ...runs];
      rows.push({ kind: "step", label: `Step ${i + 1}`, sub: `${turn.index > 1 ? `turn ${turn.index} · ` : ""}${step.kind === "tool_calls" ? "tool calls" : step.kind}`, target: domId("step", step.id), bars });
      step.attempts.forEach((attempt) => {
        for (const call of attempt.calls.values()) {
          if (call.startedAt == null) continue;
          rows.push({
            kind: "call",
            label: `${resultName(call) ? `${resultName(call)} ` : ""}${revealText(call.name)}`,
            sub: "",
            target: domId("call", `${step.id}-${call.id}`),
            bars: [{ start: call.startedAt, end: call.endedAt, status: call.status }],
          });
        }
      });
    });
  }
  return rows;
}

function niceStep(span) {
  const raw = span / 6;
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

const MAX_ZOOM = 512;

/**
 * Draw the timeline into `container`. `now` (epoch seconds) ends bars still running.
 * Zoom widens the tracks (the view scrolls sideways, labels stay put), so a short parallel
 * burst inside a long run can still be told apart.
 * @returns {{rows: number, start: number, end: number, setZoom: (zoom: number) => void}}
 */
export function renderTimeline(container, model, { now = Date.now() / 1000, onSelect = null } = {}) {
  const rows = timelineRows(model);
  let start = Infinity;
  let end = -Infinity;
  for (const row of rows) {
    for (const bar of row.bars) {
      start = Math.min(start, bar.start);
      end = Math.max(end, bar.end ?? now);
    }
  }
  if (!rows.length || !Number.isFinite(start)) {
    container.replaceChildren(h("p", { class: "muted" }, "Nothing ran yet."));
    return { rows: 0, start: 0, end: 0, setZoom: () => {} };
  }
  const span = Math.max(end - start, 0.001);
  const pct = (t) => `${(((t - start) / span) * 100).toFixed(4)}%`;
  const width = (a, b) => `${Math.max(((b - a) / span) * 100, 0.05).toFixed(4)}%`;

  const axisTrack = h("div", { class: "tl-track" });
  const axis = h("div", { class: "tl-row tl-axis", "aria-hidden": "true" }, h("span", { class: "tl-label" }), axisTrack);
  const body = document.createDocumentFragment();
  for (const row of rows) {
    const bars = row.bars.map((bar) => {
      const stop = bar.end ?? now;
      const from = `from +${formatDuration(bar.start - start) || "0"}`;
      if (bar.wait != null) {
        // its own span, saying who decided: the blank before a step ran, when a person was asked
        const said = bar.wait ? `waiting for a person · ${bar.wait}` : "waiting for a person";
        const el = h("span", { class: "tl-bar tl-wait", title: `${row.label}: ${said}, ${formatDuration(stop - bar.start)}, ${from}`, "data-start": bar.start, "data-end": stop, "data-decided": bar.wait }, said);
        el.style.left = pct(bar.start);
        el.style.width = width(bar.start, stop);
        return el;
      }
      const text = `${row.label}: ${formatDuration(stop - bar.start)} (${bar.status}), ${from}`;
      const el = h("span", { class: `tl-bar status status-${bar.status}`, title: text, "data-start": bar.start, "data-end": stop });
      // (through the CSSOM: the CSP refuses style attributes)
      el.style.left = pct(bar.start);
      el.style.width = width(bar.start, stop);
      return el;
    });
    const label = h("button", { type: "button", class: "tl-label", "data-target": row.target, title: row.sub ? `${row.label} (${row.sub})` : row.label }, row.label, row.sub ? h("span", { class: "tl-sub" }, row.sub) : null);
    if (onSelect) label.addEventListener("click", () => onSelect(row.target));
    body.append(h("div", { class: `tl-row tl-${row.kind}`, role: "listitem" }, label, h("div", { class: "tl-track" }, bars)));
  }
  const inner = h("div", { class: "tl-inner" }, axis, h("div", { class: "tl-rows", role: "list", "aria-label": "Steps and tool calls over time" }, body));
  const scroller = h("div", { class: "tl-scroll" }, inner);

  let zoom = 1;
  const drawAxis = () => {
    const step = niceStep(span / zoom);
    const ticks = [];
    for (let t = 0; t <= span + 1e-9; t += step) {
      const tick = h("span", { class: "tl-tick" }, t === 0 ? "0" : formatDuration(t));
      tick.style.left = `${((t / span) * 100).toFixed(4)}%`;
      ticks.push(tick);
    }
    axisTrack.replaceChildren(...ticks);
  };
  const level = h("span", { class: "tl-zoom muted", "aria-live": "polite" });
  const zoomOut = h("button", { type: "button", class: "button secondary", "aria-label": "Zoom out" }, "−");
  const zoomIn = h("button", { type: "button", class: "button secondary", "aria-label": "Zoom in" }, "+");
  const fit = h("button", { type: "button", class: "button secondary" }, "Fit");
  // Zoom around what is on screen: the time span of the rows scrolled into view.
  const visibleCentre = () => {
    const top = scroller.scrollTop;
    const bottom = top + scroller.clientHeight;
    let lo = Infinity;
    let hi = -Infinity;
    for (const bar of inner.querySelectorAll(".tl-rows .tl-bar")) {
      const row = bar.parentElement.parentElement;
      if (row.offsetTop + row.offsetHeight < top) continue;
      if (row.offsetTop > bottom) break;
      lo = Math.min(lo, Number(bar.dataset.start));
      hi = Math.max(hi, Number(bar.dataset.end));
    }
    return Number.isFinite(lo) ? ((lo + hi) / 2 - start) / span : 0.5;
  };
  const setZoom = (next) => {
    const centre = zoom === 1 && next === 1 ? null : visibleCentre(); // reading layout is costly; skip it at 1
    zoom = Math.min(MAX_ZOOM, Math.max(1, next));
    inner.style.setProperty("--zoom", String(zoom));
    drawAxis();
    if (centre !== null) {
      scroller.scrollLeft = axisTrack.offsetLeft + centre * axisTrack.offsetWidth - (scroller.clientWidth + axisTrack.offsetLeft) / 2;
    }
    level.textContent = zoom === 1 ? "whole run" : `×${zoom}`;
    zoomOut.disabled = fit.disabled = zoom === 1;
    zoomIn.disabled = zoom === MAX_ZOOM;
  };
  zoomOut.addEventListener("click", () => setZoom(zoom / 2));
  zoomIn.addEventListener("click", () => setZoom(zoom * 2));
  fit.addEventListener("click", () => setZoom(1));
  const controls = h("div", { class: "tl-controls", role: "group", "aria-label": "Timeline zoom" }, zoomOut, zoomIn, fit, level);
  container.replaceChildren(controls, scroller);
  setZoom(1);
  return { rows: rows.length, start, end, setZoom };
}
