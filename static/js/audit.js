// What people did, drawn from `human_action` events (runs/service/audit.py): each edit as
// before → after with who and when, rejections with their reason, approvals and stops.
// Shared by the live notebook and the read-only trace (cells.js).

import { formatUsd } from "./cost.js";
import { h, prettyJson, sentence } from "./dom.js";
import { formatDate, timeElement } from "./format.js";
import { revealText } from "./hidden.js";

const VERB = {
  edited_input: "edited the input",
  edited_arguments: "edited the arguments of",
  rejected_call: "rejected",
  approved: "approved the step",
  stopped: "stopped the turn",
  undone: "undid the step",
  set_rule: "set",
  budget_raised: "let the run go on past its budget",
  answered_elicitation: "answered the MCP server's question during",
};

const ELICITATION_ANSWER = { accept: "Accepted and sent", decline: "Declined", cancel: "Cancelled" };

// Decided by an approval rule (runs/service/policies), not by a click: the rule is named.
const AUTOMATIC = { auto_approved: "Approved automatically", auto_refused: "Refused automatically" };

function ruleLink(rule) {
  return h("a", { class: "rule-ref", href: "/policies/", title: `set ${formatDate(rule.set_at)}` }, `rule #${rule.id}`);
}

function automaticItem(step, action) {
  const target = action.toolId ? h("code", { class: "tool-name" }, callName(step, action.toolId)) : null;
  if (!action.rule && action.reason) {
    // no rule decided it: a read-only tool of a server the admin trusts (its reason says which)
    return h(
      "li",
      { class: `human-action automatic action-${action.action}`, "data-action": action.action, "data-rule": "" },
      `${AUTOMATIC[action.action]} `,
      target,
      `: ${action.reason}`,
      timeElement(action.at, "when"),
    );
  }
  const rule = action.rule || { id: "?", summary: "", set_by: "" };
  return h(
    "li",
    { class: `human-action automatic action-${action.action}`, "data-action": action.action, "data-rule": String(rule.id) },
    `${AUTOMATIC[action.action]} `,
    target,
    " by ",
    ruleLink(rule),
    `: ${rule.summary}, set by ${rule.set_by || "an admin"}`,
    timeElement(action.at, "when"),
    action.action === "auto_refused" ? h("p", { class: "tool-reason" }, `The model is told: ${action.reason}`) : null,
  );
}

/** "Budget for this run raised from $0.50 to $1.01 (it had spent $0.51)." */
function budgetRaise(action) {
  const unit = action.after?.unit;
  const amount = (limit) => (unit === "usd" ? formatUsd(Number(limit)) : `${Number(limit).toLocaleString("en")} tokens`);
  const scope = action.after?.scope === "day" ? "today (this run)" : "this run";
  return sentence(`Budget for ${scope} raised from ${amount(action.before?.limit)} to ${amount(action.after?.limit)}: ${action.reason || ""}`);
}

/** `text` and when, as every date of the app shows (format.js: "3 minutes ago", the date in full
 * in its tooltip), e.g. "Stopped by ana at step 2 (3 minutes ago)." */
function withWhen(text, at) {
  return at ? [`${text} (`, timeElement(at), ")."] : [`${text}.`];
}

function shown(value) {
  return typeof value === "string" ? revealText(value) : prettyJson(value ?? null);
}

function callName(step, toolId) {
  const call = step.pendingCalls?.find((c) => c.tool_id === toolId);
  const name = call ? revealText(call.tool_name) : toolId;
  return call?.output_name ? `${call.output_name} ${name}` : name;
}

/** Whether one of the step's calls was left running by Stop (a plain function's thread). */
function ranOn(step) {
  return step.attempts.some((attempt) => [...attempt.calls.values()].some((call) => call.stopped === "left_running"));
}

/** An edit as before → after; a side that was empty (null: no input yet, or cleared) is not
 * shown as "null": the edit says it added or removed the text. */
function editDiff(before, after) {
  const side = (cls, label, value) => h("div", { class: cls }, h("span", { class: "field-label" }, label), h("pre", { class: "tool-pre" }, shown(value)));
  if (before == null && after == null) return null;
  if (before == null) return h("div", { class: "edit-diff" }, side("edit-after", "Added", after));
  if (after == null) return h("div", { class: "edit-diff" }, side("edit-before", "Removed", before));
  return h(
    "div",
    { class: "edit-diff" },
    side("edit-before", "Before", before),
    h("span", { class: "edit-arrow", "aria-hidden": "true" }, "→"),
    side("edit-after", "After", after),
  );
}

function actionItem(step, action, turn) {
  if (AUTOMATIC[action.action]) return automaticItem(step, action);
  const target = action.toolId ? h("code", { class: "tool-name" }, callName(step, action.toolId)) : null;
  const detail = [];
  if (action.action === "edited_input" || action.action === "edited_arguments") detail.push(editDiff(action.before, action.after));
  if (action.action === "set_rule" && action.rule) detail.push(" ", ruleLink(action.rule), `: ${action.rule.summary}`);
  if (action.action === "budget_raised") detail.push(h("p", { class: "action-note" }, budgetRaise(action)));
  if (action.action === "answered_elicitation") {
    const answer = action.after || {};
    detail.push(h("p", { class: "action-note" }, `${ELICITATION_ANSWER[answer.action] || answer.action} (asked by the MCP server ${revealText(String(action.before?.server ?? ""))})`));
    if (answer.content) detail.push(h("pre", { class: "tool-pre" }, prettyJson(answer.content)));
  }
  if (action.action === "rejected_call") detail.push(h("p", { class: "tool-reason" }, `Reason: ${action.reason || "(none given)"}`));
  if (action.action === "stopped" && action.whileRunning) {
    // A stop cancels a step running in the same server; one running elsewhere finishes first.
    const note =
      turn?.status === "completed"
        ? "Stop was pressed while this step ran, and this step gave the answer: the turn finished."
        : step.status === "completed"
          ? "Stop was pressed while this step ran: it finished, and nothing after it ran."
          : `Stop was pressed while this step ran: it was cancelled and did not complete.${ranOn(step) ? " A tool it had begun could not be stopped and ran on (see its card)." : ""}`;
    detail.push(h("p", { class: "action-note" }, note));
  }
  // an action the server took for the person (a passed deadline) says so, and why
  const automatic = action.automatic ? h("span", { class: "automatic" }, ` automatically: ${action.automatic} `) : " ";
  return h(
    "li",
    { class: `human-action action-${action.action}${action.automatic ? " is-automatic" : ""}`, "data-action": action.action },
    action.automatic ? null : h("span", { class: "who" }, action.by),
    `${action.automatic ? "" : " "}${VERB[action.action] || action.action}${target ? " " : ""}`,
    target,
    automatic,
    timeElement(action.at, "when"),
    ...detail,
  );
}

/** The step's human actions as a list, or null when nobody acted on it. */
export function humanActionsBlock(model, step) {
  const turn = model.turns.get(step.turnId);
  if (!step.humanActions?.length) return null;
  return h(
    "section",
    { class: "human-actions", "aria-label": "Human actions" },
    h("span", { class: "field-label" }, "Human actions"),
    h("ul", {}, step.humanActions.map((action) => actionItem(step, action, turn))),
  );
}

function numbers(list) {
  return list.length < 2 ? `${list[0]}` : `${list.slice(0, -1).join(", ")} and ${list[list.length - 1]}`;
}

/** How a stopped turn ended, for its end-of-turn note: who, every step it cut off, and when
 * (text and a <time>, the children of the note). */
export function stoppedText(model, turn) {
  const stops = turn.stops || [];
  const stop = stops[stops.length - 1];
  if (!stop) return ["This turn was stopped before it finished."];
  const shown = turn.stepIds.filter((id) => !model.steps.get(id)?.dropped);
  const positions = [...new Set(stops.map((s) => shown.indexOf(s.stepId) + 1).filter((p) => p > 0))].sort((a, b) => a - b);
  const who = stop.automatic ? `automatically (${stop.automatic})` : `by ${stop.by}`;
  if (!positions.length) return withWhen(`Stopped ${who}`, stop.at);
  const steps = `step${positions.length > 1 ? "s" : ""} ${numbers(positions)}`;
  return withWhen(stop.whileRunning ? `Stopped ${who} during ${steps}` : `Stopped ${who} at ${steps}, before it ran`, stop.at);
}
