// Reviewers' annotations in the trace and the live notebook: a comment and a thumbs up/down on
// any step, tool call or answer, stored through /api/tasks/<id>/annotations/
// (runs/web/annotations.py) and shown under what they are about.

import { domId, h, postJson } from "./dom.js";
import { timeElement } from "./format.js";

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
    timeElement(note.created_at, "when"),
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

function keyOfNote(note) {
  return keyOf(note.target, { turnId: note.turn_id || "", stepId: note.step_id || "", toolId: note.tool_id || "" });
}

/**
 * Annotation slots under the steps, tool calls and answers drawn for a model. The trace places
 * them once; the live notebook calls `sync` after each render for what it redrew, which puts
 * the same slots (notes, and any comment being typed) back where a redraw took them out.
 */
export class Annotations {
  constructor(url) {
    this.url = url;
    /** @type {Map<string, AnnotationSlot>} by target key */
    this.slots = new Map();
    this.unplaced = [];
    this.post = (body) => postJson(url, body);
  }

  #place(target, ids, label, parent) {
    if (!parent) return;
    const key = keyOf(target, ids);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = new AnnotationSlot(target, ids, label, this.post);
      this.slots.set(key, slot);
      const waiting = this.unplaced.filter((note) => keyOfNote(note) === key);
      if (waiting.length) {
        this.unplaced = this.unplaced.filter((note) => keyOfNote(note) !== key);
        waiting.forEach((note) => slot.add(note));
      }
    }
    if (slot.box.parentNode !== parent) parent.append(slot.box);
  }

  /** Put slots on the given steps (their cells and run tool calls) and the given turns' answers. */
  sync(model, stepIds, turnIds) {
    for (const stepId of stepIds) {
      const step = model.steps.get(stepId);
      const cell = step && !step.dropped ? document.getElementById(domId("step", step.id)) : null;
      if (!cell) continue;
      for (const card of cell.querySelectorAll(".cell-body .tool-card[id][data-tool-id]")) {
        const name = card.querySelector(".tool-name")?.textContent || "call";
        this.#place("call", { stepId: step.id, toolId: card.dataset.toolId }, `the ${name} call`, card);
      }
      this.#place("step", { stepId: step.id }, "this step", cell);
    }
    for (const turnId of turnIds) {
      const answer = document.getElementById(domId("turn", turnId))?.querySelector(".cell-answer");
      this.#place("answer", { turnId }, "the answer", answer);
    }
  }

  /** Show stored notes under what they are about (or once it is drawn). */
  show(notes) {
    for (const note of notes || []) {
      const slot = this.slots.get(keyOfNote(note));
      if (slot) slot.add(note);
      else this.unplaced.push(note);
    }
  }

  /** Fetch the notebook's stored notes and show them. */
  async load() {
    try {
      const response = await fetch(this.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) this.show((await response.json()).annotations);
    } catch {
      // the notes stay in the database; the next page load shows them
    }
  }
}

/** The trace: a slot under every step, tool call and answer drawn for `model`, with `notes`. */
export function attachAnnotations(model, notes, url) {
  const annotations = new Annotations(url);
  annotations.sync(model, model.steps.keys(), model.turns.keys());
  annotations.show(notes);
  return annotations;
}
