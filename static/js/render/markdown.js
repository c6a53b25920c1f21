// Markdown for assistant text (CommonMark + GitHub tables and strikethrough), rendered as it
// streams without redrawing what is already shown.
//
// A stream's text only grows. Top-level blocks (a paragraph, a list, a table, a fenced code
// block) that another block has followed are final: they are rendered once, appended, and never
// touched again. Only the last, still-open block is parsed and drawn again when text arrives,
// so a token costs the size of one block, not of the whole answer. Text that is not a
// continuation of what was shown (an undo, a new run) starts over.
//
// Raw HTML in the text is shown as text (markdown-it `html: false`), images are not loaded, and
// every fragment passes the sanitiser before it reaches the page.

import MarkdownIt from "../../vendor/markdown-it/markdown-it.esm.min.mjs";
import { sanitize } from "./sanitize.js";

/** Table rows and code lines drawn per block; the rest is counted (the raw view has it all). */
export const MAX_TABLE_ROWS = 200;
export const MAX_CODE_LINES = 400;
// A still-open block larger than this is parsed again only when it grew by half (or a blank
// line arrived): a 10,000-row table streamed token by token must not cost a parse per token.
const BIG_TAIL = 32 * 1024;

const md = new MarkdownIt("commonmark", { html: false, breaks: true, linkify: false });
md.enable(["table", "strikethrough"]);
md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const alt = md.utils.escapeHtml(token.content || "image");
  const src = md.utils.escapeHtml(token.attrGet("src") || "");
  return `<span class="md-image" title="Image not loaded: ${src}">[image: ${alt}]</span>`;
};

/** Cut long tables and code blocks in a token list, noting how much was left out. */
function capTokens(tokens) {
  const out = [];
  let rows = 0;
  let skipped = 0;
  let inBody = false;
  for (const token of tokens) {
    if (token.type === "tbody_open") {
      inBody = true;
      rows = 0;
      skipped = 0;
    } else if (token.type === "tbody_close") {
      inBody = false;
    } else if (inBody) {
      if (token.type === "tr_open") rows += 1;
      if (rows > MAX_TABLE_ROWS) {
        if (token.type === "tr_open") skipped += 1;
        continue;
      }
    }
    if ((token.type === "fence" || token.type === "code_block") && token.content) {
      const lines = token.content.split("\n");
      if (lines.length > MAX_CODE_LINES + 1) {
        token.content = `${lines.slice(0, MAX_CODE_LINES).join("\n")}\n… ${lines.length - MAX_CODE_LINES} more lines (Raw shows them)\n`;
      }
    }
    out.push(token);
    if (token.type === "table_close" && skipped) out.push(...noteTokens(`… ${skipped.toLocaleString("en")} more rows (Raw shows them)`));
  }
  return out;
}

function noteTokens(text) {
  const state = new md.core.State("", md, {});
  const open = new state.Token("paragraph_open", "p", 1);
  open.attrSet("class", "md-note");
  const inline = new state.Token("inline", "", 0);
  inline.content = text;
  inline.children = [Object.assign(new state.Token("text", "", 0), { content: text })];
  return [open, inline, new state.Token("paragraph_close", "p", -1)];
}

/** Markdown `text` as a sanitised DocumentFragment (no streaming state). */
export function renderMarkdown(text) {
  const env = {};
  return sanitize(md.renderer.render(capTokens(md.parse(text, env)), md.options, env));
}

/** Offsets where each line of `text` starts. */
function lineStarts(text) {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return starts;
}

/**
 * A rendered Markdown text that can grow: `update(text)` on every change, `raw = true` for
 * the source as typed. The element keeps `data-frozen` (blocks drawn for good) for tests.
 */
export class MarkdownView {
  constructor(el) {
    this.el = el;
    this.el.classList.add("md");
    this.frozen = document.createElement("div");
    this.frozen.className = "md-frozen";
    this.live = document.createElement("div");
    this.live.className = "md-live";
    this.el.replaceChildren(this.frozen, this.live);
    this.text = "";
    this.boundary = 0; // text before this offset is in `frozen`
    this.liveSource = null; // what `live` shows
    this.parsedTailLength = 0;
    this.rawEl = null;
    this.blocks = 0;
    this.final = false;
  }

  /** Show `text`; only what changed since the last call is parsed and drawn. */
  update(text, { final = false } = {}) {
    text = text ?? "";
    if (text === this.text && (!final || this.final)) return;
    this.final = final;
    if (!text.startsWith(this.text)) this.#reset();
    const delta = text.slice(this.text.length);
    this.text = text;
    if (this.rawEl) this.rawEl.textContent = text;
    const tailLength = text.length - this.boundary;
    const big = tailLength > BIG_TAIL && !final && tailLength < this.parsedTailLength * 1.5 && !/\n\s*\n/.test(delta);
    if (big) return; // the open block is huge; wait until it grew enough to be worth a parse
    this.#renderTail();
  }

  #reset() {
    this.frozen.replaceChildren();
    this.live.replaceChildren();
    this.text = "";
    this.boundary = 0;
    this.liveSource = null;
    this.parsedTailLength = 0;
    this.blocks = 0;
  }

  #renderTail() {
    const tail = this.text.slice(this.boundary);
    this.parsedTailLength = tail.length;
    const env = {};
    const tokens = md.parse(tail, env);
    // Top-level blocks: every token at nesting level 0 that opens or is a whole block.
    let lastStart = -1;
    let count = 0;
    tokens.forEach((token, i) => {
      if (token.level === 0 && token.nesting >= 0 && token.map) {
        lastStart = i;
        count += 1;
      }
    });
    if (count >= 2) {
      const line = tokens[lastStart].map[0];
      const done = tokens.slice(0, lastStart);
      this.frozen.append(sanitize(md.renderer.render(capTokens(done), md.options, env)));
      this.blocks += count - 1;
      this.boundary += lineStarts(tail)[line];
      this.#drawLive(tail.slice(lineStarts(tail)[line]), tokens.slice(lastStart), env);
    } else {
      this.#drawLive(tail, tokens, env);
    }
    this.el.dataset.frozen = String(this.blocks);
  }

  #drawLive(source, tokens, env) {
    if (source === this.liveSource) return;
    this.liveSource = source;
    this.live.replaceChildren(sanitize(md.renderer.render(capTokens(tokens), md.options, env)));
  }

  /** Show the source text instead of the rendering (or back). */
  set raw(on) {
    if (on && !this.rawEl) {
      this.rawEl = document.createElement("pre");
      this.rawEl.className = "md-raw";
      this.el.after(this.rawEl);
    }
    if (this.rawEl) {
      this.rawEl.textContent = this.text;
      this.rawEl.hidden = !on;
    }
    this.el.hidden = on;
  }

  get raw() {
    return Boolean(this.rawEl && !this.rawEl.hidden);
  }
}

/**
 * A Markdown text with its Raw/Rendered toggle: returns {root, view}. `root` goes in the page;
 * `view.update(text)` draws into it.
 */
export function markdownBlock(className = "") {
  const body = document.createElement("div");
  body.className = `md-body ${className}`.trim();
  const view = new MarkdownView(body);
  const toggle = document.createElement("button");
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
  root.append(toggle, body);
  return { root, view };
}

/** Plan text (LLMCompiler's numbered calls) reads best as written: shown as plain text. */
class PlainView {
  constructor(el) {
    this.el = el;
    this.el.classList.add("cell-text");
  }

  update(text) {
    if (this.el.textContent !== text) this.el.textContent = text ?? "";
  }
}

const PLAIN_PHASES = new Set(["plan"]);

/** A streamed text of the model for `phase`: {root, view}, Markdown unless the phase is a plan. */
export function textBlock(phase, className = "") {
  if (PLAIN_PHASES.has(phase)) {
    const root = document.createElement("div");
    root.className = className;
    return { root, view: new PlainView(root) };
  }
  return markdownBlock(className);
}

/** A finished text of the model, rendered once. */
export function assistantText(text, className = "", phase = null) {
  const { root, view } = textBlock(phase, className);
  view.update(text, { final: true });
  return root;
}
