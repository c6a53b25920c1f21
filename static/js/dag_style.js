// How the step DAG looks: a Cytoscape stylesheet built from the page's CSS variables, so the
// canvas follows the same palette (and dark mode) as the cells. Labels are canvas text.

import { NODE_SIZE } from "./graph.js";

const STATUSES = ["pending", "running", "completed", "failed", "undone", "interrupted", "rejected"];
const AGENT_COLOURS = 6; // .agent-color-1 … -6 in notebook.css

/** The palette the stylesheet needs, read from the CSS custom properties in effect at `el`. */
export function readPalette(el) {
  const css = getComputedStyle(el);
  const read = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const status = Object.fromEntries(STATUSES.map((s) => [s, read(`--status-${s}`, "#8a93a3")]));
  status.answered = status.completed;
  status.waiting = read("--accent", "#3563c9"); // as a waiting cell's badge
  const agents = [];
  const probe = document.createElement("span");
  probe.hidden = true;
  el.append(probe);
  for (let i = 1; i <= AGENT_COLOURS; i++) {
    probe.className = `agent-color-${i}`;
    agents.push(getComputedStyle(probe).getPropertyValue("--agent-color").trim() || "#3563c9");
  }
  probe.remove();
  return {
    surface: read("--surface", "#ffffff"),
    text: read("--text", "#1d2330"),
    muted: read("--text-muted", "#5d6675"),
    accent: read("--accent", "#3563c9"),
    focus: read("--focus", "#7aa2f7"),
    sans: read("--font-sans", "sans-serif"),
    mono: read("--font-mono", "monospace"),
    status,
    agents,
  };
}

/** `a` blended towards `b` by `t` (0…1); both #rrggbb (anything else returns `a`). */
export function mix(a, b, t) {
  const parse = (hex) => (/^#[0-9a-f]{6}$/i.test(hex) ? [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)) : null);
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return a;
  return `#${x.map((v, i) => Math.round(v + (y[i] - v) * t).toString(16).padStart(2, "0")).join("")}`;
}

/** The Cytoscape stylesheet: node kinds, statuses, agents, edge kinds and their labels. */
export function dagStylesheet(p) {
  const tint = (colour, t) => mix(p.surface, colour, t);
  const rules = [
    {
      selector: "node",
      style: {
        shape: "round-rectangle",
        width: "data(w)",
        height: "data(h)",
        "background-color": p.surface,
        "border-width": 1.5,
        "border-color": p.status.pending,
        label: "data(display)",
        "text-wrap": "wrap",
        "text-max-width": "data(textWidth)",
        "text-valign": "center",
        "text-halign": "center",
        "line-height": 1.25,
        "font-family": p.sans,
        "font-size": 11,
        color: p.text,
        "min-zoomed-font-size": 5,
      },
    },
    { selector: "node.kind-message", style: { "background-color": tint(p.accent, 0.08), "border-color": p.accent, "font-weight": 600 } },
    { selector: "node.kind-step", style: { "font-weight": 600 } },
    { selector: "node.kind-call", style: { shape: "round-rectangle", "corner-radius": 14, "font-family": p.mono, "font-size": 10.5 } },
  ];
  for (const [name, colour] of Object.entries(p.status)) {
    rules.push({ selector: `node.status-${name}`, style: { "border-color": colour, "background-color": tint(colour, 0.1) } });
  }
  rules.push({ selector: "node.status-undone", style: { "border-style": "dashed", color: p.muted } });
  rules.push({ selector: "node.status-rejected", style: { "border-style": "dashed" } });
  p.agents.forEach((colour, i) => {
    rules.push({ selector: `node.agent-color-${i + 1}`, style: { "border-color": colour, "background-color": tint(colour, 0.12) } });
  });
  rules.push(
    // The step running now and the one waiting for the person stand out, with a halo.
    { selector: "node.is-current", style: { "border-width": 3, "underlay-color": p.status.running, "underlay-opacity": 0.22, "underlay-padding": 6 } },
    { selector: "node.is-waiting", style: { "border-width": 3, "border-color": p.status.waiting, "underlay-color": p.status.waiting, "underlay-opacity": 0.25, "underlay-padding": 7 } },
    { selector: "node.is-selected", style: { "overlay-color": p.focus, "overlay-opacity": 0.18, "overlay-padding": 4, "border-width": 3 } },
    {
      selector: "edge",
      style: {
        width: 1.4,
        "curve-style": "bezier",
        "line-color": mix(p.muted, p.surface, 0.35),
        "target-arrow-shape": "triangle",
        "target-arrow-color": mix(p.muted, p.surface, 0.35),
        "arrow-scale": 0.9,
      },
    },
    { selector: "edge.kind-turn", style: { "line-style": "dashed" } },
    { selector: "edge.kind-dep", style: { width: 1.8, "line-color": p.accent, "target-arrow-color": p.accent, color: p.accent } },
    { selector: "edge.kind-handoff", style: { width: 2.2, color: p.accent } },
    {
      // Labels on the edges they describe (`$2`, `y3`, a handoff's reason): text on a chip of
      // the panel's colour, so they read over lines.
      selector: "edge[label]",
      style: {
        label: "data(label)",
        "font-family": p.mono,
        "font-size": 10,
        "font-weight": 600,
        "text-background-color": p.surface,
        "text-background-opacity": 0.92,
        "text-background-padding": 2,
        "text-background-shape": "round-rectangle",
        "text-border-width": 1,
        "text-border-color": mix(p.muted, p.surface, 0.6),
        "text-border-opacity": 1,
        "text-wrap": "ellipsis",
        "text-max-width": 180,
        "min-zoomed-font-size": 6,
      },
    },
    { selector: "edge.kind-handoff[label]", style: { "font-family": p.sans, "text-wrap": "wrap", "text-max-width": NODE_SIZE.step.w + 40 } },
    // A result's name sits by the call that uses it, not midway: a dependency edge can span
    // several ranks, and its middle may pass behind a step node laid out between them.
    { selector: "edge.kind-dep[label]", style: { label: "", "target-label": "data(label)", "target-text-offset": 24 } },
  );
  // A handoff's edge takes the colour of the agent it hands to.
  p.agents.forEach((colour, i) => {
    rules.push({ selector: `edge.agent-color-${i + 1}`, style: { "line-color": colour, "target-arrow-color": colour, color: colour } });
  });
  return rules;
}
