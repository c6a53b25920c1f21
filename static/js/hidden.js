// Characters a page does not show, or shows somewhere other than where they are: bidirectional
// controls (a right-to-left override reverses the text after it), zero-width and other
// default-ignorable characters, tag characters (invisible ASCII), control and format characters,
// line and paragraph separators. A model's tool name or arguments may carry them so that a
// reviewer approves something other than what runs ("Trojan Source", "ASCII smuggling"). Where a
// person reads what will run, they are shown: as JSON escapes in JSON (which parse back to the
// same characters, so an edited argument keeps them), as [U+XXXX] in plain text, and named in a
// note above the arguments. An emoji's own joiners and variation selectors are left alone.

const HIDDEN = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}\u2028\u2029]/gu;
const PLAIN_WHITESPACE = new Set(["\t", "\n", "\r"]);
// what may stand before an emoji's joiner or variation selector, and after the joiner
const EMOJI_BEFORE = /(?:\p{Extended_Pictographic}|[\u{1F3FB}-\u{1F3FF}\uFE0F])$/u;
const EMOJI_AFTER = /^\p{Extended_Pictographic}/u;
const KEYCAP_BEFORE = /[#*0-9]$/u;

const NAMES = new Map([
  [0x202e, "right-to-left override"],
  [0x202d, "left-to-right override"],
  [0x202b, "right-to-left embedding"],
  [0x202a, "left-to-right embedding"],
  [0x202c, "pop directional formatting"],
  [0x2067, "right-to-left isolate"],
  [0x2066, "left-to-right isolate"],
  [0x2068, "first strong isolate"],
  [0x2069, "pop directional isolate"],
  [0x200f, "right-to-left mark"],
  [0x200e, "left-to-right mark"],
  [0x061c, "Arabic letter mark"],
  [0x200b, "zero-width space"],
  [0x200c, "zero-width non-joiner"],
  [0x200d, "zero-width joiner"],
  [0x2060, "word joiner"],
  [0xfeff, "zero-width no-break space"],
  [0x00ad, "soft hyphen"],
  [0x2028, "line separator"],
  [0x2029, "paragraph separator"],
]);

function isEmojiPart(text, char, index) {
  const before = text.slice(Math.max(0, index - 2), index);
  if (char === "\u200d") return EMOJI_BEFORE.test(before) && EMOJI_AFTER.test(text.slice(index + 1, index + 3));
  if (char === "\ufe0f" || char === "\ufe0e") return EMOJI_BEFORE.test(before) || KEYCAP_BEFORE.test(before);
  return false;
}

function replaceHidden(text, show) {
  return text.replace(HIDDEN, (char, index, whole) => (PLAIN_WHITESPACE.has(char) || isEmojiPart(whole, char, index) ? char : show(char)));
}

const hex = (unit) => unit.toString(16).padStart(4, "0");

/** `json` (JSON text) with each hidden character as its \u escape (UTF-16 units): the same value. */
export function revealJson(json) {
  return replaceHidden(json, (char) => Array.from({ length: char.length }, (_, i) => `\\u${hex(char.charCodeAt(i))}`).join(""));
}

/** `text` with each hidden character shown as [U+XXXX]. */
export function revealText(text) {
  return replaceHidden(String(text ?? ""), (char) => `[U+${hex(char.codePointAt(0)).toUpperCase()}]`);
}

function nameOf(point) {
  if (NAMES.has(point)) return NAMES.get(point);
  if (point >= 0xe0000 && point <= 0xe007f) return "tag character";
  if ((point >= 0xfe00 && point <= 0xfe0f) || (point >= 0xe0100 && point <= 0xe01ef)) return "variation selector";
  return "invisible character";
}

/** Count one more of code point `point` in `found` (name -> {name, first, count}). */
function countIn(found, point) {
  const name = nameOf(point);
  const entry = found.get(name) || { name, first: point, count: 0 };
  entry.count += 1;
  found.set(name, entry);
}

/** The hidden characters in `value`'s strings (keys too), with how often each occurs, by name. */
export function hiddenIn(value) {
  const found = new Map();
  const visit = (item) => {
    if (typeof item === "string") {
      for (const match of item.matchAll(HIDDEN)) {
        if (PLAIN_WHITESPACE.has(match[0]) || isEmojiPart(item, match[0], match.index)) continue;
        countIn(found, match[0].codePointAt(0));
      }
    } else if (Array.isArray(item)) item.forEach(visit);
    else if (item && typeof item === "object") {
      for (const [key, inner] of Object.entries(item)) {
        visit(key);
        visit(inner);
      }
    }
  };
  visit(value);
  return [...found.values()];
}

const MAX_NAMED = 4;

/** "Hidden characters: 2 × right-to-left override (U+202E), …" for hiddenIn's `found`. */
function described(found) {
  const named = found.slice(0, MAX_NAMED).map((e) => `${e.count > 1 ? `${e.count} × ` : ""}${e.name} (U+${hex(e.first).toUpperCase()}${e.count > 1 && e.name.endsWith("character") ? "…" : ""})`);
  const more = found.length - MAX_NAMED;
  if (more > 0) named.push(`${more} more kind${more > 1 ? "s" : ""}`);
  return `Hidden characters: ${named.join(", ")}.`;
}

function noteElement() {
  const note = document.createElement("p");
  note.className = "hidden-chars";
  note.setAttribute("role", "note");
  return note;
}

/**
 * A note naming the hidden characters of a call (its tool name and arguments), or null if it
 * has none: the reviewer sees that what they read is not all there is.
 */
export function hiddenNote(toolName, args) {
  const found = hiddenIn([toolName, args]);
  if (!found.length) return null;
  const note = noteElement();
  note.textContent = `${described(found)} Shown as \\u escapes or [U+…]; the call runs with them.`;
  return note;
}

// --- Prose -----------------------------------------------------------------------------------
// In the model's prose (its Markdown answers) only what changes how the text reads is shown:
// bidirectional controls and marks, which reorder what follows them, and tag characters, which
// carry invisible ASCII. Zero-width joiners and non-joiners, soft hyphens and the like are
// ordinary in prose (emoji, Persian and Indic scripts) and right-to-left letters are text: those
// are drawn as they are. A control becomes a marker ([U+202E], named in its title); a run of tag
// characters becomes one marker showing the ASCII it spells. Markers replace the characters in
// the page only: what is stored, sent and exported is the text as the model wrote it.
// The flags of England, Scotland and Wales are emoji made of tag characters (a black flag, the
// tags "gbeng", "gbsct" or "gbwls", a cancel tag): those three are drawn as the flags they are.
// Any other run of tags after a black flag is marked (it could spell anything).

const BLACK_FLAG = "\u{1F3F4}";
const SUBDIVISION_FLAGS = ["gbeng", "gbsct", "gbwls"].map((code) => BLACK_FLAG + Array.from(code, (c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join("") + "\u{E007F}");
// the longest beginning of one of them (UTF-16 units: all but the cancel tag)
const FLAG_PART_MOST = SUBDIVISION_FLAGS[0].length - 2;
// group 1: one of those flags (left as it is); otherwise a control, or a run of tag characters
const PROSE_HIDDEN = new RegExp(`(${SUBDIVISION_FLAGS.join("|")})|[\\u202a-\\u202e\\u2066-\\u2069\\u200e\\u200f\\u061c]|[\\u{e0000}-\\u{e007f}]+`, "gu");
// (not global: test() keeps no state, which matchAll would start from)
const HAS_PROSE_HIDDEN = new RegExp(PROSE_HIDDEN.source, "u");
const TAG_BASE = 0xe0000;

/** Whether `text` has a character prose shows as a marker. */
export function hasProseHidden(text) {
  if (!HAS_PROSE_HIDDEN.test(text)) return false;
  for (const match of text.matchAll(PROSE_HIDDEN)) if (!match[1]) return true;
  return false; // only flags
}

/** Where `text` ends with the beginning of a flag that more text may complete (-1: it doesn't). */
function flagBegunAt(text) {
  const tail = text.slice(-FLAG_PART_MOST); // (a stream's text: never walk all of it)
  const at = tail.lastIndexOf(BLACK_FLAG);
  if (at < 0) return -1;
  const rest = tail.slice(at);
  return SUBDIVISION_FLAGS.some((flag) => flag.length > rest.length && flag.startsWith(rest)) ? text.length - tail.length + at : -1;
}

/** Whether `text` ends with a black flag and tags that more text may make one of the flags. */
export function endsInFlagPart(text) {
  return flagBegunAt(text) >= 0;
}

/** What a run of tag characters spells: their ASCII, any other tag as [U+XXXXX]. */
function tagText(run) {
  return Array.from(run, (char) => {
    const ascii = char.codePointAt(0) - TAG_BASE;
    return ascii >= 0x20 && ascii < 0x7f ? String.fromCharCode(ascii) : `[U+${hex(char.codePointAt(0)).toUpperCase()}]`;
  }).join("");
}

function marker(match) {
  const span = document.createElement("span");
  span.dir = "ltr";
  const point = match.codePointAt(0);
  if (point >= TAG_BASE) {
    span.className = "hidden-char hidden-tags";
    span.title = "tag characters: text a page does not show, here as the ASCII it spells";
    span.textContent = tagText(match);
  } else {
    span.className = "hidden-char";
    span.title = `${NAMES.get(point)}: a control that changes the order the text is drawn in, shown instead of applied`;
    span.textContent = `[U+${hex(point).toUpperCase()}]`;
  }
  return span;
}

/** `text` as nodes: its text, with a marker in place of each control and run of tag characters. */
export function proseNodes(text) {
  text = String(text ?? "");
  const nodes = [];
  let from = 0;
  for (const match of text.matchAll(PROSE_HIDDEN)) {
    if (match[1]) continue; // a flag: text
    if (match.index > from) nodes.push(document.createTextNode(text.slice(from, match.index)));
    nodes.push(marker(match[0]));
    from = match.index + match[0].length;
  }
  if (from < text.length || !nodes.length) nodes.push(document.createTextNode(text.slice(from)));
  return nodes;
}

const isTagMarker = (node) => node?.nodeType === Node.ELEMENT_NODE && node.classList.contains("hidden-tags");

/**
 * Append `piece` (nodes from proseNodes or a fragment from revealProseIn) to `parent`: a run of
 * tag characters that arrives in several pieces of a stream stays one marker.
 */
export function appendProse(parent, piece) {
  const first = piece.firstChild;
  if (isTagMarker(first) && isTagMarker(parent.lastChild)) {
    parent.lastChild.textContent += first.textContent;
    first.remove();
  }
  parent.append(piece);
}

/** `text` without the characters prose shows as markers (what "Remove them" leaves). */
export function withoutProseHidden(text) {
  return String(text ?? "").replace(PROSE_HIDDEN, (match, flag) => flag ?? "");
}

/** `text` as a string with each control and run of tag characters as its marker's text. */
export function revealProse(text) {
  return String(text ?? "").replace(PROSE_HIDDEN, (match, flag) => flag ?? (match.codePointAt(0) >= TAG_BASE ? `[tags: ${tagText(match)}]` : `[U+${hex(match.codePointAt(0)).toUpperCase()}]`));
}

/** Replace, under `root` (an element or fragment), the hidden characters of prose by markers. */
export function revealProseIn(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) if (hasProseHidden(node.data)) found.push(node);
  for (const node of found) node.replaceWith(...proseNodes(node.data));
  for (const el of root.querySelectorAll?.("[title]") ?? []) el.title = revealProse(el.title);
  return root;
}

/**
 * The prose-hidden characters of a text that grows: `add(piece)` counts those of the text
 * appended, `note` is the text of the note naming them (null while there are none).
 */
export class ProseTally {
  #found = new Map();
  // the end of the text so far while it may be a flag the next piece completes
  #pending = "";

  /** @param {string} writer  who wrote the text, for the note ("the model", "you") */
  constructor(writer = "the model") {
    this.writer = writer;
  }

  /**
   * Count the hidden characters of `piece`, appended to the text so far; `more`: more text may
   * follow (a stream), so a flag begun at its end waits for the rest. Whether the count changed.
   */
  add(piece, { more = false } = {}) {
    let text = this.#pending + piece;
    this.#pending = "";
    if (more) {
      const at = flagBegunAt(text);
      if (at >= 0) [text, this.#pending] = [text.slice(0, at), text.slice(at)];
    }
    if (!hasProseHidden(text)) return false;
    for (const match of text.matchAll(PROSE_HIDDEN)) {
      if (match[1]) continue;
      for (const char of match[0]) countIn(this.#found, char.codePointAt(0));
    }
    return true;
  }

  reset() {
    this.#found.clear();
    this.#pending = "";
  }

  /** "Hidden characters: …" naming what was counted, or null while there is nothing. */
  get found() {
    return this.#found.size ? described([...this.#found.values()]) : null;
  }

  get note() {
    return this.#found.size ? `${this.found} Shown as markers; the text is kept as ${this.writer} wrote it.` : null;
  }
}

/** A note for prose (hidden while `text` is null). */
export function proseNote(note = noteElement(), text = null) {
  note.hidden = text == null;
  note.textContent = text ?? "";
  return note;
}
