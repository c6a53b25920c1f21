// The model's text in the page: Markdown with a Raw/Rendered toggle, or plain text for plans.

import { proseNodes, proseNote } from "../hidden.js";
import { whenNear } from "./lazy.js";
import { MarkdownView } from "./markdown_stream.js";

/**
 * A Markdown text with its Raw/Rendered toggle: returns {root, view}. `root` goes in the page;
 * `view.update(text)` draws into it.
 */
export function markdownBlock(className = "") {
  const body = document.createElement("div");
  body.className = `md-body ${className}`.trim();
  const toggle = document.createElement("button");
  // (hidden until there is text; set from here, as a CSS :has() rule made every node drawn
  // inside the block cost a style check)
  toggle.hidden = true;
  const note = proseNote();
  const view = new MarkdownView(body, { onEmpty: (empty) => (toggle.hidden = empty), onHidden: (text) => proseNote(note, text) });
  toggle.type = "button";
  toggle.className = "md-toggle button-link";
  toggle.textContent = "Raw";
  toggle.title = "Show the text as the model wrote it";
  toggle.setAttribute("aria-pressed", "false");
  toggle.addEventListener("click", () => {
    view.raw = !view.raw;
    toggle.textContent = view.raw ? "Rendered" : "Raw";
    toggle.setAttribute("aria-pressed", String(view.raw));
  });
  const root = document.createElement("div");
  root.className = "md-block";
  root.append(toggle, note, body);
  return { root, view };
}

/** Plans (LLMCompiler's numbered calls) and CoA chains read best as written: plain text. */
class PlainView {
  constructor(el) {
    this.el = el;
    this.el.classList.add("cell-text");
    this.el.dir = "auto";
    this.text = null;
  }

  update(text) {
    text ??= "";
    if (this.text === text) return;
    this.text = text;
    this.el.replaceChildren(...proseNodes(text));
  }
}

// CoA's reasoning shows its placeholders as chips (chain.js), over plain text.
const PLAIN_PHASES = new Set(["plan", "reasoning"]);

/** A streamed text of the model for `phase`: {root, view}, Markdown unless the phase is a plan. */
export function textBlock(phase, className = "") {
  if (PLAIN_PHASES.has(phase)) {
    const root = document.createElement("div");
    root.className = className;
    return { root, view: new PlainView(root) };
  }
  return drawnWhenNear(markdownBlock(className));
}

/**
 * The block's Markdown drawn once it is near the viewport (at once unless the page draws lazily,
 * see lazy.js); until then its text shows as written.
 */
function drawnWhenNear({ root, view }) {
  let near = false;
  let latest = null;
  view.el.classList.add("md-pending");
  whenNear(root, () => {
    near = true;
    view.el.classList.remove("md-pending");
    if (latest) view.update(...latest);
  });
  const update = (text, options) => {
    if (near) view.update(text, options);
    else {
      latest = [text, options];
      view.live.replaceChildren(...proseNodes(text ?? ""));
    }
  };
  return { root, view: { el: view.el, update } };
}

/** A finished text of the model, rendered once. */
export function assistantText(text, className = "", phase = null) {
  const { root, view } = textBlock(phase, className);
  view.update(text, { final: true });
  return root;
}
