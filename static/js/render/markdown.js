// Markdown for assistant text: CommonMark + GitHub tables and strikethrough, by markdown-it.
// Raw HTML in the text is shown as text (`html: false`), images are not loaded, long tables and
// code blocks are cut, and every fragment passes the sanitiser before it reaches the page, then
// shows the bidirectional controls and tag characters in it as markers (hidden.js).
// markdown_stream.js draws a growing text with it; text.js builds the page's text blocks.

import MarkdownIt from "../../vendor/markdown-it/markdown-it.esm.min.mjs";
import { revealProseIn } from "../hidden.js";
import { sanitize, sanitizePart } from "./sanitize.js";

/** Table rows and code lines drawn per block; the rest is counted (the raw view has it all). */
export const MAX_TABLE_ROWS = 200;
export const MAX_CODE_LINES = 400;

export const md = new MarkdownIt("commonmark", { html: false, breaks: true, linkify: false });
md.enable(["table", "strikethrough"]);
md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const alt = md.utils.escapeHtml(token.content || "image");
  const src = md.utils.escapeHtml(token.attrGet("src") || "");
  return `<span class="md-image" title="Image not loaded: ${src}">[image: ${alt}]</span>`;
};

// GFM column alignment as a class, never a style attribute: the page's CSP refuses inline styles
// (even in the inert document the sanitiser parses into, where it would still be reported).
const ALIGN_STYLE = /^text-align:(left|right|center)$/;
for (const rule of ["th_open", "td_open"]) {
  md.renderer.rules[rule] = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const align = ALIGN_STYLE.exec(token.attrGet("style") || "");
    if (align) {
      token.attrs = token.attrs.filter(([name]) => name !== "style");
      token.attrJoin("class", `align-${align[1]}`);
    }
    return self.renderToken(tokens, idx, options);
  };
}

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

/** Parsed tokens as HTML, not yet sanitised (long tables and code blocks cut). */
export function tokensHtml(tokens, env) {
  return md.renderer.render(capTokens(tokens), md.options, env);
}

/**
 * Markdown-it's `html` as a sanitised DocumentFragment whose hidden characters show as markers;
 * `part`: a piece added inside an element (its leading and trailing space count).
 */
export function proseFragment(html, { part = false } = {}) {
  return revealProseIn(part ? sanitizePart(html) : sanitize(html));
}

/** Parsed tokens as a sanitised DocumentFragment. */
export function renderTokens(tokens, env) {
  return proseFragment(tokensHtml(tokens, env));
}

/** Markdown `text` as a sanitised DocumentFragment (no streaming state). */
export function renderMarkdown(text) {
  const env = {};
  return renderTokens(md.parse(text, env), env);
}

