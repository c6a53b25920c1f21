// What an MCP server says about a call while it runs (runs/presets/mcp/progress.py): its
// progress as a bar with the server's message, and its log messages, collapsed. Every text
// comes from an untrusted server and is set as text, never as markup. A card is redrawn with
// each note, so which log lists a person opened is kept here.

import { h } from "./dom.js";
import { revealText } from "./hidden.js";

const openLogs = new Set(); // call ids whose log list is open

function amount(value) {
  return Number.isInteger(value) ? String(value) : value.toLocaleString(undefined, { maximumFractionDigits: 2 });
}

/** The call's latest progress as its server reported it, or null. */
export function progressBlock(call) {
  const said = call.progress;
  if (!said) return null;
  const known = said.total != null && said.total > 0;
  const live = call.output == null && call.status === "running";
  const bar = known
    ? h("progress", { max: String(said.total), value: Math.min(Math.max(said.progress, 0), said.total), "aria-label": "Progress" })
    : h("progress", { "aria-label": "Progress" }); // no total: the bar says only that work goes on
  const share = known ? ` (${Math.round((100 * Math.min(said.progress, said.total)) / said.total)}%)` : "";
  const text = known ? `${amount(said.progress)} of ${amount(said.total)}${share}` : `${amount(said.progress)} so far`;
  return h(
    "div",
    { class: `tool-progress${live ? " is-live" : ""}`, dataset: { progress: String(said.progress) } },
    h("span", { class: "field-label" }, live ? "Progress" : "Last progress"),
    bar,
    h("span", { class: "progress-text" }, text, said.message ? h("span", { class: "progress-message" }, revealText(said.message)) : null),
  );
}

/** The log messages the call's server sent at the admin's level, collapsed, or null. */
export function logsBlock(call) {
  const logs = call.logs;
  if (!logs || (!logs.items.length && !logs.omitted)) return null;
  const count = logs.items.length + logs.omitted;
  const details = h(
    "details",
    { class: "tool-logs", open: openLogs.has(call.id) },
    h("summary", {}, `Server log: ${count} message${count === 1 ? "" : "s"}`),
    h(
      "ol",
      { class: "tool-log-list" },
      logs.items.map((item) =>
        h(
          "li",
          { class: `tool-log level-${item.level}` },
          h("span", { class: "log-level" }, item.level),
          item.logger ? h("span", { class: "log-logger" }, revealText(item.logger)) : null,
          h("span", { class: "log-text" }, revealText(item.text)),
        ),
      ),
    ),
    logs.omitted ? h("p", { class: "tool-wait" }, `${logs.omitted} more not kept here; agentui's log has them.`) : null,
  );
  details.addEventListener("toggle", () => (details.open ? openLogs.add(call.id) : openLogs.delete(call.id)));
  return details;
}
