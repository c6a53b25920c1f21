// The trace page's corrections: what people edited, rejected, undid, answered and judged
// (derived from the audit by runs/traces/corrections.py), and under each answer the corrected
// answer a reviewer writes, shown as a word diff against the agent's. Everything here is text:
// the agent's answer is model output, so it never becomes markup.

import { domId, h, postJson } from "./dom.js";
import { timeElement } from "./format.js";

const KIND = {
  edited_input: "Edited the input",
  edited_arguments: "Edited the arguments",
  rejected_call: "Rejected a call",
  undone: "Undid a step",
  answered_question: "Answered a question",
  annotation: "Annotated",
  corrected_answer: "Corrected the answer",
};

const shown = (value) => (value == null ? "" : typeof value === "string" ? value : JSON.stringify(value, null, 1));

/** The word diff as text runs: kept words plain, removed ones struck, added ones marked. */
export function diffView(parts, label = "Corrected answer against the agent's") {
  const tag = { same: "span", removed: "del", added: "ins" };
  return h(
    "p",
    { class: "answer-diff", "aria-label": label },
    (parts || []).map((part) => h(tag[part.op] || "span", { class: `diff-${part.op}` }, part.text)),
  );
}

function stepLink(correction, reveal) {
  if (!correction.step_id) return null;
  const target = domId("step", correction.step_id);
  return h("button", { type: "button", class: "button-link", onclick: () => reveal(target) }, "show step");
}

function beforeAfter(correction) {
  if (correction.kind === "corrected_answer") return diffView(correction.diff);
  if (correction.kind !== "edited_input" && correction.kind !== "edited_arguments") return null;
  return h(
    "div",
    { class: "correction-change" },
    h("div", { class: "correction-before" }, h("span", { class: "field-label" }, "Before"), h("pre", {}, shown(correction.before))),
    h("div", { class: "correction-after" }, h("span", { class: "field-label" }, "After"), h("pre", {}, shown(correction.after))),
  );
}

function detail(correction) {
  switch (correction.kind) {
    case "rejected_call":
      return correction.reason ? `Reason: ${correction.reason}` : "No reason given";
    case "answered_question":
      return `${correction.question ? `${correction.question} → ` : ""}${shown(correction.after)}`;
    case "annotation":
      return `${correction.rating > 0 ? "▲ good" : correction.rating < 0 ? "▼ bad" : ""}${correction.rating && correction.note ? ": " : ""}${correction.note || ""}`;
    case "corrected_answer":
      return correction.versions > 1 ? `${correction.versions} versions` : "";
    default:
      return "";
  }
}

function item(correction, reveal) {
  const about = correction.tool_name ? ` · ${correction.tool_name}` : "";
  return h(
    "li",
    { class: `correction correction-${correction.kind}`, "data-kind": correction.kind },
    h(
      "div",
      { class: "correction-head" },
      h("strong", {}, KIND[correction.kind] || correction.kind),
      about,
      " · ",
      h("span", { class: "who" }, correction.by),
      " ",
      timeElement(correction.at, "when"),
      correction.automatic ? h("span", { class: "muted" }, ` (automatic: ${correction.automatic})`) : null,
      " ",
      stepLink(correction, reveal),
    ),
    detail(correction) ? h("div", { class: "correction-detail" }, detail(correction)) : null,
    beforeAfter(correction),
  );
}

/** The corrected answer under one turn's answer: its diff, who and when, and the editor. */
class AnswerSlot {
  constructor(answer, post, onSaved) {
    this.answer = answer;
    this.post = post;
    this.onSaved = onSaved;
    this.box = h("div", { class: "corrected-answer", "data-turn-id": answer.turn_id });
    this.render();
  }

  render() {
    const a = this.answer;
    const label = a.text == null ? "Write the corrected answer" : "Edit the corrected answer";
    const open = h("button", { type: "button", class: "button-link corrected-open", onclick: () => this.edit() }, label);
    this.box.replaceChildren(
      ...(a.text == null
        ? [open]
        : [
            h("h4", { class: "corrected-title" }, "Corrected answer"),
            diffView(a.diff),
            h(
              "p",
              { class: "corrected-by muted" },
              `by ${a.by} `,
              timeElement(a.created_at, "when"),
              a.versions.length > 1 ? ` · version ${a.versions.length}` : "",
            ),
            open,
          ]),
    );
  }

  edit() {
    const a = this.answer;
    const text = h("textarea", { rows: "5", class: "corrected-text", "aria-label": `The answer turn ${a.turn_index} should have given` });
    text.value = a.text ?? a.agent_answer;
    const error = h("p", { class: "control-error", role: "alert", hidden: true });
    const save = async () => {
      error.hidden = true;
      if (!text.value.trim()) {
        error.textContent = "Write the answer the agent should have given.";
        error.hidden = false;
        return;
      }
      const saved = await this.post({ turn_id: a.turn_id, text: text.value });
      if (saved.error) {
        error.textContent = saved.error; // the text stays in the box
        error.hidden = false;
        return;
      }
      this.answer = saved.answer;
      this.render();
      this.onSaved();
    };
    this.box.replaceChildren(
      h("label", { class: "field-label" }, "The answer it should have given", text),
      h(
        "div",
        { class: "annotate-row" },
        h("button", { type: "button", class: "button primary corrected-save", onclick: save }, "Save corrected answer"),
        h("button", { type: "button", class: "button secondary", onclick: () => this.render() }, "Cancel"),
      ),
      error,
    );
    text.focus();
  }
}

/** The Corrections panel and a corrected-answer slot under each answer of the trace. */
export class Corrections {
  constructor(panel, { url, answerUrl, reveal }) {
    this.panel = panel;
    this.url = url;
    this.reveal = reveal;
    this.post = (body) => postJson(answerUrl, body);
    this.slots = new Map();
  }

  async load() {
    let data;
    try {
      const response = await fetch(this.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.error || `the server answered ${response.status}`);
    } catch (err) {
      this.panel.querySelector("#corrections-status").textContent = `Could not load the corrections: ${err.message}`;
      return;
    }
    this.#list(data.corrections || []);
    for (const answer of data.answers || []) this.#place(answer);
    this.panel.dataset.ready = "true";
  }

  #list(corrections) {
    const list = this.panel.querySelector("#corrections");
    list.replaceChildren(...corrections.map((c) => item(c, this.reveal)));
    const n = corrections.length;
    this.panel.querySelector("#corrections-status").textContent = n
      ? `${n.toLocaleString("en")} correction${n === 1 ? "" : "s"}`
      : "Nobody has corrected this notebook yet.";
  }

  #place(answer) {
    const cell = document.getElementById(domId("turn", answer.turn_id))?.querySelector(".cell-answer");
    if (!cell) return;
    const slot = new AnswerSlot(answer, this.post, () => this.refresh());
    this.slots.set(answer.turn_id, slot);
    cell.append(slot.box);
  }

  /** The list again, after a save (the slots keep what they show). */
  async refresh() {
    try {
      const response = await fetch(this.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) this.#list((await response.json()).corrections || []);
    } catch {
      // the saved answer is stored; the next page load lists it
    }
  }
}
