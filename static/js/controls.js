// The controls inside a step's cell: edit the pending step's input (or its tool calls'
// arguments, checked as JSON before sending), reject a call with a reason, approve; undo on the
// last completed step. Rebuilt only when what they offer changes, keeping what was typed.

import { isCtrlEnter } from "./actions.js";
import { pendingResultName, plannedAs } from "./chain.js";
import { countdown } from "./deadline.js";
import { domId, h, prettyJson } from "./dom.js";
import { hiddenNote, revealText } from "./hidden.js";
import { toolLabel } from "./render/mcp.js";
import { batchControls } from "./policy_controls.js";
import { shownAttempt } from "./selectors.js";

/** Why a step waits on a budget ("Budget of $0.50 for this run reached: $0.51 spent"). */
function budgetNote(budget) {
  const reason = budget.reason ? budget.reason[0].toUpperCase() + budget.reason.slice(1) : "A budget was reached";
  return h(
    "p",
    { class: "budget-note", role: "note", "data-budget-scope": budget.scope },
    h("strong", {}, `${reason}.`),
    `The run waits for you: go on (the budget is raised to ${budget.raise_words} for this run, on record) or stop it.`,
  );
}

/** Stop on a budget's card: the toolbar's Stop, which asks first. */
function stopButton(perms) {
  const stop = button("Stop the turn", { action: "stop-budget", allowed: perms.abandon });
  stop.addEventListener("click", () => document.getElementById("abandon-button")?.click());
  return stop;
}

function button(label, { action, primary = false, allowed = true, title = null, describedBy = null }) {
  const el = h("button", {
    type: "button",
    class: primary ? "button primary" : "button secondary",
    "data-action": action,
    "data-allowed": String(allowed),
    "aria-describedby": describedBy,
    title,
  }, label);
  el.disabled = !allowed;
  return el;
}

/** Controls inside a step's cell. */
export class StepControls {
  /** @param {import("./actions.js").ActionBus} bus */
  constructor(bus) {
    this.bus = bus;
  }

  /**
   * (Re)build the controls in `slot` for `step` if what they offer changed.
   * Returns whether the step has controls at all.
   */
  render(slot, model, step, perms) {
    const isNext = perms.runnableIds.includes(step.id);
    const isUndo = perms.undoStepIds.includes(step.id);
    if (!isNext && !isUndo) {
      if (slot.dataset.sig) {
        slot.replaceChildren();
        delete slot.dataset.sig;
        slot.dataset.ownsCalls = "false";
      }
      return false;
    }
    const calls = step.kind === "tool_calls" && isNext && step.status === "pending" ? step.pendingCalls || [] : [];
    const sig = [
      step.status, step.waiting, step.deadline?.at, step.budget?.reason, step.inputVersion, step.undoCount, isNext, isUndo,
      perms.canApprove, perms.canEdit, perms.canUndo, model.mode, perms.branches && `${perms.runnableIds.length}:${perms.runnableIds[0]}`,
      calls.map((c) => `${c.tool_id}:${c.decision}:${c.reason ?? ""}`).join(","),
    ].join("|");
    if (slot.dataset.sig === sig) return true;
    const saved = saveFields(slot);
    const parts = [];
    if (isNext) parts.push(this.#runControls(step, perms, calls, model));
    if (isUndo) parts.push(this.#undoControls(step, perms));
    slot.replaceChildren(...parts);
    slot.dataset.sig = sig;
    slot.dataset.ownsCalls = String(calls.length > 0);
    restoreFields(slot, saved);
    return true;
  }

  #runControls(step, perms, calls, model) {
    const id = step.id;
    const approveErr = domId("err-approve", id);
    const editErr = domId("err-edit", id);
    const group = h("div", { class: "step-controls", role: "group", "aria-label": "Run this step" });
    if (step.waiting && step.deadline && step.status === "pending") {
      group.append(h("p", { class: "deadline-note" }, countdown(h, step.deadline.at, step.deadline.action), " unless you decide first."));
    }
    const overBudget = step.waiting && step.budget && step.status === "pending" ? step.budget : null;
    if (overBudget) group.append(budgetNote(overBudget));
    const editable = perms.canEdit && step.status === "pending";
    let textarea = null;
    if (step.kind === "tool_calls" && calls.length) {
      group.append(h("p", { class: "controls-intro" }, "The model wants to call these tools. Edit arguments, reject calls you do not want, then approve the step."));
      group.append(h("div", { class: "tool-cards" }, calls.map((call) => this.#callEditor(step, call, editable))));
      group.append(this.bus.slot(`edit:${id}`, editErr));
    } else if (step.status === "pending") {
      const answering = step.kind === "human_input";
      const fieldId = domId("input", id);
      textarea = h("textarea", {
        id: fieldId,
        class: "step-input-field",
        rows: 3,
        "data-field": "input",
        "aria-describedby": `${editErr} ${domId("hint", id)}`,
        placeholder: answering ? "Your answer; the run goes on with it" : "Optional: a message for the model before this step runs",
      });
      textarea.value = textarea.defaultValue = step.input ?? "";
      textarea.disabled = !editable;
      textarea.addEventListener("input", () => this.bus.setError(`edit:${id}`, null));
      group.append(h("label", { for: fieldId, class: "field-label" }, answering ? "Your answer" : "Input for this step"), textarea, this.bus.slot(`edit:${id}`, editErr));
    }
    const approveLabel = step.kind === "human_input" && step.status === "pending" ? "Send answer" : step.status === "pending" ? "Approve and run" : "Run again";
    const label = overBudget ? `Raise the budget to ${overBudget.raise_words} and go on` : approveLabel;
    const approve = button(label, { action: "approve", primary: true, allowed: perms.canApprove, describedBy: approveErr });
    approve.addEventListener("click", () => this.#approve(group, step, approve));
    const row = h("div", { class: "button-row" }, approve);
    if (overBudget) row.append(stopButton(perms));
    if (step.status === "pending") {
      const save = button(step.kind === "tool_calls" ? "Save edits" : "Save input", { action: "save", allowed: editable, describedBy: editErr });
      save.addEventListener("click", () => this.#saveEdits(group, step, save));
      row.append(save);
    }
    const hint = h("span", { class: "hint", id: domId("hint", id) }, hintFor(step, perms, model));
    row.append(hint);
    group.append(row, this.bus.slot(`approve:${id}`, approveErr));
    group.append(...batchControls(this.bus, step, calls, perms, (btn) => this.#approve(group, step, btn)));
    group.addEventListener("keydown", (event) => {
      if (isCtrlEnter(event) && event.target.matches("textarea, input")) {
        event.preventDefault();
        if (!approve.disabled) approve.click();
      }
    });
    return group;
  }

  #callEditor(step, call, editable) {
    const key = call.tool_id;
    const rejected = call.decision === "rejected";
    const argsId = domId("args", `${step.id}-${key}`);
    const argsErr = domId("err-args", `${step.id}-${key}`);
    const reasonId = domId("reason", `${step.id}-${key}`);
    const rejectErr = domId("err-reject", `${step.id}-${key}`);
    const args = h("textarea", {
      id: argsId, class: "mono args-field", rows: Math.min(8, prettyJson(call.tool_kwargs).split("\n").length + 1),
      "data-field": `args:${key}`, "aria-describedby": argsErr, spellcheck: "false",
    });
    args.value = args.defaultValue = prettyJson(call.tool_kwargs);
    args.disabled = !editable || rejected;
    args.addEventListener("input", () => {
      this.bus.setError(`edit:${step.id}`, null);
      if (parseArgs(args.value).ok) this.bus.setError(`args:${key}`, null);
    });
    args.addEventListener("blur", () => {
      const parsed = parseArgs(args.value);
      this.bus.setError(`args:${key}`, parsed.ok ? null : parsed.error);
    });
    const card = h(
      "div",
      { class: `tool-card editable status status-${rejected ? "failed" : "pending"}`, id: domId("call", `${step.id}-${key}`), "data-tool-id": key },
      h(
        "div",
        { class: "tool-head" },
        h("span", { class: `status-dot status status-${rejected ? "failed" : "pending"}`, "aria-hidden": "true" }),
        pendingResultName(call) ? h("span", { class: "badge plan-index" }, pendingResultName(call)) : null,
        toolLabel(call.tool_name),
        h("span", { class: "tool-meta" }),
        h("span", { class: `badge decision decision-${call.decision || "pending"}` }, call.decision || "pending"),
      ),
      hiddenNote(call.tool_name, call.tool_kwargs),
      h("label", { for: argsId, class: "field-label" }, `Arguments for ${revealText(call.tool_name)} (JSON)`),
      args,
      this.bus.slot(`args:${key}`, argsErr),
    );
    const planned = plannedAs(call.planned_kwargs);
    if (planned) card.append(planned);
    if (call.arguments_error) card.append(h("p", { class: "tool-reason" }, argumentsProblem(call.arguments_error)));
    if (rejected) {
      card.append(h("p", { class: "tool-reason" }, `Rejected: ${call.reason || "no reason given"}`));
      return card;
    }
    const reason = h("input", { type: "text", id: reasonId, class: "reason-field", "data-field": `reason:${key}`, "aria-describedby": rejectErr, placeholder: "Why not? The model is told." });
    reason.disabled = !editable;
    const reject = button("Reject call", { action: "reject", allowed: editable, describedBy: rejectErr });
    const doReject = () => this.#reject(step, call, reason, reject);
    reject.addEventListener("click", doReject);
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        event.stopPropagation();
        if (!reject.disabled) doReject();
      }
    });
    card.append(
      h("div", { class: "reject-row" }, h("label", { for: reasonId, class: "field-label" }, "Reason to reject"), reason, reject),
      this.bus.slot(`reject:${key}`, rejectErr),
    );
    return card;
  }

  /** The edits in `group` as an edit_input payload, or null (and errors shown) if invalid. */
  #collectEdits(group, step) {
    if (step.kind !== "tool_calls") {
      const field = group.querySelector('[data-field="input"]');
      return field && field.value !== field.defaultValue ? { input: field.value } : {};
    }
    const edits = [];
    let firstBad = null;
    for (const field of group.querySelectorAll('[data-field^="args:"]')) {
      if (field.disabled || field.value === field.defaultValue) continue;
      const toolId = field.dataset.field.slice("args:".length);
      const parsed = parseArgs(field.value);
      if (!parsed.ok) {
        this.bus.setError(`args:${toolId}`, parsed.error);
        firstBad ||= field;
        continue;
      }
      edits.push({ tool_id: toolId, tool_kwargs: parsed.value });
    }
    if (firstBad) {
      firstBad.focus();
      return null;
    }
    return edits.length ? { input: JSON.stringify(edits) } : {};
  }

  async #saveEdits(group, step, btn) {
    const edit = this.#collectEdits(group, step);
    if (edit === null) return false;
    if (edit.input === undefined) return true;
    return this.bus.act(`edit:${step.id}`, "edit_input", { step_id: step.id, input: edit.input }, btn);
  }

  async #approve(group, step, btn) {
    const answer = group.querySelector('[data-field="input"]');
    if (step.kind === "human_input" && answer && !answer.value.trim()) {
      this.bus.setError(`edit:${step.id}`, "Type an answer first: the run waits for it.");
      answer.focus();
      return;
    }
    if (step.status === "pending") {
      const saved = await this.#saveEdits(group, step, btn);
      if (!saved) return;
    }
    await this.bus.act(`approve:${step.id}`, "approve", { step_id: step.id }, btn);
  }

  async #reject(step, call, reasonField, btn) {
    const reason = reasonField.value.trim();
    if (!reason) {
      this.bus.setError(`reject:${call.tool_id}`, "Give a reason: the model is told why the call was rejected.");
      reasonField.focus();
      return;
    }
    await this.bus.act(`reject:${call.tool_id}`, "reject_tool_call", { step_id: step.id, tool_id: call.tool_id, reason }, btn);
  }

  #undoControls(step, perms) {
    const err = domId("err-undo", step.id);
    const undo = button("Undo this step", {
      action: "undo", allowed: perms.canUndo, describedBy: err,
      title: "Discard this step's outputs; it becomes pending again",
    });
    undo.addEventListener("click", () => this.bus.act("undo", "undo", { step_id: step.id }, undo));
    return h("div", { class: "step-controls undo-controls", role: "group", "aria-label": "Undo" }, h("div", { class: "button-row" }, undo), this.bus.slot("undo", err));
  }
}

function hintFor(step, perms, model) {
  if (!perms.connected) return perms.offline;
  if (perms.running && !perms.branches) return "Another step is running.";
  if (!perms.canApprove && step.status === "pending" && model.mode === "auto") return "Runs by itself in auto mode.";
  if (step.status === "failed") return "The step failed; run it again or undo the step before it.";
  if (step.status === "interrupted") {
    if (step.interruptedBy === "cancelled") return "This step was stopped while it ran; run it again.";
    const cutCalls = shownAttempt(step)?.calls.size ? " Its tool calls may have taken effect already: running it again runs them again." : "";
    return `The server stopped while this step ran.${cutCalls} Run it again when ready.`;
  }
  return "Ctrl+Enter approves.";
}

/** Parse tool arguments typed by a person: must be a JSON object. */
export function parseArgs(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, error: `Not valid JSON: ${err.message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, error: "The arguments must be a JSON object, like {\"query\": \"…\"}." };
  }
  return { ok: true, value };
}

/** Remember typed values and focus before a rebuild. */
function saveFields(slot) {
  const fields = new Map();
  for (const el of slot.querySelectorAll("[data-field]")) {
    fields.set(el.dataset.field, { value: el.value, dirty: el.value !== el.defaultValue, base: el.defaultValue });
  }
  const active = document.activeElement;
  let focus = null;
  if (active && slot.contains(active)) {
    focus = {
      field: active.dataset.field || null,
      action: active.dataset.action || null,
      start: active.selectionStart ?? null,
      end: active.selectionEnd ?? null,
    };
  }
  return { fields, focus };
}

function restoreFields(slot, { fields, focus }) {
  for (const el of slot.querySelectorAll("[data-field]")) {
    const old = fields.get(el.dataset.field);
    // Keep what the person typed unless the server now holds exactly that text.
    if (old && old.dirty && !el.disabled && old.value !== el.defaultValue) el.value = old.value;
  }
  if (!focus) return;
  const selector = focus.field ? `[data-field="${CSS.escape(focus.field)}"]` : focus.action ? `[data-action="${focus.action}"]` : null;
  const el = selector ? slot.querySelector(selector) : null;
  if (el && !el.disabled) {
    el.focus();
    if (focus.start != null && "setSelectionRange" in el) {
      try {
        el.setSelectionRange(focus.start, focus.end);
      } catch {
        /* not a text field */
      }
    }
  }
}

/** Why a waiting call would not run as it stands: the model's arguments, or a result it uses that failed. */
function argumentsProblem(error) {
  const unmet = "not run because ";
  if (error.startsWith(unmet)) return `Will not run: ${error.slice(unmet.length)}; edit its arguments to run it anyway.`;
  return `The model's arguments were not valid: ${error}`;
}
