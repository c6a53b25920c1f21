// Reviewers' annotations in the trace: a comment and a thumbs up/down on any step, tool call
// or answer, stored through /api/tasks/<id>/annotations/ (runs/annotations.py) and shown under
// what they are about.

import { domId, h } from "./dom.js";

const RATING = { 1: "▲ good", [-1]: "▼ bad", 0: "" };

function keyOf(target, { turnId = "", stepId = "", toolId = "" }) {
  return `${target}|${turnId}|${stepId}|${toolId}`;
}

function noteItem(note) {
  return h(
    "li",
    { class: `annotation rating-${note.rating}`, "data-annotation-id": note.id },
    note.rating ? h("span", { class: "annotation-rating", "aria-label": note.rating > 0 ? "thumbs up" : "thumbs down" }, RATING[note.rating]) : null,
    h("span", { class: "who" }, note.by),
    note.comment ? h("span", { class: "annotation-comment" }, note.comment) : null,
    h("time", { class: "when" }, new Date(note.created_at).toLocaleString("en-GB")),
  );
}

/** The notes under one step, call or answer, and the button that opens a form to add one. */
class AnnotationSlot {
  constructor(target, ids, label, post) {
    this.target = target;
    this.ids = ids;
    this.label = label;
    this.post = post;
    this.list = null;
    this.open = h("button", { type: "button", class: "button-link annotate-open", "aria-label": `Annotate ${label}`, onclick: () => this.#form() }, "Annotate");
    this.box = h("div", { class: "annotations", "data-target": target }, this.open);
  }

  add(note) {
    if (!this.list) this.box.prepend((this.list = h("ul", { class: "annotations-list" })));
    this.list.append(noteItem(note));
  }

  // Built on demand: a 500-step trace has over a thousand places to annotate.
  #form() {
    const label = this.label;
    const comment = h("textarea", { rows: "2", "aria-label": `Comment on ${label}`, placeholder: "What do you make of this?" });
    const error = h("p", { class: "control-error", role: "alert", hidden: true });
    const send = async (rating) => {
      error.hidden = true;
      if (!comment.value.trim() && rating === 0) {
        error.textContent = "Write a comment first, or give a thumbs up or down.";
        error.hidden = false;
        return;
      }
      const { stepId = "", toolId = "", turnId = "" } = this.ids;
      const answer = await this.post({ target: this.target, step_id: stepId, tool_id: toolId, turn_id: turnId, rating, comment: comment.value });
      if (answer.error) {
        error.textContent = answer.error;
        error.hidden = false;
        return;
      }
      comment.value = "";
      this.add(answer.annotation);
    };
    const rate = (rating, text, name) => h("button", { type: "button", class: "button-link", "aria-label": `${name}: ${label}`, onclick: () => send(rating) }, text);
    const form = h(
      "div",
      { class: "annotate" },
      comment,
      h("div", { class: "annotate-row" }, rate(1, "▲ Good", "Thumbs up"), rate(-1, "▼ Bad", "Thumbs down"), rate(0, "Save comment", "Save comment")),
      error,
    );
    this.open.replaceWith(form);
    comment.focus();
  }
}

/**
 * Put an annotation slot under every step, tool call and answer drawn for `model`.
 * @returns {Map<string, AnnotationSlot>} by target key
 */
export function attachAnnotations(model, notes, url) {
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  const post = async (body) => {
    try {
      const response = await fetch(url, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json", "X-CSRFToken": csrf }, body: JSON.stringify(body) });
      const data = await response.json();
      return response.ok ? data : { error: data.error || `the server answered ${response.status}` };
    } catch (err) {
      return { error: `Could not save: ${err.message}` };
    }
  };
  const slots = new Map();
  const place = (target, ids, label, parent) => {
    if (!parent) return;
    const slot = new AnnotationSlot(target, ids, label, post);
    parent.append(slot.box);
    slots.set(keyOf(target, ids), slot);
  };
  for (const step of model.steps.values()) {
    const cell = document.getElementById(domId("step", step.id));
    if (!cell) continue;
    for (const card of cell.querySelectorAll(".tool-card[id][data-tool-id]")) {
      const name = card.querySelector(".tool-name")?.textContent || "call";
      place("call", { stepId: step.id, toolId: card.dataset.toolId }, `the ${name} call`, card);
    }
    place("step", { stepId: step.id }, "this step", cell.querySelector(".cell-body"));
  }
  for (const turn of model.turns.values()) {
    const answer = document.getElementById(domId("turn", turn.id))?.querySelector(".cell-answer");
    place("answer", { turnId: turn.id }, "the answer", answer);
  }
  for (const note of notes || []) {
    slots.get(keyOf(note.target, { turnId: note.turn_id || "", stepId: note.step_id || "", toolId: note.tool_id || "" }))?.add(note);
  }
  return slots;
}
