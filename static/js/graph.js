// The step DAG as data: nodes and edges derived from the notebook model (dag.js lays them out).
//
// One node per turn's message, per step, and per tool call inside a step. A call's edges come
// from its `depends_on` plan indexes (LLMCompiler `$N`, Chain-of-Abstraction chains), which may
// be calls of an earlier step of the turn (with approval a plan's calls wait in waves, each
// after the results it uses), and from its step unless they are all in that step; the next step
// hangs off the calls nothing else in its step depends on.
// Handoffs between agents are steps and tool calls too, so they need nothing special here.
// No DOM: dag.js draws the result, and tests can call these functions directly.

import { dependencyName, pendingDependencies, resultName } from "./chain.js";
import { liveSteps, shownAttempt } from "./selectors.js";
import { agentClass, stepAgent } from "./team.js";
import { revealProse, revealText } from "./hidden.js";

export const NODE_SIZE = {
  message: { w: 156, h: 34 },
  step: { w: 156, h: 40 },
  call: { w: 128, h: 36 },
};

/**
 * @typedef {object} GraphNode
 * @property {string} id
 * @property {"message"|"step"|"call"} kind
 * @property {string} label
 * @property {string} sub
 * @property {string|null} status
 * @property {string} target   DOM id of the cell or card to scroll to
 * @property {string} title    full text for the tooltip and screen readers
 * @property {boolean} [waiting]  a step waiting for the person
 */

/**
 * @typedef {object} GraphEdge
 * @property {string} from
 * @property {string} to
 * @property {"turn"|"flow"|"dep"|"handoff"} kind
 * @property {string} [label]  what the edge carries: `$N`, `yK`, or a handoff's reason
 */

/** Nodes and edges for the whole notebook, in a causal (creation) order. */
export function buildGraph(model, { domId }) {
  /** @type {GraphNode[]} */
  const nodes = [];
  /** @type {GraphEdge[]} */
  const edges = [];
  const sinksOf = new Map(); // step id -> node ids the next step's edges start from
  let previousTurnEnd = null;

  for (const turn of model.turns.values()) {
    const messageId = `m:${turn.id}`;
    nodes.push({
      id: messageId,
      kind: "message",
      label: `Message ${turn.index}`,
      sub: revealProse(turn.input), // painted on a canvas: an override would reorder it there too
      status: turn.status === "abandoned" ? "undone" : null,
      target: domId("turn", turn.id),
      title: `Message ${turn.index}: ${revealProse(turn.input)}`,
    });
    if (previousTurnEnd) edges.push({ from: previousTurnEnd, to: messageId, kind: "turn" });
    let lastSinks = [messageId];
    const planned = new Map(); // plan index -> node id of the turn's call computing it
    const steps = liveSteps(model, turn);
    steps.forEach((step, index) => {
      const stepNode = `s:${step.id}`;
      const name = stepAgent(model, step);
      const agent = name && name !== "agent" ? ` · ${name}` : "";
      nodes.push({
        id: stepNode,
        kind: "step",
        agentCls: agentClass(model, name),
        label: `Step ${index + 1}`,
        sub: `${kindLabel(step.kind)}${agent}`,
        status: step.status,
        waiting: step.waiting && step.status === "pending",
        target: domId("step", step.id),
        title: `Step ${index + 1} (${kindLabel(step.kind)}${agent}): ${step.status}`,
      });
      const parents = step.prevSteps.filter((id) => sinksOf.has(id));
      if (parents.length) {
        for (const parent of parents) for (const from of sinksOf.get(parent)) edges.push(intoStep(model, parent, from, stepNode));
      } else {
        for (const from of lastSinks) edges.push({ from, to: stepNode, kind: "flow" });
      }
      const calls = callsOf(step);
      const byPlanIndex = new Map();
      for (const call of calls) if (call.planIndex != null) byPlanIndex.set(call.planIndex, call);
      const dependedOn = new Set();
      for (const call of calls) {
        const callNode = `c:${step.id}:${call.id}`;
        const deps = call.dependsOn.filter((i) => byPlanIndex.has(i) || planned.has(i));
        nodes.push({
          id: callNode,
          kind: "call",
          label: revealText(call.name),
          sub: resultName(call) || "",
          status: call.status,
          target: domId("call", `${step.id}-${call.id}`),
          title: `${resultName(call) ? `${resultName(call)} ` : ""}${revealText(call.name)}${deps.length ? ` after ${call.dependsOn.map((d) => dependencyName(call, d)).join(", ")}` : ""}: ${call.status}`,
        });
        // Each edge carries the name the call uses for that result: `$N` or `yK`.
        for (const index of new Set(deps)) {
          const dep = byPlanIndex.get(index);
          if (dep) dependedOn.add(dep.id);
          const from = dep ? `c:${step.id}:${dep.id}` : planned.get(index);
          edges.push({ from, to: callNode, kind: "dep", label: dependencyName(call, index) });
        }
        if (!deps.some((i) => byPlanIndex.has(i))) edges.push({ from: stepNode, to: callNode, kind: "flow" });
      }
      for (const call of calls) if (call.planIndex != null) planned.set(call.planIndex, `c:${step.id}:${call.id}`);
      const sinks = calls.filter((c) => !dependedOn.has(c.id)).map((c) => `c:${step.id}:${c.id}`);
      lastSinks = sinks.length ? sinks : [stepNode];
      sinksOf.set(step.id, lastSinks);
    });
    previousTurnEnd = lastSinks[lastSinks.length - 1];
    if (steps.length) previousTurnEnd = `s:${steps[steps.length - 1].id}`;
  }
  return { nodes, edges };
}

function kindLabel(kind) {
  return kind === "tool_calls" ? "tool calls" : kind === "human_input" ? "question" : kind;
}

/** The edge from a parent step's sink into the next step; out of a handoff call, labelled with its reason. */
function intoStep(model, parentId, from, to) {
  const handoff = shownAttempt(model.steps.get(parentId))?.handoff;
  const callId = from.split(":")[2];
  const call = callId ? shownAttempt(model.steps.get(parentId))?.calls.get(callId) : null;
  if (handoff && (!callId || call?.name === "handoff")) {
    return { from, to, kind: "handoff", label: `→ ${handoff.to}: ${handoff.reason}`, agentCls: agentClass(model, handoff.to) };
  }
  return { from, to, kind: "flow" };
}

/** A waiting plan call's place in the DAG, so its edges show before it runs: as the engine says
 * (`plan_index`, `depends_on`), else, for a chain's placeholder stored before the engine said,
 * read from its result name and its `yK` arguments. */
function pendingPlace(c) {
  if (c.plan_index != null) return { planIndex: c.plan_index, dependsOn: c.depends_on || [] };
  if (!c.output_name) return { planIndex: null, dependsOn: [] };
  return { planIndex: Number(c.output_name.slice(1)), dependsOn: pendingDependencies(c.planned_kwargs || c.tool_kwargs) };
}

/** The calls drawn for a step: those that ran (or are running), else those awaiting approval. */
function callsOf(step) {
  const attempt = shownAttempt(step);
  if (attempt && attempt.calls.size) return [...attempt.calls.values()];
  if (step.pendingCalls && step.status !== "completed") {
    return step.pendingCalls.map((c, i) => ({
      id: c.tool_id,
      name: c.tool_name,
      ...pendingPlace(c),
      outputName: c.output_name ?? null,
      status: c.decision === "rejected" ? "rejected" : "pending", // a person's decision, as on the card
      index: i,
    }));
  }
  return [];
}
