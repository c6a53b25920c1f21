// Names of calls' results, and Chain-of-Abstraction reasoning drawn with chips.
//
// An LLMCompiler call's result is `$N`; a Chain-of-Abstraction placeholder's is `yN` (its
// `output_name`). The reasoning step's text shows each `[FUNC name(args) = yN]` as a chip that
// says `yN`, then fills in with the value once the call that computes it finishes.

import { h } from "./dom.js";
import { proseNodes, revealJson, revealText } from "./hidden.js";
import { formatNumber, numberIn } from "./format.js";
import { liveSteps, shownAttempt } from "./selectors.js";

const PLACEHOLDER = /\[\s*FUNC\s+([A-Za-z_][\w.]*)\s*\(([\s\S]*?)\)\s*=\s*["']?(y\d+)["']?\s*\]/g;

/** How a call's result is referred to: `y2`, `$2`, or null when nothing refers to it. */
export function resultName(call) {
  if (call.outputName) return call.outputName;
  return call.planIndex != null ? `$${call.planIndex}` : null;
}

/** How a waiting call's result will be referred to (a PendingToolCall as stored, snake_case):
 * `y2`, `$2`, or null for a call no plan numbers. */
export function pendingResultName(call) {
  if (call.output_name) return call.output_name;
  return call.plan_index != null ? `$${call.plan_index}` : null;
}

/** How `call` names the result `index` it depends on. */
export function dependencyName(call, index) {
  return call.outputName ? `y${index}` : `$${index}`;
}

/** For a plan's call shown with the earlier results it uses (what runs): how it was planned,
 * with its references ("$1", "y1"), as text; null for a call planned with its values.
 * `planned` is the call's `planned_kwargs` (the inbox's `planned_arguments`). */
export function plannedAs(planned) {
  if (!planned) return null;
  return h("p", { class: "tool-planned" }, "Planned as ", h("code", {}, revealJson(JSON.stringify(planned))));
}

/** The results a pending placeholder call uses: every argument that is exactly `yK`, as K. */
export function pendingDependencies(kwargs) {
  const found = new Set();
  const visit = (value) => {
    if (typeof value === "string") {
      const m = /^\s*y(\d+)\s*$/.exec(value);
      if (m) found.add(Number(m[1]));
    } else if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === "object") Object.values(value).forEach(visit);
  };
  visit(kwargs);
  return [...found];
}

/** The calls of a turn by the name of their result (the first that names it). */
export function chainCalls(model, turn) {
  const byName = new Map();
  if (!turn) return byName;
  for (const step of liveSteps(model, turn)) {
    const attempt = shownAttempt(step);
    if (!attempt) continue;
    for (const call of attempt.calls.values()) if (call.outputName && !byName.has(call.outputName)) byName.set(call.outputName, call);
  }
  return byName;
}

/** Whether a step ran calls that a chain's chips show (so the turn's reasoning must redraw). */
export function namesResults(step) {
  const attempt = shownAttempt(step);
  if (!attempt) return false;
  for (const call of attempt.calls.values()) if (call.outputName) return true;
  return false;
}

export function hasPlaceholders(text) {
  return text.search(PLACEHOLDER) >= 0; // search, unlike test, leaves the global regex's lastIndex alone
}

function chipState(call) {
  if (!call) return "pending";
  if (call.status === "running" || call.output == null) return "running";
  if (call.status === "rejected") return "rejected"; // the reducer's own state for a person's rejection
  if (!call.isError) return "done";
  return /^rejected by user/.test(call.output) ? "rejected" : "failed";
}

const CHIP_VALUE = { pending: null, running: "…", rejected: "rejected", failed: "error" };

function chip(source, name, args, output, call, showCall) {
  const state = chipState(call);
  // a number rounded for reading; the exact value is in the chip's tooltip
  const done = numberIn(call?.output) != null ? formatNumber(numberIn(call.output)) : call?.output;
  const value = state === "done" ? done : CHIP_VALUE[state] ?? `${name}(…)`;
  const title = call?.output != null ? `${source}\n= ${call.output}` : source;
  return h(
    "span",
    { class: `chain-chip chip-${state}`, "data-output": output, "data-state": state, title },
    h("span", { class: "chip-name" }, output),
    // what computes it, where no call card sits beside the text (the compare view)
    showCall ? h("span", { class: "chip-call" }, revealText(`${name}(${args.trim()})`)) : null,
    h("span", { class: "chip-value" }, value),
  );
}

/** A signature of what the chips of `text` would show, so unchanged text is not redrawn. */
export function chainSignature(text, calls) {
  let sig = text;
  for (const [name, call] of calls) sig += `|${name}:${chipState(call)}:${call.output ?? ""}`;
  return sig;
}

/** Fill `el` with `text`, each placeholder a chip showing its call's state or value; with
 * `showCall`, also the call itself (its tool and arguments). */
export function renderChain(el, text, calls, { showCall = false } = {}) {
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    if (match.index > last) parts.push(...proseNodes(text.slice(last, match.index)));
    parts.push(chip(match[0], match[1], match[2], match[3], calls.get(match[3]), showCall));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(...proseNodes(text.slice(last)));
  el.replaceChildren(...parts);
}
