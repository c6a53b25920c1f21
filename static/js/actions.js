// Sending actions and reporting refusals. Each action goes out with a request id (socket.js);
// an `error` reply is shown next to the control that sent it, in an error slot keyed by what the
// control acts on ("approve:<step>", "args:<tool>", "mode", …), and survives controls redraws.

import { h } from "./dom.js";

const ERROR_SLOT = "data-error-slot";

/** Shared by the step controls, the toolbar and the composer: send and report. */
export class ActionBus {
  /** @param {(action: string, fields: object) => Promise<object>} send */
  constructor(send) {
    this.send = send;
    /** @type {Map<string, string>} */
    this.errors = new Map();
  }

  /** Send an action; returns true on `ack`. Shows a refusal in the `slot` error element(s). */
  async act(slot, action, fields = {}, button = null) {
    this.setError(slot, null);
    if (button) {
      button.disabled = true;
      button.setAttribute("aria-busy", "true");
    }
    const reply = await this.send(action, fields);
    if (button) {
      button.removeAttribute("aria-busy");
      button.disabled = button.dataset.allowed === "false";
    }
    if (reply.type === "error") {
      this.setError(slot, describeError(reply));
      return false;
    }
    return true;
  }

  setError(slot, message) {
    if (message) this.errors.set(slot, message);
    else this.errors.delete(slot);
    for (const el of document.querySelectorAll(`[${ERROR_SLOT}="${CSS.escape(slot)}"]`)) showError(el, message);
  }

  /** An error slot element, filled with the current error for `slot` if there is one. */
  slot(slot, id) {
    const el = h("p", { class: "control-error", id, [ERROR_SLOT]: slot, role: "alert", hidden: true });
    showError(el, this.errors.get(slot) || null);
    return el;
  }
}

function showError(el, message) {
  el.textContent = message || "";
  el.hidden = !message;
  const field = el.id ? document.querySelector(`[aria-describedby~="${el.id}"]`) : null;
  if (field && field.matches("textarea, input, select")) {
    if (message) field.setAttribute("aria-invalid", "true");
    else field.removeAttribute("aria-invalid");
  }
}

function describeError(reply) {
  const reason = reply.reason || "The server refused this.";
  return reply.code && reply.code !== "offline" ? `${reason} (${reply.code})` : reason;
}

export function isCtrlEnter(event) {
  return event.key === "Enter" && (event.ctrlKey || event.metaKey);
}
