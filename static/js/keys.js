// Keyboard commands on the notebook, as in Jupyter's command mode: single keys move between
// steps and act on the selected one. They act by pressing the same buttons a mouse would (so the
// same checks, confirmations and error slots apply), and are off while the person types in a
// field, while a dialog is open, or with Ctrl, Alt or Meta held.

import { h } from "./dom.js";

/** The keys, in the order the help dialog lists them. */
export const KEYS = [
  ["j  ↓", "Next step"],
  ["k  ↑", "Previous step"],
  ["w  g", "Jump to the step waiting for you"],
  ["a", "Approve the selected step (or the one waiting)"],
  ["e", "Edit: focus the step's input or a call's arguments"],
  ["r", "Reject a call: focus its reason (Enter rejects)"],
  ["u", "Undo the last step"],
  ["s", "Stop the turn (asks first)"],
  ["?", "Show these keys"],
  ["Esc", "Leave a field (then the keys work again)"],
];

const TYPING = "input, textarea, select, [contenteditable=''], [contenteditable='true']";
const STEP = "article.cell-step";

export class StepKeys {
  /**
   * @param {HTMLElement} root      the notebook (#notebook)
   * @param {HTMLElement} toast     a visible role=status line for "nothing to do" messages
   */
  constructor(root, toast) {
    this.root = root;
    this.toast = toast;
    this.cursor = null; // the selected step's cell
    this.timer = 0;
    document.addEventListener("keydown", (e) => this.#key(e));
    // Escape in a field leaves it for the step around it, so the keys work again.
    root.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && e.target.matches?.(TYPING)) {
        const cell = e.target.closest(STEP);
        if (cell) this.#select(cell);
      }
    });
    root.addEventListener("focusin", (e) => {
      const cell = e.target.closest?.(STEP);
      if (cell) this.#mark(cell);
    });
  }

  #key(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest?.(TYPING) || document.querySelector("dialog[open]")) return;
    // Arrows keep their own meaning on buttons, links and the graph; on a step or the page they move.
    const arrow = event.key === "ArrowDown" || event.key === "ArrowUp";
    if (arrow && !(event.target === document.body || event.target.matches?.(STEP))) return;
    const act = {
      j: () => this.#move(1), ArrowDown: () => this.#move(1),
      k: () => this.#move(-1), ArrowUp: () => this.#move(-1),
      w: () => this.#toWaiting(), g: () => this.#toWaiting(),
      a: () => this.#approve(), e: () => this.#edit(), r: () => this.#reject(),
      u: () => this.#undo(), s: () => this.#stop(), "?": () => this.help(),
    }[event.key];
    if (!act) return;
    event.preventDefault();
    act();
  }

  #steps() {
    return [...this.root.querySelectorAll(STEP)].filter((cell) => cell.offsetParent !== null);
  }

  /** The selected step: the one holding focus, else the last selected, else the waiting one. */
  #current() {
    const focused = document.activeElement?.closest?.(STEP);
    if (focused) return focused;
    if (this.cursor?.isConnected) return this.cursor;
    return this.#waiting();
  }

  #waiting() {
    return this.root.querySelector(`${STEP}.is-waiting`) || this.root.querySelector(`${STEP}:has([data-action='approve']:not(:disabled))`);
  }

  #mark(cell) {
    if (this.cursor && this.cursor !== cell) this.cursor.classList.remove("is-cursor");
    this.cursor = cell;
    cell.classList.add("is-cursor");
  }

  #select(cell) {
    this.#mark(cell);
    cell.focus({ preventScroll: true });
    cell.scrollIntoView({ block: "nearest", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
  }

  #move(by) {
    const steps = this.#steps();
    if (!steps.length) return this.#say("No steps yet.");
    const at = steps.indexOf(this.#current());
    const next = at < 0 ? (by > 0 ? 0 : steps.length - 1) : Math.max(0, Math.min(steps.length - 1, at + by));
    this.#select(steps[next]);
  }

  #toWaiting() {
    const cell = this.#waiting();
    if (!cell) return this.#say("No step is waiting for you.");
    this.#select(cell);
  }

  /** The step to act on for `selector`: the selected one if it has it, else the waiting one. */
  #target(selector) {
    const current = this.#current();
    if (current?.querySelector(selector)) return current;
    const waiting = this.#waiting();
    return waiting?.querySelector(selector) ? waiting : null;
  }

  #approve() {
    const cell = this.#target("[data-action='approve']");
    const button = cell?.querySelector("[data-action='approve']");
    if (!button || button.disabled) return this.#say("No step is waiting for your approval.");
    this.#mark(cell);
    button.click();
  }

  #edit() {
    const cell = this.#target("[data-field='input'], [data-field^='args:']");
    const field = cell && [...cell.querySelectorAll("[data-field='input'], [data-field^='args:']")].find((f) => !f.disabled);
    if (!field) return this.#say("Nothing to edit: only a step waiting to run can be edited.");
    this.#mark(cell);
    field.focus();
  }

  #reject() {
    const focusedCard = document.activeElement?.closest?.(".tool-card");
    const cell = this.#target("[data-field^='reason:']");
    const fields = cell ? [...cell.querySelectorAll("[data-field^='reason:']")].filter((f) => !f.disabled) : [];
    const field = fields.find((f) => focusedCard?.contains(f)) || fields[0];
    if (!field) return this.#say("No tool call is waiting to be rejected.");
    this.#mark(cell);
    field.focus();
  }

  #undo() {
    const cell = this.#target("[data-action='undo']") || this.root.querySelector(`${STEP}:has([data-action='undo'])`);
    const button = cell?.querySelector("[data-action='undo']");
    if (!button || button.disabled) return this.#say("There is no step to undo now.");
    this.#mark(cell);
    button.click();
  }

  #stop() {
    const button = this.root.querySelector("#abandon-button");
    if (!button || button.disabled) return this.#say("Nothing to stop: no turn is under way.");
    button.click(); // asks for confirmation first
  }

  /** The dialog listing the keys. */
  help() {
    const dialog = h(
      "dialog",
      { class: "confirm-dialog keys-dialog", "aria-labelledby": "keys-title" },
      h("h2", { id: "keys-title" }, "Keyboard"),
      h("p", {}, "When no field has the focus:"),
      h("table", { class: "keys-table" }, h("tbody", {}, KEYS.map(([keys, what]) => h("tr", {}, h("td", {}, ...keys.split("  ").map((k) => h("kbd", {}, k))), h("td", {}, what))))),
      h("div", { class: "confirm-buttons" }, h("button", { type: "button", class: "keys-close" }, "Close")),
    );
    const before = document.activeElement;
    dialog.querySelector(".keys-close").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (before instanceof HTMLElement && before.isConnected) before.focus();
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector(".keys-close").focus();
  }

  /** A short visible note (role=status) when a key has nothing to act on. */
  #say(text) {
    this.toast.textContent = text;
    this.toast.hidden = false;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.toast.hidden = true;
    }, 4000);
  }
}
