// A Markdown text drawn as it streams, without redrawing what is already shown.
//
// A stream's text only grows. Top-level blocks (a paragraph, a list, a table, a fenced code
// block) that another block has followed are final: they are drawn for good and never touched
// again. The element holds them in `.md-frozen` parts and the still-open block in the last part,
// `.md-live`. A block that is final as shown is not moved: its part is renamed frozen and a new
// live part follows it (moving nodes would make the browser style and lay them out again).
//
// Only the open block is worked on when text arrives, and most tokens do not even parse it:
// plain words on a paragraph's line and text inside a fenced code block are appended as text,
// and a table gets each finished row appended. When the open block must be parsed again, its new
// HTML is compared with what is shown: if it only adds at the end (a word with markup, a list
// item, a line), only the added piece is sanitised and appended. A blank line after a
// paragraph, table or quote, and a heading's or rule's line end, make the block final at once.
// Text that does not continue what was shown (an undo, a new run) starts over.

import { appendProse, endsInFlagPart, hasProseHidden, ProseTally, proseNodes } from "../hidden.js";
import { MAX_TABLE_ROWS, md, proseFragment, renderTokens, tokensHtml } from "./markdown.js";

// A still-open block larger than this is parsed again only when it grew by half (or a blank
// line arrived): a 10,000-row table streamed token by token must not cost a parse per token.
const BIG_TAIL = 32 * 1024;

// Anything that could start, end or change inline markup, a line or an entity.
const INLINE_SYNTAX = /[\n\\`*_~[\]()<>!&#|]/;

// Blocks that nothing after a blank line can continue, and blocks that end with their line.
const ENDED_BY_BLANK_LINE = new Set(["paragraph_open", "table_open", "blockquote_open"]);
const ENDED_BY_LINE_END = new Set(["heading_open", "hr"]);

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

// A table row with none of these is plain text in every cell.
const CELL_SYNTAX = /[\\`*_~[\]()<>!&#]/;

/**
 * A table row `line` drawn as markdown-it draws it, without parsing or sanitising, when its cells
 * are plain text (`aligns`: the header's cell classes); null when it needs the parser.
 */
function plainRow(line, aligns) {
  if (!/^ {0,3}\|/.test(line) || CELL_SYNTAX.test(line)) return null;
  const cells = line.trim().split("|");
  if (cells[0] === "") cells.shift();
  if (cells.length && cells[cells.length - 1] === "") cells.pop();
  if (cells.length !== aligns.length) return null;
  const row = document.createElement("tr");
  cells.forEach((cell, i) => {
    const td = document.createElement("td");
    if (aligns[i]) td.className = aligns[i];
    td.append(...proseNodes(cell.trim()));
    row.append(td);
  });
  return row;
}

/** Whether the open block is final whatever follows. */
function ended({ kind, source, closed }) {
  if (ENDED_BY_LINE_END.has(kind) || closed) return source.endsWith("\n");
  return ENDED_BY_BLANK_LINE.has(kind) && /\n[ \t]*\n$/.test(source);
}

/** Whether a fenced code block's `source` has its closing fence (`markup` opened it). */
function fenceClosed(source, markup) {
  const lines = source.split("\n").slice(1);
  if (!source.endsWith("\n")) lines.pop(); // an unfinished line may still grow past the fence
  return lines.some((line) => {
    const fence = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line)?.[1];
    return fence && fence[0] === markup[0] && fence.length >= markup.length;
  });
}

const TAG = /<(\/?)([a-z][a-z0-9]*)\b[^>]*>/g;
const VOID_TAGS = new Set(["br", "hr", "img"]);
const CLOSING_RUN = /(?:<\/[a-z][a-z0-9]*>\s*)+$/;
// Parsed on its own, a piece of a table would lose its rows: those are drawn whole.
const NO_PIECES_INTO = new Set(["TABLE", "THEAD", "TBODY", "TR"]);

/** Whether every tag `html` opens it closes, and it closes none it did not open. */
function balanced(html) {
  const open = [];
  for (const [, closing, name] of html.matchAll(TAG)) {
    if (VOID_TAGS.has(name)) continue;
    if (!closing) open.push(name);
    else if (open.pop() !== name) return false;
  }
  return open.length === 0;
}

/**
 * How `html` extends `shown` (both markdown-it HTML of one block): `{added, depth, parent}` when
 * `html` is `shown` with `added` inserted before its last `depth` closing tags (in the element
 * `parent` that the first of them closes), else null.
 */
function extension(shown, html) {
  const run = CLOSING_RUN.exec(shown);
  if (!run || html.length < shown.length) return null;
  const closers = [...run[0].matchAll(/<\/([a-z][a-z0-9]*)>/g)];
  for (const [i, closer] of closers.entries()) {
    const at = run.index + closer.index;
    const rest = shown.slice(at);
    if (!html.startsWith(shown.slice(0, at)) || !html.endsWith(rest)) continue;
    const added = html.slice(at, html.length - rest.length);
    if (balanced(added)) return { added, depth: closers.length - i, parent: closer[1].toUpperCase() };
  }
  return null;
}

/**
 * A rendered Markdown text that can grow: `update(text)` on every change, `raw = true` for
 * the source as typed. The element keeps `data-frozen` (blocks drawn for good) for tests.
 */
export class MarkdownView {
  /**
   * `onEmpty(empty)` (optional) is called when the text becomes empty or stops being empty;
   * `onHidden(note)` when the text's controls and tag characters change (hidden.js ProseTally).
   */
  constructor(el, { onEmpty = null, onHidden = null } = {}) {
    this.el = el;
    this.el.classList.add("md");
    // an unclosed override or embedding cannot reach past the text (they are markers anyway)
    this.el.dir = "auto";
    this.rawEl = null;
    this.onEmpty = onEmpty;
    this.onHidden = onHidden;
    this.tally = new ProseTally();
    this.#reset();
  }

  /** Every node drawn, in order (the frozen parts', then the live part's). */
  get nodes() {
    return [...this.el.children].flatMap((part) => [...part.childNodes]);
  }

  /** Show `text`; only what changed since the last call is parsed and drawn. */
  update(text, { final = false } = {}) {
    text = text ?? "";
    if (text === this.text && (!final || this.final)) return;
    this.final = final;
    if (!text.startsWith(this.text)) this.#reset();
    if (!this.text !== !text) this.onEmpty?.(!text);
    const delta = text.slice(this.text.length);
    this.text = text;
    if (this.tally.add(delta, { more: !final })) this.onHidden?.(this.tally.note);
    if (this.rawEl && !this.rawEl.hidden) this.rawEl.replaceChildren(...proseNodes(text));
    if (!final && this.#grow(delta)) return;
    if (this.boundary === text.length) return; // all of it is drawn for good
    const tailLength = text.length - this.boundary;
    const big = tailLength > BIG_TAIL && !final && tailLength < this.parsedTailLength * 1.5 && !/\n\s*\n/.test(delta);
    if (big) return; // the open block is huge; wait until it grew enough to be worth a parse
    this.#renderTail();
  }

  #reset() {
    if (this.tally.note) this.onHidden?.(null);
    this.tally.reset();
    this.live = this.#newLive();
    this.el.replaceChildren(this.live);
    this.text = "";
    this.final = false;
    this.boundary = 0; // text before this offset is drawn for good
    this.parsedTailLength = 0;
    this.blocks = 0;
    // The open block: {source, kind, html, ...} for what `live` shows. `html` is the HTML the
    // live part is equal to, kept as text is appended (null where rows or nodes were changed).
    this.open = null;
  }

  #newLive() {
    const live = document.createElement("div");
    live.className = "md-live";
    return live;
  }

  /** Add `delta` to the open block without parsing it; false if it cannot. */
  #grow(delta) {
    const open = this.open;
    // (text with a control or tag character is drawn through the parser, which marks them)
    if (!open || hasProseHidden(delta)) return false;
    // (once the fence's opening line is complete: before that, text may be its info string;
    // and not on a line that could become the closing fence)
    const lastLine = open.source.slice(open.source.lastIndexOf("\n") + 1);
    if (open.kind === "fence" && open.code && !open.closed && open.source.includes("\n") && !/[`~]/.test(lastLine + delta)) {
      open.code.appendData(delta);
      open.source += delta;
      this.#shownAppend(delta, "</code>");
      return true;
    }
    if (open.kind === "table_open" && open.tbody) return this.#growTable(open);
    // Plain words on the same line of a paragraph or heading are text wherever they land: on
    // its first line, or on a later one that begins with a letter (a line beginning otherwise
    // may be a list item, a quote, a table's delimiter row, a setext underline…).
    const midLine = /[^\s]$/.test(lastLine) || /[^\s][ \t]+$/.test(lastLine);
    const plainLine = lastLine.length === open.source.length || /^\s*\p{L}/u.test(lastLine);
    if ((open.kind === "paragraph_open" || open.kind === "heading_open") && open.inline && midLine && plainLine && !INLINE_SYNTAX.test(delta)) {
      const last = open.inline.lastChild;
      if (last?.nodeType === Node.TEXT_NODE) last.appendData(delta);
      else open.inline.append(delta);
      open.source += delta;
      this.#shownAppend(delta, "</");
      return true;
    }
    return false;
  }

  /** Note in `open.html` that `text` was appended as text before its last `closer`. */
  #shownAppend(text, closer) {
    const open = this.open;
    if (open.html == null) return;
    const at = open.html.lastIndexOf(closer);
    open.html = `${open.html.slice(0, at)}${md.utils.escapeHtml(text)}${open.html.slice(at)}`;
  }

  #growTable(open) {
    const end = this.text.lastIndexOf("\n");
    const from = this.boundary + open.source.lastIndexOf("\n") + 1; // where the unfinished row starts
    if (end < from) return true; // the row is not finished: it shows when it is
    const lines = this.text.slice(from, end).split("\n");
    const blank = lines.findIndex((line) => !line.trim()); // a blank line ends the table
    const rows = blank === -1 ? lines : lines.slice(0, blank);
    if (open.tbody.rows.length + rows.length > MAX_TABLE_ROWS) return false;
    if (!rows.every((line) => line.trimStart().startsWith("|"))) return false; // the table ended
    for (const line of rows) {
      const env = {};
      const row = plainRow(line, open.aligns) ?? renderTokens(md.parse(`${open.head}${line}\n`, env), env).querySelector("tbody tr");
      if (!row) return false;
      if (open.partial) open.tbody.lastElementChild?.remove(); // the unfinished row drawn before
      open.partial = false;
      if (!open.tbody.parentNode) this.live.querySelector("table")?.append(open.tbody);
      open.tbody.append(row);
    }
    if (blank === -1) {
      open.source = this.text.slice(this.boundary, end + 1);
      return true;
    }
    this.#freezeLive();
    this.boundary = from + rows.reduce((n, line) => n + line.length + 1, 0) + lines[blank].length + 1;
    return false; // what follows the blank line, if anything, is drawn from scratch
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
    if (this.open && ended(this.open)) {
      this.#freezeLive();
      this.boundary = this.text.length;
    }
    this.el.dataset.frozen = String(this.blocks);
  }

  /** Draw finished blocks for good: what `live` already shows stays as it is. */
  #freeze(source, tokens, count, env) {
    if (count === 1 && this.#showsFinal(source, tokens, env)) {
      this.#freezeLive();
      return;
    }
    const part = document.createElement("div");
    part.className = "md-frozen";
    part.append(renderTokens(tokens, env));
    this.live.before(part);
    this.blocks += count;
    this.open = null;
  }

  /** Whether `live` shows the finished block `source` (`tokens`), once made to if it can be. */
  #showsFinal(source, tokens, env) {
    const open = this.open;
    if (!open) return false;
    if (open.html == null) return open.source.trimEnd() === source.trimEnd();
    if (open.inline?.lastChild?.nodeType === Node.TEXT_NODE) {
      // a finished paragraph or heading has no trailing spaces: drop those drawn for more words
      const text = open.inline.lastChild;
      const kept = text.data.replace(/[ \t]+$/, "");
      if (kept.length < text.length) {
        text.deleteData(kept.length, text.length - kept.length);
        open.html = open.html.replace(/[ \t]+(<\/[a-z0-9]+>\s*)$/, "$1");
      }
    }
    return this.#extendLive(tokensHtml(tokens, env));
  }

  /** The open block is final as shown: its part becomes frozen, and a new live part follows. */
  #freezeLive() {
    this.live.className = "md-frozen";
    this.live = this.#newLive();
    this.el.append(this.live);
    this.blocks += 1;
    this.open = null;
    this.el.dataset.frozen = String(this.blocks);
  }

  #drawLive(source, tokens, env) {
    if (this.open && source === this.open.source) return;
    const html = tokensHtml(tokens, env);
    if (!this.#extendLive(html)) this.live.replaceChildren(proseFragment(html));
    const kind = tokens[0]?.type ?? null;
    const open = { source, kind, html, code: null, closed: false, tbody: null, head: "", aligns: [], partial: false, inline: null };
    this.open = open;
    if ((kind === "paragraph_open" || kind === "heading_open") && this.live.childElementCount === 1) {
      open.inline = this.live.firstElementChild;
      // markdown-it trims the line's trailing spaces; words appended later need them back
      const trailing = /[^\s]([ \t]+)$/.exec(source)?.[1];
      if (trailing) {
        open.inline.append(trailing);
        this.#shownAppend(trailing, "</");
      }
    }
    if (kind === "fence") {
      open.closed = fenceClosed(source, tokens[0].markup);
      const code = this.live.querySelector("pre > code");
      if (code && !code.lastChild) code.append("");
      open.code = code?.lastChild?.nodeType === Node.TEXT_NODE ? code.lastChild : null;
      // markdown-it ends an open fence's content with a newline the source does not have yet
      // (unless the unfinished line is the closing fence)
      const unfinished = !source.endsWith("\n") && !fenceClosed(`${source}\n`, tokens[0].markup);
      if (open.code && unfinished && open.code.data.endsWith("\n")) {
        open.code.deleteData(open.code.length - 1, 1);
        const at = html.lastIndexOf("\n</code>");
        open.html = at === -1 ? null : html.slice(0, at) + html.slice(at + 1);
      }
    } else if (kind === "table_open") {
      const starts = lineStarts(source);
      open.html = null; // rows are appended to it as nodes
      // (a table with no rows yet has no body: its first row brings one)
      open.tbody = this.live.querySelector("tbody") ?? document.createElement("tbody");
      open.aligns = [...this.live.querySelectorAll("thead th")].map((th) => th.className);
      open.head = source.slice(0, starts[2] ?? source.length);
      open.partial = !source.endsWith("\n");
      if (starts.length < 3 || !open.head.endsWith("\n")) open.tbody = null;
    }
  }

  /** Draw `html` by appending to what `live` shows, if it only adds to it; false if not. */
  #extendLive(html) {
    const shown = this.open?.html;
    // (a flag whose tags began in what is shown is drawn again whole: its pieces would be marked)
    const grown = shown != null && !endsInFlagPart(this.open.source) && extension(shown, html);
    if (!grown) return false;
    if (!grown.added) return true; // the same HTML: nothing to draw
    let parent = this.live;
    for (let i = 0; i < grown.depth; i += 1) parent = parent?.lastElementChild;
    if (!parent || parent.tagName !== grown.parent || NO_PIECES_INTO.has(parent.tagName)) return false;
    appendProse(parent, proseFragment(grown.added, { part: true }));
    return true;
  }

  /** Show the source text instead of the rendering (or back). */
  set raw(on) {
    if (on && !this.rawEl) {
      this.rawEl = document.createElement("pre");
      this.rawEl.className = "md-raw";
      this.rawEl.dir = "auto";
      this.el.after(this.rawEl);
    }
    if (this.rawEl) {
      this.rawEl.replaceChildren(...proseNodes(this.text));
      this.rawEl.hidden = !on;
    }
    this.el.hidden = on;
  }

  get raw() {
    return Boolean(this.rawEl && !this.rawEl.hidden);
  }
}
