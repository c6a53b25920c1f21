// Draws the step DAG (graph.js) with Cytoscape.js and a dagre layout, and keeps it in step with
// the model.
//
// Cytoscape draws on a canvas: every label (tool names, `$N`, a handoff's reason: model-written
// text) is painted as text and never parsed as HTML. An update diffs the graph against what is
// drawn: new nodes and edges are added, changed ones restyled, and the layout runs again only
// when the shape changed (streamed tokens never reach here). The view pans and zooms; it frames
// the whole graph on open and on every new node until the person moves it (a graph too big to
// read whole: the running or waiting step, at a readable zoom), and Fit has it follow again.
// A click (or Enter on the focused graph) scrolls to the node's cell.

import cytoscape from "../vendor/cytoscape/cytoscape.esm.min.mjs";
import dagre from "../vendor/cytoscape-dagre/cytoscape-dagre.min.mjs";
import { DagOverview } from "./dag_overview.js";
import { dagStylesheet, readPalette } from "./dag_style.js";
import { layeredPositions } from "./dag_layout.js";
import { buildGraph, NODE_SIZE } from "./graph.js";
import { domId, truncate } from "./dom.js";

cytoscape.use(dagre);

const READABLE_ZOOM = 0.75; // the zoom of the view that frames the active part of a big graph
// The whole graph is framed down to this zoom (a five-node fan-out or a chain of abstraction in
// the narrow panel of a 1280 px window needs ~0.5): a graph that fits below it is too big to
// read whole, and the view frames the active part at READABLE_ZOOM, the overview showing the rest.
const MIN_FIT_ZOOM = 0.45;
const MAX_FIT_ZOOM = 1.2;
const PAD = 16;
const ZOOM_STEP = 1.25;
const OVERVIEW_ROOM = 136; // px the overview (7.5rem, in the bottom corner) takes from the view
const LAYOUT = {
  name: "dagre", rankDir: "TB", nodeSep: 16, rankSep: 42, edgeSep: 8, animate: false, fit: false,
  sort: (a, b) => a.data("order") - b.data("order"),
  minLen: (edge) => (edge.data("kind") === "handoff" ? 2 : 1), // room for the reason between the ranks
};
const DAGRE_MAX_NODES = 300; // above this dagre takes seconds: the linear layered layout instead
const CHARS = { message: [20, 19], step: [20, 22], call: [16, 16] }; // label, sub line lengths

/** The data Cytoscape keeps for a node (what the canvas paints and the tooltip says). */
function nodeData(node, order) {
  const size = NODE_SIZE[node.kind];
  const [labelChars, subChars] = CHARS[node.kind];
  const label = truncate(node.label, labelChars);
  return {
    id: node.id,
    order,
    kind: node.kind,
    w: size.w,
    h: size.h,
    textWidth: size.w - 12,
    display: node.sub ? `${label}\n${truncate(node.sub, subChars)}` : label,
    label: node.label,
    sub: node.sub || "",
    status: node.status || "none",
    title: node.title,
    target: node.target,
  };
}

function nodeClasses(node, selectedId) {
  return [
    `kind-${node.kind}`,
    `status-${node.status || "none"}`,
    node.agentCls,
    node.status === "running" ? "is-current" : "",
    node.waiting ? "is-waiting" : "",
    node.id === selectedId ? "is-selected" : "",
  ].filter(Boolean).join(" ");
}

function edgeData(edge) {
  const data = { id: `${edge.from}>${edge.to}`, source: edge.from, target: edge.to, kind: edge.kind };
  if (edge.label) data.label = edge.label;
  return data;
}

const sameData = (el, data) => Object.entries(data).every(([k, v]) => el.data(k) === v);

/** A Cytoscape bounding box as plain numbers. */
function box(bb) {
  return { x1: bb.x1, y1: bb.y1, x2: bb.x2, y2: bb.y2 };
}

export class DagView {
  /**
   * @param {HTMLElement} stage  the panel's #dag: holds the graph's canvas and the overview
   * @param {{onSelect: (target: string, nodeId: string) => void}} options
   */
  constructor(stage, { onSelect }) {
    this.stage = stage;
    this.onSelect = onSelect;
    this.canvas = stage.querySelector(".dag-canvas");
    this.announce = stage.parentElement.querySelector(".dag-announce");
    const palette = readPalette(stage);
    this.cy = cytoscape({
      container: this.canvas,
      style: dagStylesheet(palette),
      minZoom: 0.05,
      maxZoom: 3,
      boxSelectionEnabled: false,
      autoungrabify: true,
      autounselectify: true,
    });
    this.overview = new DagOverview(stage.querySelector(".dag-overview"), this.cy, palette, {
      onMove: () => (this.follow = false),
    });
    this.graph = { nodes: [], edges: [] };
    this.order = [];
    this.selectedId = null;
    this.focusId = null; // the running or waiting node last brought into view
    this.follow = true; // frame the graph on each change, until the person pans or zooms
    this.layoutMs = 0;

    this.cy.on("tap", "node", (e) => this.#activate(e.target.id()));
    this.cy.on("mouseover", "node, edge[label]", (e) => {
      this.canvas.title = e.target.isNode() ? e.target.data("title") : e.target.data("label");
      if (e.target.isNode()) this.canvas.classList.add("is-over-node");
    });
    this.cy.on("mouseout", "node, edge[label]", () => {
      this.canvas.title = "";
      this.canvas.classList.remove("is-over-node");
    });
    this.cy.on("dragpan scrollzoom pinchzoom", () => (this.follow = false));
    this.canvas.addEventListener("keydown", (e) => this.#key(e));
    for (const button of stage.parentElement.querySelectorAll("[data-dag-action]")) {
      button.addEventListener("click", () => this.#command(button.dataset.dagAction));
    }
    // The split bar or the window resized the panel: tell Cytoscape, and reframe if following.
    new ResizeObserver(() => {
      this.cy.resize();
      if (this.follow) this.#frame();
      this.overview.refresh(true);
    }).observe(this.canvas);
  }

  /** Bring the drawing in line with the model; returns the node count. */
  update(model) {
    return this.draw(buildGraph(model, { domId }));
  }

  /** Bring the drawing in line with `graph` (buildGraph's nodes and edges); returns the node count. */
  draw(graph) {
    const nodeIds = new Set(graph.nodes.map((n) => n.id));
    const edges = new Map();
    for (const edge of graph.edges) {
      if (edge.from === edge.to || !nodeIds.has(edge.from) || !nodeIds.has(edge.to)) continue;
      const data = edgeData(edge);
      if (!edges.has(data.id)) edges.set(data.id, { data, classes: [`kind-${edge.kind}`, edge.agentCls].filter(Boolean).join(" ") });
    }
    const cy = this.cy;
    let reshaped = false;
    cy.batch(() => {
      const gone = cy.elements().filter((el) => (el.isNode() ? !nodeIds.has(el.id()) : !edges.has(el.id())));
      if (gone.length) {
        cy.remove(gone);
        reshaped = true;
      }
      const add = [];
      for (const [order, node] of graph.nodes.entries()) {
        const data = nodeData(node, order);
        const classes = nodeClasses(node, this.selectedId);
        const el = cy.getElementById(node.id);
        if (el.empty()) add.push({ group: "nodes", data, classes });
        else {
          if (!sameData(el, data)) el.data(data);
          if (el.classes().join(" ") !== classes) el.classes(classes);
        }
      }
      for (const { data, classes } of edges.values()) {
        const el = cy.getElementById(data.id);
        if (el.empty()) add.push({ group: "edges", data, classes });
        else {
          if (el.data("label") !== data.label) {
            if (data.label === undefined) el.removeData("label");
            else el.data("label", data.label);
          }
          if (el.classes().join(" ") !== classes) el.classes(classes);
        }
      }
      if (add.length) {
        cy.add(add);
        reshaped = true;
      }
    });
    this.graph = graph;
    this.order = graph.nodes.map((n) => n.id);
    if (reshaped) this.#layout();
    // Following, the view frames the graph anew when it changes shape or the active step moves
    // on; once the person has panned or zoomed it stays where they put it (Fit follows again).
    const focus = this.#activeNode();
    if (this.follow && (reshaped || focus !== this.focusId)) this.#frame();
    this.focusId = focus;
    this.overview.sync();
    return graph.nodes.length;
  }

  /** How many nodes the graph has. */
  get count() {
    return this.graph.nodes.length;
  }

  /** Mark the node whose cell is being looked at. */
  select(nodeId) {
    if (this.selectedId) this.cy.getElementById(this.selectedId).removeClass("is-selected");
    this.selectedId = nodeId;
    if (nodeId) this.cy.getElementById(nodeId).addClass("is-selected");
  }

  /** Mark `nodeId` (a cell the person moved to) and pan to it if it is out of view. */
  show(nodeId) {
    if (this.cy.getElementById(nodeId).empty()) return;
    this.select(nodeId);
    this.#keepInView(nodeId);
  }

  /** Centre the view on `nodeId`; returns whether it is drawn. */
  reveal(nodeId) {
    const node = this.cy.getElementById(nodeId);
    if (node.empty()) return false;
    this.cy.center(node);
    return true;
  }

  /** The graph as drawn, for tests and the console: nodes with positions, edges with labels. */
  snapshot() {
    return {
      nodes: this.cy.nodes().map((n) => ({ ...n.data(), cls: n.classes().join(" "), x: n.position("x"), y: n.position("y"), box: box(n.boundingBox({ includeLabels: false, includeOverlays: false })) })),
      edges: this.cy.edges().map((e) => ({
        id: e.id(), from: e.data("source"), to: e.data("target"), kind: e.data("kind"), label: e.data("label") ?? null, cls: e.classes().join(" "),
        // where its label is drawn (model coordinates), wherever along the edge the style puts it
        labelBox: e.data("label") ? box(e.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false })) : null,
      })),
      zoom: this.cy.zoom(),
      pan: this.cy.pan(),
      overview: !this.overview.el.hidden,
      layoutMs: this.layoutMs,
    };
  }

  /** Where `nodeId` is on the screen (client coordinates of its centre), or null if off-view. */
  screenPoint(nodeId) {
    const node = this.cy.getElementById(nodeId);
    if (node.empty()) return null;
    const p = node.renderedPosition();
    const rect = this.canvas.getBoundingClientRect();
    if (p.x < 0 || p.y < 0 || p.x > rect.width || p.y > rect.height) return null;
    return { x: rect.left + p.x, y: rect.top + p.y };
  }

  #layout() {
    const t0 = performance.now();
    if (this.graph.nodes.length <= DAGRE_MAX_NODES) {
      this.cy.layout(LAYOUT).run();
      // dagre's ordering leaves siblings newest-first (right to left): mirror it, so a plan's
      // calls read $1, $2, … (y1, y2, …) from left to right as the plan lists them
      this.cy.nodes().positions((n) => ({ x: -n.position("x"), y: n.position("y") }));
    } else {
      const positions = layeredPositions(this.graph);
      this.cy.layout({ name: "preset", positions: (node) => positions.get(node.id()), fit: false, animate: false }).run();
    }
    this.layoutMs = performance.now() - t0;
  }

  /** The waiting step, else the running one, else null. */
  #activeNode() {
    const waiting = this.graph.nodes.find((n) => n.waiting);
    if (waiting) return waiting.id;
    const running = this.graph.nodes.findLast((n) => n.kind !== "message" && n.status === "running");
    return running ? running.id : null;
  }

  /** Fit the whole graph unless it is too big to read whole; else a readable zoom around the active (or last) node. */
  #frame() {
    const cy = this.cy;
    const all = cy.elements();
    if (!all.length || !cy.width()) return;
    const bb = all.boundingBox({ includeLabels: false, includeOverlays: false, includeUnderlays: false });
    const fitZoom = Math.min((cy.width() - 2 * PAD) / bb.w, (cy.height() - 2 * PAD) / bb.h);
    if (fitZoom >= MIN_FIT_ZOOM) {
      // The whole graph, from the top: a growing graph does not jump about as it is centred.
      const zoom = Math.min(fitZoom, MAX_FIT_ZOOM);
      cy.viewport({ zoom, pan: { x: (cy.width() - bb.w * zoom) / 2 - bb.x1 * zoom, y: PAD - bb.y1 * zoom } });
      return;
    }
    cy.zoom(READABLE_ZOOM);
    cy.center(cy.getElementById(this.#activeNode() || this.order[this.order.length - 1]));
    // No empty band past the graph's first or last node; the last one clear of the overview.
    const pan = cy.pan();
    const top = PAD - bb.y1 * READABLE_ZOOM;
    const bottom = cy.height() - OVERVIEW_ROOM - bb.y2 * READABLE_ZOOM;
    cy.pan({ x: pan.x, y: Math.min(top, Math.max(bottom, pan.y)) });
  }

  /** Pan (keeping the zoom) so the node is inside the view, if it is not already. */
  #keepInView(nodeId) {
    const node = this.cy.getElementById(nodeId);
    if (node.empty()) return;
    const box = node.renderedBoundingBox();
    // the overview covers the bottom of the view when it shows
    const bottom = this.cy.height() - (this.overview.el.hidden ? 0 : this.overview.el.offsetHeight + 8);
    if (box.x1 >= 0 && box.y1 >= 0 && box.x2 <= this.cy.width() && box.y2 <= bottom) return;
    this.cy.center(node);
  }

  #command(action) {
    const cy = this.cy;
    const centre = { x: cy.width() / 2, y: cy.height() / 2 };
    if (action === "fit") {
      cy.fit(undefined, PAD);
      if (cy.zoom() > MAX_FIT_ZOOM) {
        cy.zoom(MAX_FIT_ZOOM);
        cy.center();
      }
      this.follow = true;
      return;
    }
    this.follow = false;
    if (action === "zoom-in") cy.zoom({ level: cy.zoom() * ZOOM_STEP, renderedPosition: centre });
    else if (action === "zoom-out") cy.zoom({ level: cy.zoom() / ZOOM_STEP, renderedPosition: centre });
  }

  #activate(nodeId) {
    const node = this.cy.getElementById(nodeId);
    if (node.empty()) return;
    this.select(nodeId);
    this.#say(node.data("title"));
    this.onSelect(node.data("target"), nodeId);
  }

  #say(text) {
    if (this.announce && this.announce.textContent !== text) this.announce.textContent = text;
  }

  /** Keys on the focused graph: arrows move between nodes, Enter opens one, + − 0 zoom and fit. */
  #key(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const at = this.order.indexOf(this.selectedId);
    let next = null;
    if (event.key === "ArrowDown" || event.key === "ArrowRight") next = this.order[Math.min(at + 1, this.order.length - 1)];
    else if (event.key === "ArrowUp" || event.key === "ArrowLeft") next = this.order[Math.max(at - 1, 0)];
    else if (event.key === "Home") next = this.order[0];
    else if (event.key === "End") next = this.order[this.order.length - 1];
    else if ((event.key === "Enter" || event.key === " ") && this.selectedId) this.#activate(this.selectedId);
    else if (event.key === "+" || event.key === "=") this.#command("zoom-in");
    else if (event.key === "-") this.#command("zoom-out");
    else if (event.key === "0") this.#command("fit");
    else return;
    event.preventDefault();
    event.stopPropagation(); // the page's step keys (keys.js) must not act on these too
    if (next) {
      this.select(next);
      this.#keepInView(next);
      this.#say(this.cy.getElementById(next).data("title"));
    }
  }
}
