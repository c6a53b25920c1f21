// A `chart` tool call's Vega-Lite spec, drawn with vega-embed (vendored; loaded on the first
// chart), with SVG and PNG export. Charts load nothing: the spec's data is inline (the server
// put it there) and the loader refuses every URL.

import { h } from "../dom.js";

const SCRIPTS = ["vega/vega.min.js", "vega-lite/vega-lite.min.js", "vega-embed/vega-embed.min.js"];
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

/** vega-embed, loaded once (in order: it needs vega and vega-lite as globals). */
export function loadVega() {
  loading ??= SCRIPTS.reduce((chain, src) => chain.then(() => loadScript(src)), Promise.resolve()).then(() => window.vegaEmbed);
  return loading;
}

function refusingLoader() {
  const loader = window.vega.loader();
  const refuse = () => Promise.reject(new Error("charts load nothing from outside the page"));
  loader.load = refuse;
  loader.sanitize = refuse;
  loader.http = refuse;
  loader.file = refuse;
  return loader;
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
    const embed = await loadVega();
    const result = await embed(target, spec, {
      actions: false,
      renderer: "svg",
      loader: refusingLoader(),
      tooltip: true,
      config: { background: null },
    });
    root.chartView = result.view;
    svgButton.disabled = pngButton.disabled = false;
    svgButton.addEventListener("click", async () => save(await result.view.toImageURL("svg"), `${name}.svg`));
    pngButton.addEventListener("click", async () => save(await result.view.toImageURL("png", 2), `${name}.png`));
    status.textContent = spec.title ? (typeof spec.title === "string" ? spec.title : spec.title.text || "Chart") : "Chart";
    root.dataset.state = "drawn";
  };
  draw().catch((err) => {
    status.textContent = `The chart could not be drawn: ${err.message}`;
    root.dataset.state = "failed";
  });
  return root;
}
