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

/** The hidden characters in `value`'s strings (keys too), with how often each occurs, by name. */
export function hiddenIn(value) {
  const found = new Map();
  const visit = (item) => {
    if (typeof item === "string") {
      for (const match of item.matchAll(HIDDEN)) {
        if (PLAIN_WHITESPACE.has(match[0]) || isEmojiPart(item, match[0], match.index)) continue;
        const point = match[0].codePointAt(0);
        const name = nameOf(point);
        const entry = found.get(name) || { name, first: point, count: 0 };
        entry.count += 1;
        found.set(name, entry);
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

/**
 * A note naming the hidden characters of a call (its tool name and arguments), or null if it
 * has none: the reviewer sees that what they read is not all there is.
 */
export function hiddenNote(toolName, args) {
  const found = hiddenIn([toolName, args]);
  if (!found.length) return null;
  const named = found.slice(0, MAX_NAMED).map((e) => `${e.count > 1 ? `${e.count} × ` : ""}${e.name} (U+${hex(e.first).toUpperCase()}${e.count > 1 && e.name.endsWith("character") ? "…" : ""})`);
  if (found.length > MAX_NAMED) named.push(`${found.length - MAX_NAMED} more kinds`);
  const note = document.createElement("p");
  note.className = "hidden-chars";
  note.setAttribute("role", "note");
  note.textContent = `Hidden characters: ${named.join(", ")}. Shown as \\u escapes or [U+…]; the call runs with them.`;
  return note;
}
