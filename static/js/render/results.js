// A tool call's result as an analyst wants it: a chart for `chart`, a table for tabular output
// (the SQL tool, any list of records), the text otherwise. The raw JSON is one click away.

import { h, prettyJson } from "../dom.js";
import { formatNumber, numberIn, numberView } from "../format.js";
import { chartView } from "./chart.js";
import { whenNear } from "./lazy.js";
import { partsView } from "./mcp.js";
import { asTable, resultTable } from "./table.js";

function parsed(text) {
  if (!text || (text[0] !== "{" && text[0] !== "[")) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Where the page serves a call's full table as CSV (from the notebook's data-result-csv-url). */
function csvUrl(stepId, callId) {
  const base = document.querySelector("[data-result-csv-url]")?.dataset.resultCsvUrl;
  if (!base) return null;
  return `${base}?${new URLSearchParams({ step: stepId, call: callId })}`;
}

/** The element showing `call`'s output inside its tool card: an MCP result's images, resources
 * and links first, then the text the model was given (which describes them). */
export function toolResultBody(stepId, call) {
  if (!call.parts?.length || call.isError) return textBody(stepId, call);
  return h(
    "div",
    { class: "tool-with-parts" },
    partsView(stepId, call),
    h("span", { class: "field-label model-saw" }, "What the model was given"),
    textBody(stepId, call),
  );
}

function textBody(stepId, call) {
  const plain = () => h("pre", { class: "tool-pre" }, call.output);
  if (call.isError) return plain();
  // a number that reads differently rounded (13681.710000000001): rounded, the exact value a click away
  const n = numberIn(call.output);
  if (n != null && formatNumber(n) !== call.output.trim()) return h("p", { class: "tool-number" }, numberView(call.output));
  const raw = call.rawOutput ?? parsed(call.output);
  let make = null;
  let label = null;
  if (call.name === "chart" && raw?.spec && typeof raw.spec === "object") {
    make = () => chartView(raw.spec, { name: `chart-${call.id}` });
    label = "Chart";
  } else {
    const table = asTable(raw);
    if (table) {
      make = () => resultTable(table, { csvUrl: csvUrl(stepId, call.id) });
      label = "Table";
    }
  }
  if (!make) return plain();
  const view = h("div", { class: "result-view" });
  whenNear(view, () => view.append(make()));
  let rawEl = null;
  const toggle = h("button", { type: "button", class: "button-link result-toggle", "aria-pressed": "false" }, "Raw JSON");
  toggle.addEventListener("click", () => {
    if (!rawEl) {
      rawEl = h("pre", { class: "tool-pre result-raw", hidden: true }, prettyJson(raw));
      view.after(rawEl);
    }
    const showRaw = rawEl.hidden;
    view.hidden = showRaw;
    rawEl.hidden = !showRaw;
    toggle.textContent = showRaw ? label : "Raw JSON";
    toggle.setAttribute("aria-pressed", String(showRaw));
  });
  return h("div", { class: "tool-rich" }, toggle, view);
}
