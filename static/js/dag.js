// Draws the step DAG (graph.js) as SVG and keeps it in step with the model.
//
// The whole graph is laid out, but only the nodes and edges near the visible part of the
// scrolling panel are in the DOM (re-windowed on scroll, once per frame): a 500-step trace
// costs what its first screen costs. Elements are keyed, so an update moves, recolours or adds
// them instead of redrawing, and focus survives. One node at a time is in the tab order (roving
// tabindex); arrow keys move along the graph, Enter or a click scrolls to the node's cell.

import { buildGraph, layoutGraph } from "./graph.js";
import { domId, svg, truncate } from "./dom.js";

const MARGIN_PX = 600; // drawn above and below the visible part, so scrolling shows no gaps
const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };
const esc = (text) => String(text).replace(/[&<>"]/g, (c) => ESCAPES[c]);

/** What a node shows, shared by the markup that creates it and the patch that updates it. */
function nodeView(node, pos, selected) {
  const sub = truncate(node.sub || "", node.kind === "call" ? 14 : 20);
  return {
    transform: `translate(${pos.x.toFixed(1)},${pos.y.toFixed(1)})`,
    cls: `dag-node kind-${node.kind} status status-${node.status || "none"}${node.agentCls ? ` ${node.agentCls}` : ""}${selected ? " is-selected" : ""}`,
    label: truncate(node.label, node.kind === "call" ? 13 : 17),
    sub,
    labelY: sub ? pos.h / 2 - 3 : pos.h / 2 + 4,
  };
}

/** A node as SVG markup; children in the order #patchNode expects: title, box, dot, label, sub. */
function nodeMarkup(node, pos, selected) {
  const v = nodeView(node, pos, selected);
  return (
    `<g class="${v.cls}" transform="${v.transform}" role="button" tabindex="-1" data-node="${esc(node.id)}" ` +
    `data-target="${esc(node.target)}" aria-label="${esc(node.title)}"><title>${esc(node.title)}</title>` +
    `<rect class="dag-box" rx="${node.kind === "call" ? 15 : 7}" width="${pos.w}" height="${pos.h}"></rect>` +
    `<circle class="dag-dot" r="3.5" cx="11" cy="${pos.h / 2}"></circle>` +
    `<text class="dag-label" x="20" y="${v.labelY}">${esc(v.label)}</text>` +
    `<text class="dag-sub" x="20" y="${pos.h / 2 + 10}">${esc(v.sub)}</text></g>`
  );
}

function edgeMarkup(path) {
  const line = `<path class="dag-edge dag-edge-${path.kind}" marker-end="url(#dag-arrow)" d="${path.d}"></path>`;
  if (!path.label) return line;
  // A labelled edge (a handoff and its reason) is a group; data-d tells a patch whether it moved.
  return (
    `<g class="dag-labelled ${path.agentCls || ""}" data-d="${esc(path.d)}">${line}` +
    `<text class="dag-edge-label" x="${path.mx.toFixed(1)}" y="${(path.my + 3).toFixed(1)}">` +
    `<title>${esc(path.label)}</title>${esc(truncate(path.label, 46))}</text></g>`
  );
}

/** Parse `markup` (one string per item) into `layer` at once; `register` each new element. */
function appendMarkup(layer, markup, items, register) {
  if (!items.length) return;
  const before = layer.children.length;
  layer.insertAdjacentHTML("beforeend", markup.join(""));
  const children = layer.children;
  items.forEach((item, i) => register(item, children[before + i]));
}

export class DagView {
  /**
   * @param {HTMLElement} container  an element to hold the SVG (it scrolls)
   * @param {{onSelect: (target: string, nodeId: string) => void}} options
   */
  constructor(container, { onSelect }) {
    this.container = container;
    this.onSelect = onSelect;
    this.svg = svg("svg", { class: "dag-svg", role: "group", "aria-label": "Step graph" });
    const defs = svg("defs");
    const marker = svg("marker", {
      id: "dag-arrow", viewBox: "0 0 8 8", refX: "7", refY: "4", markerWidth: "7", markerHeight: "7", orient: "auto",
    });
    marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "dag-arrow" }));
    defs.append(marker);
    this.edgeLayer = svg("g", { class: "dag-edges" });
    this.nodeLayer = svg("g", { class: "dag-nodes" });
    this.svg.append(defs, this.edgeLayer, this.nodeLayer);
    container.append(this.svg);
    /** @type {Map<string, SVGGElement>} drawn nodes */
    this.nodeEls = new Map();
    /** @type {Map<string, SVGPathElement>} drawn edges */
    this.edgeEls = new Map();
    this.graph = { nodes: [], edges: [] };
    this.layout = null;
    this.byId = new Map();
    this.order = [];
    this.focusId = null;
    this.selectedId = null;
    this.frame = 0;
    this.svg.addEventListener("click", (e) => this.#activate(e));
    this.svg.addEventListener("keydown", (e) => this.#key(e));
    container.addEventListener("scroll", () => {
      if (!this.frame) this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.#drawWindow();
      });
    }, { passive: true });
  }

  /** Lay the graph out again from the model and redraw what is in view; returns the node count. */
  update(model) {
    const stickToBottom = this.#nearBottom();
    const before = this.graph.nodes.length;
    this.graph = buildGraph(model, { domId });
    this.layout = layoutGraph(this.graph);
    this.byId = new Map(this.graph.nodes.map((n) => [n.id, n]));
    this.order = this.graph.nodes.map((n) => n.id);
    const width = Math.ceil(this.layout.width);
    const height = Math.ceil(this.layout.height);
    this.svg.setAttribute("width", String(width));
    this.svg.setAttribute("height", String(height));
    this.svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    if (this.graph.nodes.length > before && stickToBottom && before > 0) this.container.scrollTop = this.container.scrollHeight;
    this.#drawWindow();
    if (!this.focusId || !this.byId.has(this.focusId)) this.#setRoving(this.order[0] || null);
    return this.graph.nodes.length;
  }

  /** How many nodes the graph has (drawn or not). */
  get count() {
    return this.graph.nodes.length;
  }

  /** Mark the node whose cell is being looked at. */
  select(nodeId) {
    if (this.selectedId) this.nodeEls.get(this.selectedId)?.classList.remove("is-selected");
    this.selectedId = nodeId;
    if (nodeId) this.nodeEls.get(nodeId)?.classList.add("is-selected");
  }

  /** Scroll the panel so `nodeId` is in view, draw it, and return its element. */
  reveal(nodeId) {
    const pos = this.layout?.positions.get(nodeId);
    if (!pos) return null;
    const c = this.container;
    if (pos.y < c.scrollTop || pos.y + pos.h > c.scrollTop + c.clientHeight) {
      c.scrollTop = pos.y + pos.h / 2 - c.clientHeight / 2;
    }
    this.#drawWindow();
    return this.nodeEls.get(nodeId) || null;
  }

  /** Draw the nodes and edges within the visible band (plus a margin); drop the others. */
  #drawWindow() {
    if (!this.layout) return;
    const top = this.container.scrollTop - MARGIN_PX;
    const bottom = this.container.scrollTop + Math.max(this.container.clientHeight, 400) + MARGIN_PX;
    const { positions, paths } = this.layout;
    const keep = new Set([this.focusId, this.selectedId]); // focus must not vanish on scroll

    const wantedNodes = [];
    for (const node of this.graph.nodes) {
      const pos = positions.get(node.id);
      if ((pos.y + pos.h >= top && pos.y <= bottom) || keep.has(node.id)) wantedNodes.push(node);
    }
    const wantedNodeIds = new Set(wantedNodes.map((n) => n.id));
    for (const [id, el] of this.nodeEls) {
      if (!wantedNodeIds.has(id)) {
        el.remove();
        this.nodeEls.delete(id);
      }
    }
    const newNodes = [];
    for (const node of wantedNodes) {
      const el = this.nodeEls.get(node.id);
      if (el) this.#patchNode(el, node, positions.get(node.id));
      else newNodes.push(node);
    }
    const markup = newNodes.map((node) => nodeMarkup(node, positions.get(node.id), node.id === this.selectedId));
    appendMarkup(this.nodeLayer, markup, newNodes, (node, el) => this.nodeEls.set(node.id, el));
    for (const node of newNodes) {
      if (node.id === this.focusId) this.nodeEls.get(node.id).setAttribute("tabindex", "0");
    }

    const wantedEdges = new Map();
    for (const path of paths) {
      const a = positions.get(path.from);
      const b = positions.get(path.to);
      if (a.y <= bottom && b.y + b.h >= top) wantedEdges.set(path.id, path);
    }
    for (const [id, el] of this.edgeEls) {
      if (!wantedEdges.has(id)) {
        el.remove();
        this.edgeEls.delete(id);
      }
    }
    const newEdges = [];
    for (const path of wantedEdges.values()) {
      const el = this.edgeEls.get(path.id);
      if (!el) newEdges.push(path);
      else if (el.dataset.d !== undefined && el.dataset.d !== path.d) {
        el.remove(); // a labelled edge that moved: its label moves with it
        newEdges.push(path);
      } else if (el.dataset.d === undefined && el.getAttribute("d") !== path.d) el.setAttribute("d", path.d);
    }
    // New elements go in as one batch of markup: one parse for a replay or a long trace.
    appendMarkup(this.edgeLayer, newEdges.map(edgeMarkup), newEdges, (path, el) => this.edgeEls.set(path.id, el));
  }

  #patchNode(el, node, pos) {
    const view = nodeView(node, pos, node.id === this.selectedId);
    if (el.getAttribute("transform") !== view.transform) el.setAttribute("transform", view.transform);
    if (el.getAttribute("class") !== view.cls) el.setAttribute("class", view.cls);
    const [title, , , label, sub] = el.children;
    if (label.textContent !== view.label) label.textContent = view.label;
    if (sub.textContent !== view.sub) {
      sub.textContent = view.sub;
      label.setAttribute("y", String(view.labelY));
    }
    if (title.textContent !== node.title) {
      title.textContent = node.title;
      el.setAttribute("aria-label", node.title);
    }
    el.dataset.target = node.target;
  }

  #setRoving(id) {
    if (this.focusId) this.nodeEls.get(this.focusId)?.setAttribute("tabindex", "-1");
    this.focusId = id;
    if (id) this.nodeEls.get(id)?.setAttribute("tabindex", "0");
  }

  #activate(event) {
    const g = event.target.closest?.(".dag-node");
    if (!g) return;
    this.#setRoving(g.dataset.node);
    this.select(g.dataset.node);
    this.onSelect(g.dataset.target, g.dataset.node);
  }

  #key(event) {
    const g = event.target.closest?.(".dag-node");
    if (!g) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      this.#activate(event);
      return;
    }
    const at = this.order.indexOf(g.dataset.node);
    let next = null;
    if (event.key === "ArrowDown" || event.key === "ArrowRight") next = this.order[Math.min(at + 1, this.order.length - 1)];
    else if (event.key === "ArrowUp" || event.key === "ArrowLeft") next = this.order[Math.max(at - 1, 0)];
    else if (event.key === "Home") next = this.order[0];
    else if (event.key === "End") next = this.order[this.order.length - 1];
    if (next) {
      event.preventDefault();
      this.#setRoving(next);
      this.reveal(next)?.focus();
    }
  }

  #nearBottom() {
    const c = this.container;
    return c.scrollHeight - c.scrollTop - c.clientHeight < 80;
  }
}
