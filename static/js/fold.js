// Long texts fold in their cell: the first lines show, a button shows the rest (and folds it
// again). Nothing is cut: the whole text is in the page, only its height is limited.

import { h } from "./dom.js";
import { proseNodes } from "./hidden.js";

const FOLD_CHARS = 1200;
const FOLD_LINES = 16;
const shown = new WeakMap(); // box -> the text it shows

/** True when `text` is long enough to fold. */
export function isLong(text) {
  if (text.length > FOLD_CHARS) return true;
  let lines = 1;
  for (let i = text.indexOf("\n"); i >= 0 && lines <= FOLD_LINES; i = text.indexOf("\n", i + 1)) lines++;
  return lines > FOLD_LINES;
}

/**
 * Fold `body` (already showing `text`) when the text is long; returns the toggle that unfolds it,
 * to place after it, or null.
 */
export function foldToggle(body, text) {
  if (!isLong(text)) return null;
  body.classList.add("is-folded");
  const size = `${text.length.toLocaleString("en")} characters`;
  const toggle = h("button", { type: "button", class: "button-link fold-toggle", "aria-expanded": "false" }, `Show all (${size})`);
  toggle.addEventListener("click", () => {
    const folded = body.classList.toggle("is-folded");
    toggle.setAttribute("aria-expanded", String(!folded));
    toggle.textContent = folded ? `Show all (${size})` : "Show less";
  });
  return toggle;
}

/**
 * Put `text` into `box` as a .cell-text (with `textClass` too), folded when it is long. `prose`:
 * its bidirectional controls and tag characters drawn as markers (hidden.js), isolated (dir=auto).
 */
export function setFoldableText(box, text, textClass = "", { prose = false } = {}) {
  if (shown.get(box) === text) return;
  shown.set(box, text);
  const body = prose
    ? h("div", { class: `cell-text ${textClass}`, dir: "auto" }, ...proseNodes(text))
    : h("div", { class: `cell-text ${textClass}` }, text);
  const toggle = foldToggle(body, text);
  box.replaceChildren(...(toggle ? [body, toggle] : [body]));
}
