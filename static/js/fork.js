// Fork here: a button in the head of every completed step (live notebook and trace) that asks
// the server for a new notebook stored as this one stood right after that step
// (POST /api/tasks/<id>/fork/, runs/store/fork.py), then opens it.

import { domId, h, postJson } from "./dom.js";

export class ForkButtons {
  constructor(url) {
    this.url = url;
    /** @type {Map<string, HTMLElement>} step id -> the button's wrapper */
    this.slots = new Map();
  }

  /** Offer Fork here on the given steps that completed; take it away from the others. */
  sync(model, stepIds) {
    for (const stepId of stepIds) {
      const step = model.steps.get(stepId);
      const head = document.getElementById(domId("step", stepId))?.querySelector(".cell-head");
      if (!step || !head) continue;
      let slot = this.slots.get(stepId);
      if (!slot) {
        slot = this.#slot(stepId);
        this.slots.set(stepId, slot);
      }
      if (slot.parentNode !== head) head.append(slot);
      slot.hidden = step.dropped || step.status !== "completed";
    }
  }

  #slot(stepId) {
    const error = h("span", { class: "control-error fork-error", role: "alert", hidden: true });
    const button = h("button", { type: "button", class: "button-link fork-here", title: "A new notebook as this one stood right after this step, to edit and go on from there" }, "Fork here");
    button.addEventListener("click", async () => {
      button.disabled = true;
      error.hidden = true;
      const answer = await postJson(this.url, { step_id: stepId });
      if (answer.url) {
        window.location.assign(answer.url);
        return;
      }
      button.disabled = false;
      error.textContent = answer.error;
      error.hidden = false;
    });
    return h("span", { class: "fork-slot" }, button, error);
  }
}
