// A `chart` tool call's Vega-Lite spec, drawn with vega-embed (vendored; loaded on the first
// chart), with SVG and PNG export. The spec is model output: the server accepted only a safe
// subset (runs/presets/tools/chart_safety.py), and the page does not trust that either:
//   - every field vega-embed or Vega reads options from is dropped (`usermeta` anywhere, which
//     vega-embed merges over our options; `$schema`, which picks raw Vega; `config` beyond
//     styling; an input's `bind.element`), and a string that would fetch (`url(…)`) stops the
//     chart;
//   - no actions menu (our own SVG and PNG buttons), tooltips as plain text, and a loader that
//     refuses every request;
//   - expressions run through vega-interpreter (no eval), so the page's CSP needs no
//     'unsafe-eval'; vega-embed's injected <style> is off (its rules are in render.css);
//   - nothing in it may make the page do unbounded work: counts and sizes are capped, and it is
//     first run off the page, within a time budget (chart_limits.js, chart_worker.js).

import { h } from "../dom.js";
import { revealProse } from "../hidden.js";
import { DRAW_BUDGET_MS, boundExpressions, overLimit, refusingLoader } from "./chart_limits.js";

const SCRIPTS = ["vega/vega.min.js", "vega-lite/vega-lite.min.js", "vega-embed/vega-embed.min.js"];
const INTERPRETER = "vega-interpreter/vega-interpreter.js";
const VENDOR = new URL("../../vendor/", import.meta.url);
let loading = null;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const el = document.createElement("script");
    el.src = new URL(src, VENDOR).href;
    el.onload = resolve;
    el.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.append(el);
  });
}

/** vega-embed and the expression interpreter, loaded once (in order: they need vega as a global). */
export function loadVega() {
  loading ??= SCRIPTS.reduce((chain, src) => chain.then(() => loadScript(src)), Promise.resolve())
    .then(() => import(new URL(INTERPRETER, VENDOR).href))
    .then((interpreter) => {
      boundExpressions(window.vega);
      return { embed: window.vegaEmbed, expr: scrubbing(interpreter.expressionInterpreter) };
    });
  return loading;
}

// --- the trial run off the page ----------------------------------------------------------------

const LOAD_BUDGET_MS = 30000;
let trialWorker = null;
let trials = Promise.resolve(); // one at a time: each one's budget is its own

function runTrial(spec) {
  return new Promise((resolve) => {
    trialWorker ??= new Worker(new URL("./chart_worker.js", import.meta.url), { type: "module" });
    const worker = trialWorker;
    let timer = null;
    const stop = (why) => {
      worker.terminate(); // whatever it was doing stops here; the next chart gets a new worker
      if (trialWorker === worker) trialWorker = null;
      end(why);
    };
    const end = (outcome) => {
      clearTimeout(timer);
      worker.onmessage = worker.onerror = null;
      resolve(outcome);
    };
    // loading Vega into a new worker is not counted against the chart, but is bounded too
    timer = setTimeout(() => stop("the check that runs it first did not start"), LOAD_BUDGET_MS);
    worker.onmessage = ({ data }) => {
      if (data.started) {
        clearTimeout(timer);
        timer = setTimeout(() => stop(`drawing it took more than ${DRAW_BUDGET_MS / 1000} s, as a chart built to freeze the page would`), DRAW_BUDGET_MS);
      } else if (data.ended) end(data.error ? { error: data.error } : null);
    };
    worker.onerror = (event) => {
      event.preventDefault?.();
      stop(`the check that runs it first could not run (${event.message || "the worker failed"})`);
    };
    worker.postMessage({ spec });
  });
}

/**
 * Null when `spec` ran to its end off the page within the budget; why it is not drawn when it
 * did not (a string), or `{error}` when it ended with an error of its own.
 */
function trial(spec) {
  const outcome = trials.then(() => runTrial(spec));
  trials = outcome;
  return outcome;
}

// Channels whose strings are shown as text; every other string an encoder sets becomes an SVG
// attribute, where `url(…)` would fetch.
const TEXT_CHANNELS = new Set(["text", "tooltip", "description", "ariaRoleDescription"]);

/** Drawn text (a line, or lines) with its controls and tag characters as markers (hidden.js). */
function revealedText(text) {
  if (typeof text === "string") return revealProse(text);
  return Array.isArray(text) ? text.map(revealedText) : text;
}

/**
 * The interpreter, with every mark's encoded values checked as they are set: a string built by an
 * expression or taken from the data (`'u' + 'rl(…)'`, a colour field with no scale) that would
 * fetch is dropped, so no static check has to foresee it (the CSP's img-src is the last line).
 * Text as it is drawn (text marks, axis and legend labels, titles: all set through `text`) shows
 * its hidden characters as markers, while the data and the spec keep them as written.
 */
function scrubbing(interpreter) {
  return {
    ...interpreter,
    encode(ctx, encode) {
      const set = interpreter.encode(ctx, encode);
      const names = Object.keys(encode.channels).filter((name) => !TEXT_CHANNELS.has(name));
      const drawsText = "text" in encode.channels;
      return (item, _) => {
        const changed = set(item, _);
        for (const name of names) {
          if (typeof item[name] === "string" && loadsResource(item[name])) item[name] = undefined;
        }
        if (drawsText) item.text = revealedText(item.text);
        return changed;
      };
    },
  };
}

// --- what the page keeps of a spec -----------------------------------------------------------

// Config groups that only style (the server's allow-list, runs/presets/tools/chart_safety.py).
const CONFIG_KEY =
  /^(axis[A-Za-z]*|header[A-Za-z]*|legend|title|view|range|scale|style|background|padding|font|numberFormat|timeFormat|normalizedNumberFormat|countTitle|fieldTitle|concat|facet|aria|mark|arc|area|bar|boxplot|circle|errorband|errorbar|line|point|rect|rule|square|text|tick|trail)$/;
const OPTION_KEYS = new Set(["usermeta", "embedOptions", "loader", "url", "href"]);
// CSS functions that fetch, after undoing CSS escapes and comments as the browser would.
const RESOURCE = /(url|src|image|image-set|cross-fade|element)\s*\(|@import/i;

function unescapeCss(text) {
  return text
    .replace(/\\([0-9a-fA-F]{1,6})\s?/g, (_, hex) => {
      const code = parseInt(hex, 16);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : "\ufffd";
    })
    .replace(/\\([\s\S])/g, "$1")
    .replace(/\/\*[\s\S]*?(\*\/|$)/g, "");
}

/** Whether `text`, read as CSS, names a resource to fetch. */
export function loadsResource(text) {
  return /[(@\\]/.test(text) && RESOURCE.test(unescapeCss(text));
}

class UnsafeChart extends Error {}

/** A copy of `value` without option-bearing keys (but in data rows, `inRows`); throws UnsafeChart. */
function clean(value, inRows, parentKey = null) {
  if (Array.isArray(value)) return value.map((v) => clean(v, inRows));
  if (typeof value === "string") {
    if (loadsResource(value)) throw new UnsafeChart(`it would load a resource (${value.slice(0, 60)})`);
    return value;
  }
  if (!value || typeof value !== "object") return value;
  const out = {};
  for (const [key, inner] of Object.entries(value)) {
    if (loadsResource(key)) throw new UnsafeChart(`a name would load a resource (${key.slice(0, 60)})`);
    if (!inRows && OPTION_KEYS.has(key)) continue;
    const tooMany = inRows ? null : overLimit(key, inner);
    if (tooMany) throw new UnsafeChart(tooMany);
    if (!inRows && key === "bind" && inner && typeof inner === "object") {
      const { element, ...rest } = inner; // eslint-disable-line no-unused-vars
      out.bind = clean(rest, false);
      continue;
    }
    out[key] = clean(inner, inRows || (key === "values" && parentKey === "data"), key);
  }
  return out;
}

/** A chart's title (text, lines, or {text, subtitle, …}) with its controls and tag characters shown (hidden.js). */
function revealedTitle(title) {
  if (typeof title === "string" || Array.isArray(title)) return revealedText(title);
  if (!title || typeof title !== "object") return title;
  const out = { ...title };
  for (const key of ["text", "subtitle"]) {
    if (typeof out[key] === "string" || Array.isArray(out[key])) out[key] = revealedTitle(out[key]);
  }
  return out;
}

/**
 * The spec as the page draws it: option-bearing fields dropped (at any depth outside the data
 * rows), `$schema` gone (the page says it is Vega-Lite), config only styling. Throws when a
 * string would fetch a resource.
 */
export function safeSpec(spec) {
  const { $schema, config, ...rest } = clean(spec, false); // eslint-disable-line no-unused-vars
  const out = { ...rest };
  if (typeof out.background !== "string") delete out.background; // not an expression: see scrubbing()
  if (out.title != null) out.title = revealedTitle(out.title);
  if (config && typeof config === "object") {
    out.config = Object.fromEntries(Object.entries(config).filter(([key]) => CONFIG_KEY.test(key)));
  }
  return out;
}

// --- tooltips as plain text --------------------------------------------------------------------

function tooltipText(value) {
  if (value == null) return "";
  if (typeof value !== "object") return String(value);
  return Object.entries(value)
    .map(([key, v]) => `${key}: ${v !== null && typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join("\n");
}

let tooltipEl = null;

/** vega's tooltip handler: the value as text (never HTML, never an image), next to the pointer. */
function plainTooltip(handler, event, item, value) {
  tooltipEl ??= document.body.appendChild(h("div", { class: "chart-tooltip", role: "tooltip", hidden: true }));
  const text = tooltipText(value);
  if (!text || !event) {
    tooltipEl.hidden = true;
    return;
  }
  tooltipEl.textContent = revealProse(text);
  tooltipEl.hidden = false;
  const x = Math.min(event.clientX + 12, window.innerWidth - tooltipEl.offsetWidth - 4);
  const y = Math.min(event.clientY + 12, window.innerHeight - tooltipEl.offsetHeight - 4);
  tooltipEl.style.left = `${Math.max(x, 0)}px`;
  tooltipEl.style.top = `${Math.max(y, 0)}px`;
}

function save(url, name) {
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
}

/**
 * The chart for `spec`. Drawing is asynchronous; `root.dataset.state` becomes "drawn" or
 * "failed", and `root.chartView` holds the Vega view once drawn.
 */
export function chartView(spec, { name = "chart" } = {}) {
  const target = h("div", { class: "chart-target" });
  const status = h("span", { class: "chart-status muted", role: "status" }, "Drawing…");
  const svgButton = h("button", { type: "button", class: "button-link", disabled: true }, "SVG");
  const pngButton = h("button", { type: "button", class: "button-link", disabled: true }, "PNG");
  const root = h("div", { class: "result-chart", "data-state": "loading" }, h("div", { class: "rt-bar" }, status, h("span", { class: "rt-actions" }, svgButton, pngButton)), target);
  const draw = async () => {
    const drawn = safeSpec(spec);
    const refused = await trial(drawn);
    if (typeof refused === "string") throw new UnsafeChart(refused);
    if (refused) throw new Error(refused.error); // the chart's own error, as its trial run met it
    const { embed, expr } = await loadVega();
    const result = await embed(target, drawn, {
      mode: "vega-lite",
      actions: false,
      defaultStyle: false,
      renderer: "svg",
      loader: refusingLoader(window.vega),
      tooltip: plainTooltip,
      ast: true,
      expr,
      config: { background: null },
    });
    root.chartView = result.view;
    svgButton.disabled = pngButton.disabled = false;
    svgButton.addEventListener("click", async () => save(await result.view.toImageURL("svg"), `${name}.svg`));
    pngButton.addEventListener("click", async () => save(await result.view.toImageURL("png", 2), `${name}.png`));
    const title = drawn.title;
    status.textContent = title ? (typeof title === "string" ? title : typeof title.text === "string" ? title.text : "Chart") : "Chart";
    root.dataset.state = "drawn";
  };
  draw().catch((err) => {
    status.textContent = err instanceof UnsafeChart ? `The chart was not drawn: ${err.message}.` : `The chart could not be drawn: ${err.message}`;
    root.dataset.state = "failed";
  });
  return root;
}
