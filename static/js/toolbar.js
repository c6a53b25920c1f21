// The notebook's toolbar (approval mode, Stop) and composer (the next message), whose markup
// comes from the template; greyed out as selectors.permissions says.

import { isCtrlEnter } from "./actions.js";
import { confirmAction } from "./confirm.js";
import { watchHiddenInput } from "./hidden_input.js";
import { watchLength } from "./length_limit.js";

/** The notebook's toolbar (mode, stop) and composer (send a message), from the template. */
export class NotebookControls {
  /**
   * @param {import("./actions.js").ActionBus} bus
   * @param {{mode: HTMLSelectElement, abandon: HTMLButtonElement, form: HTMLFormElement, text: HTMLTextAreaElement, send: HTMLButtonElement, hint: HTMLElement}} els
   */
  constructor(bus, els) {
    this.bus = bus;
    this.els = els;
    this.model = null;
    els.mode.addEventListener("change", async () => {
      const mode = els.mode.value;
      const ok = await bus.act("mode", "set_mode", { mode }, null);
      if (!ok && this.model?.mode) els.mode.value = this.model.mode;
    });
    els.abandon.addEventListener("click", async () => {
      const ok = await confirmAction({
        title: "Stop this turn?",
        text: "A step that is running is cut off and nothing after it runs. A tool that is a plain function cannot be stopped part way: it finishes, and its effect may happen; its card says so. The turn cannot be resumed; its steps stay in the notebook and the trace.",
        confirm: "Stop the turn",
        cancel: "Keep going",
      });
      if (ok) bus.act("abandon", "abandon", {}, els.abandon);
    });
    els.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#send();
    });
    els.text.addEventListener("keydown", (event) => {
      if (isCtrlEnter(event)) {
        event.preventDefault();
        this.#send();
      }
    });
    els.text.addEventListener("input", () => bus.setError("send", null));
    this.length = watchLength(els.text, els.count);
    watchHiddenInput(els.text, els.count);
  }

  async #send() {
    const text = this.els.text.value.trim();
    if (!text) {
      this.bus.setError("send", "Type a message first.");
      return;
    }
    if (this.length.tooLong()) {
      this.els.text.focus(); // the counter under the box says why (once, not twice)
      return;
    }
    if (this.els.send.disabled) return;
    const picker = this.els.images;
    if (picker?.busy) {
      this.bus.setError("send", "Wait for the images to finish uploading.");
      return;
    }
    const fields = picker?.ids().length ? { text, images: picker.ids() } : { text };
    const ok = await this.bus.act("send", "send_message", fields, this.els.send);
    if (ok) {
      this.els.text.value = "";
      picker?.clear();
    }
  }

  update(model, perms) {
    this.model = model;
    const { mode, abandon, send, text, hint } = this.els;
    if (model.mode && document.activeElement !== mode && mode.value !== model.mode) mode.value = model.mode;
    mode.disabled = !perms.setMode;
    abandon.dataset.allowed = String(perms.abandon);
    if (!abandon.hasAttribute("aria-busy")) abandon.disabled = !perms.abandon;
    send.dataset.allowed = String(perms.send);
    if (!send.hasAttribute("aria-busy")) send.disabled = !perms.send;
    text.setAttribute("aria-disabled", String(!perms.send));
    // While nothing can be sent the composer leaves the foot of the window and waits at the end
    // of the notebook, so it covers no waiting step's controls; a draft being typed keeps it.
    this.els.form.classList.toggle("composer-docked", !perms.send && !text.value.trim());
    hint.textContent = !perms.connected
      ? perms.offline
      : perms.send
        ? "Ctrl+Enter sends."
        : "Finish or stop the current turn to send another message.";
  }
}
