// Multi-agent (team) notebooks: a colour per agent, who is in charge, the shared state, handoffs
// and questions to the person, all derived from the model (store.js) so an undo is reflected.

import { h, prettyJson } from "./dom.js";
import { revealText } from "./hidden.js";
import { liveSteps, shownAttempt } from "./selectors.js";

const PALETTE_SIZE = 6;

function completedAttempt(step) {
  const attempt = shownAttempt(step);
  return attempt && attempt.status === "completed" ? attempt : null;
}

const agentCache = new WeakMap(); // model -> {seq, size, names}: one scan per stored event, not per call

/** The agents in order of first appearance (their colours follow this order). */
export function agentsOf(model) {
  const cached = agentCache.get(model);
  if (cached && cached.seq === model.lastSeq && cached.size === model.steps.size) return cached.names;
  const names = [];
  const add = (name) => name && name !== "agent" && !names.includes(name) && names.push(name);
  for (const step of model.steps.values()) {
    add(step.agent);
    add(shownAttempt(step)?.handoff?.to); // coloured from the handoff on, before it runs
  }
  agentCache.set(model, { seq: model.lastSeq, size: model.steps.size, names });
  return names;
}

/** CSS class giving `name` its colour, the same in cells, DAG and header. */
export function agentClass(model, name) {
  const index = agentsOf(model).indexOf(name);
  return index < 0 ? "" : `agent-color-${(index % PALETTE_SIZE) + 1}`;
}

/** The agent a step is (or will be) run by: its own, or for one not run yet, whoever its parent handed to. */
export function stepAgent(model, step) {
  if (step.agent) return step.agent;
  const parent = model.steps.get(step.prevSteps[0]);
  if (!parent) return null;
  const attempt = shownAttempt(parent);
  return attempt?.status === "completed" && attempt.handoff ? attempt.handoff.to : parent.agent;
}

/** The agent in charge now, and the shared state: from the last completed steps, in order. */
export function teamStatus(model) {
  let agent = null;
  let state = null;
  for (const turn of model.turns.values()) {
    if (turn.status === "abandoned") continue;
    for (const step of liveSteps(model, turn)) {
      if (step.status === "undone") continue; // kept on the page as history; an undo dropped it
      const attempt = completedAttempt(step);
      if (step.agent && step.agent !== "agent") agent = step.agent;
      if (!attempt) continue;
      if (attempt.handoff) agent = attempt.handoff.to;
      if (attempt.state) state = attempt.state.state;
    }
  }
  return { agent, state };
}

/** The question a `human_input` step waits on (matched through its waiting calls). */
export function questionFor(model, step) {
  for (const call of step.pendingCalls || []) {
    const question = model.questions.get(call.tool_id);
    if (question) return question;
  }
  return null;
}

/** What a step's cell shows of the team: questions asked, state changes, the handoff. */
export function teamExtras(model, step, attempt) {
  const parts = [];
  if (step.kind === "human_input") {
    const question = questionFor(model, step);
    parts.push(
      h(
        "div",
        { class: "team-question", role: "note" },
        h("span", { class: "field-label" }, question ? `${question.agent} asks you` : "A tool asks you"),
        h("p", { class: "question-text" }, question?.prefix ? revealText(question.prefix) : "(the question was not recorded)"),
        question?.answer != null && step.status === "completed" ? h("p", { class: "question-answer" }, `You answered: ${question.answer}`) : null,
      ),
    );
  }
  if (!attempt) return parts;
  if (attempt.state) {
    const rows = Object.entries(attempt.state.changes).map(([key, change]) =>
      h("li", {}, h("code", {}, key), ": ", h("span", { class: "state-before" }, shortJson(change.before)), " → ", h("span", { class: "state-after" }, shortJson(change.after))),
    );
    parts.push(h("div", { class: "state-changes" }, h("span", { class: "field-label" }, "Shared state changed"), h("ul", {}, rows)));
  }
  if (attempt.handoff) {
    const { from, to, reason } = attempt.handoff;
    parts.push(
      h(
        "p",
        { class: "handoff-note" },
        h("span", { class: `agent-chip ${agentClass(model, from)}` }, from),
        " hands off to ",
        h("span", { class: `agent-chip ${agentClass(model, to)}` }, to),
        reason ? `: ${reason}` : "",
      ),
    );
  }
  return parts;
}

function shortJson(value) {
  if (value === null || value === undefined || value === "") return "—";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 159)}…` : text;
}

/** The header's "current agent" and shared-state panel; hidden until a team is seen. */
export class TeamHeader {
  /** @param {HTMLElement} root  holds [data-current-agent] and [data-shared-state] */
  constructor(root) {
    this.root = root;
    this.agentEl = root.querySelector("[data-current-agent]");
    this.stateEl = root.querySelector("[data-shared-state]");
    this.sig = null;
  }

  update(model) {
    const { agent, state } = teamStatus(model);
    const sig = JSON.stringify([agent, state, agentClass(model, agent)]);
    if (sig === this.sig) return;
    this.sig = sig;
    this.root.hidden = !agent; // single-agent workers name no agent
    this.agentEl.textContent = agent || "";
    this.agentEl.className = `agent-chip ${agentClass(model, agent)}`;
    this.stateEl.textContent = state ? prettyJson(state) : "{}";
  }
}
