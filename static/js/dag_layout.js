// A fast layered layout for large step graphs, where dagre's crossing minimisation takes
// seconds (a 500-step trace has ~1,500 nodes): each node sits one layer below its deepest parent
// (longest path) and the nodes of a layer are ordered by their parents' positions, so parallel
// calls sit side by side and a chain stays straight. Linear in nodes and edges; no DOM.

import { NODE_SIZE } from "./graph.js";

const GAP_X = 16;
const GAP_Y = 42;

/**
 * Node centres for `graph` ({nodes, edges} from buildGraph, edges as {from, to}).
 * @returns {Map<string, {x: number, y: number}>}
 */
export function layeredPositions(graph) {
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
  let top = 0;
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
    top += height + GAP_Y;
  }
  const positions = new Map();
  nodes.forEach((node, i) => {
    const size = NODE_SIZE[node.kind];
    positions.set(node.id, { x: x[i] + size.w / 2, y: y[i] + size.h / 2 });
  });
  return positions;
}
