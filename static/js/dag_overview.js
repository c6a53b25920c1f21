// The DAG's overview (minimap): the whole graph drawn small on a plain canvas (a box per node
// in its status colour, a line per edge; no text), with the main view's viewport as a rectangle.
// Shown only when the graph does not fit the panel; a click or drag in it moves the main view
// there. Drawing it costs a few milliseconds even for a 1,500-node trace.

import { NODE_SIZE } from "./graph.js";

const PAD = 4;

export class DagOverview {
  /**
   * @param {HTMLElement} el  the overview's box (decorative: aria-hidden; the keys reach every node)
   * @param {any} main        the main Cytoscape instance
   * @param {ReturnType<import("./dag_style.js").readPalette>} palette
   * @param {{onMove: () => void}} options  called when the person moves the view from here
   */
  constructor(el, main, palette, { onMove }) {
    this.el = el;
    this.main = main;
    this.palette = palette;
    this.onMove = onMove;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "dag-overview-graph";
    this.box = document.createElement("div");
    this.box.className = "dag-overview-view";
    el.append(this.canvas, this.box);
    this.bounds = null; // the graph's extent in graph coordinates
    this.map = { scale: 1, x: 0, y: 0 }; // graph -> overview pixels
    main.on("viewport resize", () => this.refresh());
    el.addEventListener("pointerdown", (e) => {
      el.setPointerCapture(e.pointerId);
      this.#moveTo(e);
    });
    el.addEventListener("pointermove", (e) => {
      if (el.hasPointerCapture(e.pointerId)) this.#moveTo(e);
    });
  }

  /** Redraw from the main graph's positions and statuses (after a layout or a status change). */
  sync() {
    let x1 = Infinity;
    let y1 = Infinity;
    let x2 = -Infinity;
    let y2 = -Infinity;
    const boxes = [];
    this.main.nodes().forEach((n) => {
      const p = n.position();
      const size = NODE_SIZE[n.data("kind")] || NODE_SIZE.step;
      const b = { x: p.x - size.w / 2, y: p.y - size.h / 2, w: size.w, h: size.h, status: n.data("status") };
      boxes.push(b);
      x1 = Math.min(x1, b.x);
      y1 = Math.min(y1, b.y);
      x2 = Math.max(x2, b.x + b.w);
      y2 = Math.max(y2, b.y + b.h);
    });
    this.bounds = boxes.length ? { x1, y1, x2, y2 } : null;
    this.boxes = boxes;
    this.refresh(true);
  }

  /** Show the overview only when the main view does not hold the whole graph. */
  refresh(redraw = false) {
    const b = this.bounds;
    const ext = this.main.extent();
    const fits = !b || (b.x1 >= ext.x1 && b.x2 <= ext.x2 && b.y1 >= ext.y1 && b.y2 <= ext.y2);
    const wasHidden = this.el.hidden;
    this.el.hidden = fits;
    if (fits) return;
    if (redraw || wasHidden) this.#draw();
    this.#drawBox(ext);
  }

  #draw() {
    const width = this.el.clientWidth;
    const height = this.el.clientHeight;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    const b = this.bounds;
    const scale = Math.min((width - 2 * PAD) / (b.x2 - b.x1), (height - 2 * PAD) / (b.y2 - b.y1));
    this.map = {
      scale,
      x: (width - (b.x2 - b.x1) * scale) / 2 - b.x1 * scale,
      y: (height - (b.y2 - b.y1) * scale) / 2 - b.y1 * scale,
    };
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const { x: ox, y: oy } = this.map;
    ctx.strokeStyle = this.palette.muted;
    ctx.globalAlpha = 0.45;
    ctx.lineWidth = 0.6;
    ctx.beginPath();
    this.main.edges().forEach((e) => {
      const s = e.source().position();
      const t = e.target().position();
      ctx.moveTo(s.x * scale + ox, s.y * scale + oy);
      ctx.lineTo(t.x * scale + ox, t.y * scale + oy);
    });
    ctx.stroke();
    ctx.globalAlpha = 1;
    for (const n of this.boxes) {
      ctx.fillStyle = this.palette.status[n.status] || this.palette.accent;
      ctx.fillRect(n.x * scale + ox, n.y * scale + oy, Math.max(1.5, n.w * scale), Math.max(1.5, n.h * scale));
    }
  }

  #drawBox(ext) {
    const { scale, x, y } = this.map;
    const width = this.el.clientWidth;
    const height = this.el.clientHeight;
    const x1 = Math.max(0, ext.x1 * scale + x);
    const y1 = Math.max(0, ext.y1 * scale + y);
    const x2 = Math.min(width, ext.x2 * scale + x);
    const y2 = Math.min(height, ext.y2 * scale + y);
    // CSSOM properties, not a style attribute: the page's CSP allows no inline styles.
    this.box.style.left = `${x1}px`;
    this.box.style.top = `${y1}px`;
    this.box.style.width = `${Math.max(4, x2 - x1)}px`;
    this.box.style.height = `${Math.max(4, y2 - y1)}px`;
  }

  #moveTo(event) {
    const rect = this.el.getBoundingClientRect();
    const { scale, x, y } = this.map;
    const gx = (event.clientX - rect.left - x) / scale;
    const gy = (event.clientY - rect.top - y) / scale;
    const z = this.main.zoom();
    this.main.pan({ x: this.main.width() / 2 - gx * z, y: this.main.height() / 2 - gy * z });
    this.onMove();
  }
}
