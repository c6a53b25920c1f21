// A Markdown text drawn as it streams, without redrawing what is already shown.
//
// A stream's text only grows. Top-level blocks (a paragraph, a list, a table, a fenced code
// block) that another block has followed are final: they move into `frozen` once and are never
// touched again. Only the last, still-open block is drawn again when text arrives, so a token
// costs the size of one block, not of the whole answer. Two open blocks grow cheaper still: a
// fenced code block takes new text as text (its content is literal), and a table gets each
// finished row appended (a row drawn with the table's head, on its own). Text that does not
// continue what was shown (an undo, a new run) starts over.

import { MAX_TABLE_ROWS, md, renderTokens } from "./markdown.js";

// A still-open block larger than this is parsed again only when it grew by half (or a blank
// line arrived): a 10,000-row table streamed token by token must not cost a parse per token.
const BIG_TAIL = 32 * 1024;

// Anything that could start, end or change inline markup, a line or an entity.
const INLINE_SYNTAX = /[\n\\`*_~[\]()<>!&#|]/;

/** Offsets where each line of `text` starts. */
function lineStarts(text) {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return starts;
}

/** Indices of the tokens that start a top-level block. */
function blockStarts(tokens) {
  const starts = [];
  tokens.forEach((token, i) => {
    if (token.level === 0 && token.nesting >= 0 && token.map) starts.push(i);
  });
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
    this.rawEl = null;
    this.#reset();
  }

  /** Show `text`; only what changed since the last call is parsed and drawn. */
  update(text, { final = false } = {}) {
    text = text ?? "";
    if (text === this.text && (!final || this.final)) return;
    this.final = final;
    if (!text.startsWith(this.text)) this.#reset();
    const delta = text.slice(this.text.length);
    this.text = text;
    if (this.rawEl && !this.rawEl.hidden) this.rawEl.textContent = text;
    if (!final && this.#grow(delta)) return;
    const tailLength = text.length - this.boundary;
    const big = tailLength > BIG_TAIL && !final && tailLength < this.parsedTailLength * 1.5 && !/\n\s*\n/.test(delta);
    if (big) return; // the open block is huge; wait until it grew enough to be worth a parse
    this.#renderTail();
  }

  #reset() {
    this.frozen.replaceChildren();
    this.live.replaceChildren();
    this.text = "";
    this.final = false;
    this.boundary = 0; // text before this offset is in `frozen`
    this.parsedTailLength = 0;
    this.blocks = 0;
    this.open = null; // the open block: {source, kind, ...} for what `live` shows
  }

  /** Add `delta` to an open code block or table without drawing it again; false if it cannot. */
  #grow(delta) {
    const open = this.open;
    if (!open) return false;
    // (once the fence's opening line is complete: before that, text may be its info string)
    if (open.kind === "fence" && open.code && open.source.includes("\n") && !/[`~]/.test(delta)) {
      open.code.appendData(delta);
      open.source += delta;
      return true;
    }
    if (open.kind === "table_open" && open.tbody) return this.#growTable(open);
    // Plain words on the same line of a paragraph or heading are text wherever they land.
    const midLine = !open.source.endsWith("\n"); // a new line could start a list, a heading…
    if ((open.kind === "paragraph_open" || open.kind === "heading_open") && open.inline && midLine && !INLINE_SYNTAX.test(delta)) {
      const last = open.inline.lastChild;
      if (last?.nodeType === Node.TEXT_NODE) last.appendData(delta);
      else open.inline.append(delta);
      open.source += delta;
      return true;
    }
    return false;
  }

  #growTable(open) {
    const end = this.text.lastIndexOf("\n");
    const from = this.boundary + open.source.lastIndexOf("\n") + 1; // where the unfinished row starts
    if (end < from) return true; // the row is not finished: it shows when it is
    const lines = this.text.slice(from, end).split("\n");
    if (open.tbody.rows.length + lines.length > MAX_TABLE_ROWS) return false;
    if (!lines.every((line) => line.trimStart().startsWith("|"))) return false; // the table ended
    for (const line of lines) {
      const env = {};
      const row = renderTokens(md.parse(`${open.head}${line}\n`, env), env).querySelector("tbody tr");
      if (!row) return false;
      if (open.partial) open.tbody.lastElementChild?.remove(); // the unfinished row drawn before
      open.partial = false;
      open.tbody.append(row);
    }
    open.source = this.text.slice(this.boundary, end + 1);
    return true;
  }

  #renderTail() {
    const tail = this.text.slice(this.boundary);
    this.parsedTailLength = tail.length;
    const env = {};
    const tokens = md.parse(tail, env);
    const starts = blockStarts(tokens);
    if (starts.length >= 2) {
      const lastStart = starts[starts.length - 1];
      const cut = lineStarts(tail)[tokens[lastStart].map[0]];
      this.#freeze(tail.slice(0, cut), tokens.slice(0, lastStart), starts.length - 1, env);
      this.boundary += cut;
      this.#drawLive(tail.slice(cut), tokens.slice(lastStart), env);
    } else {
      this.#drawLive(tail, tokens, env);
    }
    this.el.dataset.frozen = String(this.blocks);
  }

  /** Move finished blocks to `frozen`: what `live` already shows moves as it is. */
  #freeze(source, tokens, count, env) {
    if (count === 1 && this.open && this.open.source.trimEnd() === source.trimEnd()) {
      this.frozen.append(...this.live.childNodes);
    } else {
      this.frozen.append(renderTokens(tokens, env));
    }
    this.blocks += count;
    this.open = null;
  }

  #drawLive(source, tokens, env) {
    if (this.open && source === this.open.source) return;
    this.live.replaceChildren(renderTokens(tokens, env));
    const kind = tokens[0]?.type ?? null;
    const open = { source, kind, code: null, tbody: null, head: "", partial: false, inline: null };
    if ((kind === "paragraph_open" || kind === "heading_open") && this.live.childElementCount === 1) {
      open.inline = this.live.firstElementChild;
      // markdown-it trims the line's trailing spaces; words appended later need them back
      const trailing = /[ \t]+$/.exec(source)?.[0];
      if (trailing) open.inline.append(trailing);
    }
    if (kind === "fence") {
      const code = this.live.querySelector("pre > code");
      if (code && !code.lastChild) code.append("");
      open.code = code?.lastChild?.nodeType === Node.TEXT_NODE ? code.lastChild : null;
      // markdown-it ends an open fence's content with a newline the source does not have yet
      if (open.code && !source.endsWith("\n") && open.code.data.endsWith("\n")) open.code.deleteData(open.code.length - 1, 1);
    } else if (kind === "table_open") {
      const starts = lineStarts(source);
      open.tbody = this.live.querySelector("tbody");
      open.head = source.slice(0, starts[2] ?? source.length);
      open.partial = !source.endsWith("\n");
      if (starts.length < 3 || !open.head.endsWith("\n")) open.tbody = null;
    }
    this.open = open;
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
