// A chart's trial run, off the page (chart.js sends the spec as the page would draw it): Vega-Lite
// compiles it and Vega runs its whole dataflow — data, transforms, scales, axes, legends, marks —
// with no renderer. The page times the run and draws the chart only if it ended within
// DRAW_BUDGET_MS and without an error; a worker that does not answer in time is terminated
// (see chart_limits.js).

import { boundExpressions, refusingLoader } from "./chart_limits.js";

const VENDOR = new URL("../../vendor/", import.meta.url);
let loading = null;

function load() {
  loading ??= (async () => {
    // UMD bundles: imported for their effect, they set self.vega and self.vegaLite
    await import(new URL("vega/vega.min.js", VENDOR).href);
    await import(new URL("vega-lite/vega-lite.min.js", VENDOR).href);
    const { expressionInterpreter } = await import(new URL("vega-interpreter/vega-interpreter.js", VENDOR).href);
    boundExpressions(self.vega);
    return expressionInterpreter;
  })();
  return loading;
}

self.onmessage = async ({ data: { spec } }) => {
  let view = null;
  try {
    const expr = await load();
    self.postMessage({ started: true }); // the budget counts from here, not from loading Vega
    const { spec: compiled } = self.vegaLite.compile(spec);
    // Vega logs an operator's error and goes on; the first one is the chart's error here
    const logger = self.vega.logger(self.vega.Warn);
    const errors = [];
    logger.error = (...args) => errors.push(args.map((a) => a?.message ?? String(a)).join(" "));
    logger.warn = () => {};
    view = new self.vega.View(self.vega.parse(compiled, null, { ast: true }), { renderer: "none", expr, loader: refusingLoader(self.vega), logger });
    await view.runAsync();
    self.postMessage(errors.length ? { ended: true, error: errors[0] } : { ended: true });
  } catch (err) {
    self.postMessage({ ended: true, error: String(err?.message ?? err) });
  } finally {
    view?.finalize();
  }
};
