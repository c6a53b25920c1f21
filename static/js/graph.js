// The step DAG as data: nodes and edges derived from the notebook model, and a layered layout.
//
// One node per turn's message, per step, and per tool call inside a step. A call's edges come
// from its `depends_on` plan indexes (LLMCompiler `$N`, Chain-of-Abstraction chains) or, with
// none, from its step; the next step hangs off the calls nothing else in its step depends on.
// Handoffs between agents are steps and tool calls too, so they need nothing special here.
// No DOM: dag.js draws the result, and tests can call these functions directly.

import { dependencyName, pendingDependencies, resultName } from "./chain.js";
import { liveSteps, shownAttempt } from "./selectors.js";
import { agentClass, stepAgent } from "./team.js";

export const NODE_SIZE = {
  message: { w: 148, h: 30 },
  step: { w: 148, h: 38 },
  call: { w: 118, h: 32 },
};
const GAP_X = 14;
const GAP_Y = 30;
const PAD = 12;

/**
 * @typedef {object} GraphNode
 * @property {string} id
 * @property {"message"|"step"|"call"} kind
 * @property {string} label
 * @property {string} sub
 * @property {string|null} status
 * @property {string} target   DOM id of the cell or card to scroll to
 * @property {string} title    full text for the tooltip and screen readers
 */

/** Nodes and edges for the whole notebook, in a causal (creation) order. */
export function buildGraph(model, { domId }) {
  /** @type {GraphNode[]} */
  const nodes = [];
  /** @type {{from: string, to: string, kind: string}[]} */
  const edges = [];
  const sinksOf = new Map(); // step id -> node ids the next step's edges start from
  let previousTurnEnd = null;

  for (const turn of model.turns.values()) {
    const messageId = `m:${turn.id}`;
    nodes.push({
      id: messageId,
      kind: "message",
      label: `Message ${turn.index}`,
      sub: turn.input,
      status: turn.status === "abandoned" ? "undone" : null,
      target: domId("turn", turn.id),
      title: `Message ${turn.index}: ${turn.input}`,
    });
    if (previousTurnEnd) edges.push({ from: previousTurnEnd, to: messageId, kind: "turn" });
    let lastSinks = [messageId];
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
        const deps = call.dependsOn.map((i) => byPlanIndex.get(i)).filter(Boolean);
        nodes.push({
          id: callNode,
          kind: "call",
          label: call.name,
          sub: resultName(call) || "",
          status: call.status,
          target: domId("call", `${step.id}-${call.id}`),
          title: `${resultName(call) ? `${resultName(call)} ` : ""}${call.name}${deps.length ? ` after ${call.dependsOn.map((d) => dependencyName(call, d)).join(", ")}` : ""}: ${call.status}`,
        });
        if (deps.length) {
          for (const dep of deps) {
            dependedOn.add(dep.id);
            edges.push({ from: `c:${step.id}:${dep.id}`, to: callNode, kind: "dep" });
          }
        } else {
          edges.push({ from: stepNode, to: callNode, kind: "flow" });
        }
      }
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

/** The calls drawn for a step: those that ran (or are running), else those awaiting approval. */
function callsOf(step) {
  const attempt = shownAttempt(step);
  if (attempt && attempt.calls.size) return [...attempt.calls.values()];
  if (step.pendingCalls && step.status !== "completed") {
    return step.pendingCalls.map((c, i) => ({
      id: c.tool_id,
      name: c.tool_name,
      // a chain's placeholders wait with their result names, so their edges show before they run
      planIndex: c.output_name ? Number(c.output_name.slice(1)) : null,
      outputName: c.output_name ?? null,
      dependsOn: c.output_name ? pendingDependencies(c.tool_kwargs) : [],
      status: c.decision === "rejected" ? "failed" : "pending",
      index: i,
    }));
  }
  return [];
}

/**
 * Layered layout: each node sits one layer below its deepest parent (longest path), and nodes
 * in a layer are ordered by their parents' positions, so parallel calls sit side by side.
 * Returns positions (top-left corner), the canvas size and edge paths.
 */
export function layoutGraph(graph) {
  const { nodes, edges } = graph;
  const index = new Map(nodes.map((n, i) => [n.id, i]));
  const parents = nodes.map(() => []);
  const children = nodes.map(() => []);
  for (const edge of edges) {
    const a = index.get(edge.from);
    const b = index.get(edge.to);
    if (a == null || b == null || a === b) continue;
    parents[b].push(a);
    children[a].push(b);
  }
  // Kahn's algorithm gives a topological order even if events arrive out of causal order.
  const indegree = parents.map((p) => p.length);
  const queue = [];
  for (let i = 0; i < nodes.length; i++) if (indegree[i] === 0) queue.push(i);
  const layer = new Array(nodes.length).fill(0);
  const seen = new Array(nodes.length).fill(false);
  for (let head = 0; head < queue.length; head++) {
    const i = queue[head];
    seen[i] = true;
    for (const c of children[i]) {
      layer[c] = Math.max(layer[c], layer[i] + 1);
      if (--indegree[c] === 0) queue.push(c);
    }
  }
  for (let i = 0; i < nodes.length; i++) if (!seen[i]) layer[i] = i === 0 ? 0 : layer[i - 1] + 1; // cycle guard

  const layers = [];
  for (let i = 0; i < nodes.length; i++) (layers[layer[i]] ||= []).push(i);

  const x = new Array(nodes.length).fill(0);
  const y = new Array(nodes.length).fill(0);
  const centre = new Array(nodes.length).fill(0);
  let top = PAD;
  let minX = Infinity;
  let maxX = -Infinity;
  for (const row of layers) {
    if (!row) continue;
    // Barycentre of the parents' centres; creation order breaks ties (stable sort).
    const weight = new Map(
      row.map((i) => [i, parents[i].length ? parents[i].reduce((s, p) => s + centre[p], 0) / parents[i].length : 0]),
    );
    row.sort((a, b) => weight.get(a) - weight.get(b) || a - b);
    const widths = row.map((i) => NODE_SIZE[nodes[i].kind].w);
    const total = widths.reduce((s, w) => s + w, 0) + GAP_X * (row.length - 1);
    // Centre the row under its parents' mean, so a chain stays straight.
    const anchor = row.reduce((s, i) => s + weight.get(i), 0) / row.length;
    let left = anchor - total / 2;
    let height = 0;
    row.forEach((i, k) => {
      x[i] = left;
      y[i] = top;
      centre[i] = left + widths[k] / 2;
      left += widths[k] + GAP_X;
      height = Math.max(height, NODE_SIZE[nodes[i].kind].h);
    });
    minX = Math.min(minX, x[row[0]]);
    maxX = Math.max(maxX, left - GAP_X);
    top += height + GAP_Y;
  }
  if (!nodes.length) {
    minX = 0;
    maxX = 0;
  }
  const shift = PAD - minX;
  const positions = new Map();
  nodes.forEach((node, i) => {
    const size = NODE_SIZE[node.kind];
    positions.set(node.id, { x: x[i] + shift, y: y[i], w: size.w, h: size.h, layer: layer[i] });
  });
  const paths = [];
  for (const edge of edges) {
    const a = positions.get(edge.from);
    const b = positions.get(edge.to);
    if (!a || !b) continue;
    const x1 = a.x + a.w / 2;
    const y1 = a.y + a.h;
    const x2 = b.x + b.w / 2;
    const y2 = b.y;
    const bend = Math.max(12, (y2 - y1) / 2);
    paths.push({
      ...edge,
      mx: (x1 + x2) / 2,
      my: (y1 + y2) / 2,
      id: `${edge.from}>${edge.to}`,
      d: `M${x1.toFixed(1)},${y1.toFixed(1)} C${x1.toFixed(1)},${(y1 + bend).toFixed(1)} ${x2.toFixed(1)},${(y2 - bend).toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}`,
    });
  }
  return {
    positions,
    paths,
    width: Math.max(0, maxX - minX) + PAD * 2,
    height: Math.max(top - GAP_Y + PAD, PAD * 2),
    layers: layers.length,
  };
}
