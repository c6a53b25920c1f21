// Text a person pastes can carry characters they cannot see: a page or a document copied from
// may hold tag characters spelling an instruction for the model ("ASCII smuggling"), or a
// right-to-left override that makes a figure read backwards. A message box names them as soon
// as they are there (the box itself cannot show them) and offers to take them out; sent as they
// are, they reach the model as written, and the message's cell shows them as markers.

import { h } from "./dom.js";
import { ProseTally, hasProseHidden, withoutProseHidden } from "./hidden.js";

/**
 * Watch `text` (a textarea) and keep a warning right after `after` (default: the textarea)
 * while it holds hidden characters. Returns the warning element.
 * @param {HTMLTextAreaElement} text
 * @param {Element} [after]
 */
export function watchHiddenInput(text, after = text) {
  const said = h("span", {});
  const remove = h("button", { type: "button", class: "button-link" }, "Remove them");
  const warning = h("p", { class: "hidden-chars hidden-input", role: "status", hidden: true }, said, " ", remove);
  after.after(warning);
  if (text.id) {
    warning.id = `${text.id}-hidden`;
    text.setAttribute("aria-describedby", `${text.getAttribute("aria-describedby") || ""} ${warning.id}`.trim());
  }
  const show = () => {
    const value = text.value;
    const tally = new ProseTally("you");
    if (hasProseHidden(value)) tally.add(value);
    warning.hidden = tally.found === null;
    said.textContent = tally.found
      ? `${tally.found} This box does not show them, and they reach the model as they are: text copied from a page or a document can carry an instruction this way.`
      : "";
  };
  remove.addEventListener("click", () => {
    text.value = withoutProseHidden(text.value);
    text.dispatchEvent(new Event("input", { bubbles: true }));
    text.focus();
  });
  text.addEventListener("input", show);
  show();
  return warning;
}
