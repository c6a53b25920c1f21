// A confirmation for actions that cannot be taken back (Stop, revoking an API token): a modal
// <dialog> with a heading, what will happen, and two buttons; Escape or Cancel says no. Focus
// starts on Cancel, so a stray Enter does not confirm, and goes back where it was afterwards.

import { h } from "./dom.js";

let counter = 0;

/**
 * Ask the person; resolves true only if they pressed the confirm button.
 * @param {{title: string, text: string | Node | Array<string | Node>, confirm: string, cancel?: string}} what
 */
export function confirmAction({ title, text, confirm, cancel = "Cancel" }) {
  const id = `confirm-${++counter}`;
  const before = document.activeElement;
  const no = h("button", { type: "button", class: "confirm-cancel", value: "no" }, cancel);
  const yes = h("button", { type: "button", class: "button danger confirm-yes", value: "yes" }, confirm);
  const dialog = h(
    "dialog",
    { class: "confirm-dialog", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-text` },
    h("h2", { id: `${id}-title` }, title),
    h("p", { id: `${id}-text` }, text),
    h("div", { class: "confirm-buttons" }, no, yes),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    let answer = false;
    no.addEventListener("click", () => dialog.close());
    yes.addEventListener("click", () => {
      answer = true;
      dialog.close();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (before instanceof HTMLElement && before.isConnected) before.focus();
      resolve(answer);
    });
    dialog.showModal();
    no.focus();
  });
}

/** What the server needs to act on a destructive form (runs/web/confirming.py): without it, it
 * asks on a page of its own, as for a click before this module ran or with JavaScript off. */
export const CONFIRMED = { name: "confirmed", value: "yes" };

/** Ask before each form matching `selector` submits; `ask(form)` gives confirmAction's options.
 * A yes sends the form with CONFIRMED, so the server acts at once. */
export function confirmForms(selector, ask) {
  for (const form of document.querySelectorAll(selector)) {
    form.addEventListener("submit", async (event) => {
      if (form.dataset.confirmed === "true") return;
      event.preventDefault();
      if (!(await confirmAction(ask(form)))) return;
      form.dataset.confirmed = "true";
      form.append(h("input", { type: "hidden", ...CONFIRMED }));
      form.requestSubmit();
    });
    // until this runs a click submits unasked; tests (and anything else) can wait for it
    form.dataset.confirmReady = "true";
  }
}
