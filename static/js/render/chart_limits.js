// How much a chart may ask the browser to do. A spec is model output, and Vega-Lite can be made
// to build far more than its data: `sequence(0, 1e8)` then `flatten`, an axis asking for 10⁸
// ticks, a width of 10⁹ pixels (an axis's default tick count follows the width), a padded string
// of a billion characters. Drawn on the page's own thread, such a chart freezes the notebook and
// then crashes the tab, again on every reload. So counts and sizes are capped here (the server
// refuses the same, runs/presets/tools/chart_safety.py), the expression functions that build
// arrays or strings are bounded, and every chart is first run off the page (chart_worker.js)
// within a time budget: one that does not finish in time is not drawn.

/** Numbers in a spec (outside its data rows) that set how many things get made, and their cap. */
export const COUNT_LIMITS = new Map([
  ["tickCount", 500],
  ["maxbins", 500],
  ["steps", 1000],
  ["minsteps", 1000],
  ["maxsteps", 1000],
  ["width", 10000],
  ["height", 10000],
  ["continuousWidth", 10000],
  ["continuousHeight", 10000],
  ["discreteWidth", 10000],
  ["discreteHeight", 10000],
]);

/** The most items an expression may build in one array or string. */
export const MAX_BUILT = 10000;
/** How long the off-page run of a chart may take before it is judged a trap (ms). */
export const DRAW_BUDGET_MS = 4000;

/** Why `value` under `key` is over its cap, or null. */
export function overLimit(key, value) {
  const cap = COUNT_LIMITS.get(key);
  if (cap === undefined || typeof value !== "number" || value <= cap) return null;
  return `'${key}' is ${value}, more than a chart may ask for (at most ${cap})`;
}

function built(count, what) {
  if (!(count <= MAX_BUILT)) throw new Error(`a chart may build at most ${MAX_BUILT.toLocaleString("en")} ${what} (asked for ${count})`);
}

/** Register bounded versions of the expression functions that build arrays and strings. */
export function boundExpressions(vega) {
  const sequence = vega.expressionFunction("sequence");
  vega.expressionFunction("sequence", (...args) => {
    const [start, stop, step] = args.length === 1 ? [0, args[0], 1] : [args[0], args[1], args[2] ?? 1];
    built(Math.ceil((stop - start) / step), "items in a sequence");
    return sequence(...args);
  });
  const pad = vega.expressionFunction("pad");
  vega.expressionFunction("pad", (text, length, ...rest) => {
    built(length, "characters in a padded string");
    return pad(text, length, ...rest);
  });
  for (const name of ["timeSequence", "utcSequence"]) {
    if (vega.expressionFunction(name)) {
      vega.expressionFunction(name, () => {
        throw new Error(`${name} is not available in charts`);
      });
    }
  }
}

/** A Vega loader that refuses every request: a chart loads nothing from outside the page. */
export function refusingLoader(vega) {
  const loader = vega.loader();
  const refuse = () => Promise.reject(new Error("charts load nothing from outside the page"));
  loader.load = loader.sanitize = loader.http = loader.file = refuse;
  return loader;
}
