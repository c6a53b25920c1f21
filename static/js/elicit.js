// An MCP server's question to the person during a tool call (runs/presets/mcp/eliciting.py):
// a form built from the fields the server checked, with Accept / Decline / Cancel, on the call's
// card. Every text in it comes from an untrusted server and is set as text, never as markup.
// A form is built once per question and kept, so a redraw of the card keeps what was typed.
// The values are checked again on the server; a refusal shows under the form.

import { domId, h, prettyJson, sentence } from "./dom.js";
import { timeElement } from "./format.js";
import { revealText } from "./hidden.js";

/** @type {import("./actions.js").ActionBus|null} */
let bus = null;
const forms = new Map(); // elicitation id -> its form element

/** Where answers go: the notebook page's action bus (the trace view has none: read-only). */
export function useElicitationBus(actionBus) {
  bus = actionBus;
}

const CLOSED = { accept: "Answered", decline: "Declined", cancel: "Cancelled" };

function label(field) {
  return field.title || field.name;
}

/** One field of a form (`asked.id` keeps its element ids apart); also the inbox's forms. */
export function formInput(asked, field) {
  const id = domId("elicit", `${asked.id}-${field.name}`);
  const hint = field.description ? h("p", { class: "field-hint", id: `${id}-hint` }, revealText(field.description)) : null;
  const described = hint ? `${id}-hint` : null;
  let control;
  if (field.kind === "boolean") {
    control = h("input", { type: "checkbox", id, name: field.name, "aria-describedby": described });
    control.checked = field.default === true;
  } else if (field.kind === "enum") {
    const titles = field.option_titles?.length ? field.option_titles : field.options;
    control = h(
      "select",
      { id, name: field.name, required: field.required, "aria-describedby": described },
      field.required && field.default != null ? null : h("option", { value: "" }, "(none)"),
      field.options.map((value, i) => h("option", { value }, revealText(String(titles[i] ?? value)))),
    );
    control.value = field.default ?? "";
  } else if (field.kind === "number" || field.kind === "integer") {
    control = h("input", {
      type: "number", id, name: field.name, required: field.required, step: field.kind === "integer" ? "1" : "any",
      min: field.minimum, max: field.maximum, "aria-describedby": described,
    });
    if (field.default != null) control.value = String(field.default);
  } else {
    control = h("input", {
      type: "text", id, name: field.name, required: field.required, maxlength: field.max_length, "aria-describedby": described,
      autocomplete: "off",
    });
    if (field.default != null) control.value = String(field.default);
  }
  control.dataset.kind = field.kind;
  const text = `${revealText(label(field))}${field.required ? " (required)" : ""}`;
  if (field.kind === "boolean") return h("div", { class: "elicit-field elicit-check" }, h("label", { for: id }, control, ` ${text}`), hint);
  return h("div", { class: "elicit-field" }, h("label", { for: id }, text), control, hint);
}

/** The values as typed: empty fields left out, numbers as numbers, checkboxes as booleans. */
export function formValues(form, fields) {
  const content = {};
  for (const field of fields) {
    const control = form.elements.namedItem(field.name);
    if (!control) continue;
    if (field.kind === "boolean") content[field.name] = control.checked;
    else if (control.value === "") continue;
    else if (field.kind === "number" || field.kind === "integer") content[field.name] = Number(control.value);
    else content[field.name] = control.value;
  }
  return content;
}

function buildForm(asked) {
  const slot = `elicit:${asked.id}`;
  const errorId = domId("elicit-error", asked.id);
  const send = (answer, button) => {
    const fields = { elicitation_id: asked.id, answer };
    if (answer === "accept") fields.content = formValues(form, asked.fields);
    return bus.act(slot, "answer_elicitation", fields, button);
  };
  const accept = h("button", { type: "submit", class: "button primary" }, "Accept");
  const decline = h("button", { type: "button", class: "button secondary", onclick: () => send("decline", decline) }, "Decline");
  const cancel = h("button", { type: "button", class: "button secondary", onclick: () => send("cancel", cancel) }, "Cancel");
  const form = h(
    "form",
    { class: "elicit-form", "aria-describedby": errorId, novalidate: true },
    asked.fields.map((field) => formInput(asked, field)),
    h("div", { class: "elicit-buttons" }, accept, decline, cancel),
    bus.slot(slot, errorId),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send("accept", accept);
  });
  return form;
}

function outcome(asked, callOpen) {
  const closed = asked.closed;
  if (asked.refused) return h("p", { class: "elicit-outcome" }, sentence(`agentui ${asked.refused}`));
  if (!closed) {
    return callOpen ? null : h("p", { class: "elicit-outcome" }, "Not answered: the call ended first (the server was told nothing more).");
  }
  const who = closed.by ? ` by ${closed.by}` : "";
  const why = closed.reason ? `: ${closed.reason}` : "";
  return h(
    "div",
    { class: `elicit-outcome elicit-${closed.action}` },
    h("p", {}, `${CLOSED[closed.action] || closed.action}${who}${why}`, " (", timeElement(closed.at), ")."),
    closed.content ? h("pre", { class: "tool-pre", "aria-label": "Sent to the server" }, prettyJson(closed.content)) : null,
  );
}

/** The call's questions from its MCP server, or null when it asked none. */
export function elicitationsBlock(call) {
  if (!call.elicitations?.length) return null;
  const callOpen = call.status === "running";
  return call.elicitations.map((asked) => {
    const open = callOpen && !asked.closed && !asked.refused;
    if (!open) forms.delete(asked.id);
    let form = null;
    if (open && bus) {
      form = forms.get(asked.id);
      if (!form) forms.set(asked.id, (form = buildForm(asked)));
    }
    return h(
      "section",
      { class: `elicitation${open ? " is-open" : ""}`, "data-elicitation": asked.id, "aria-label": `Question from the MCP server ${asked.server}` },
      h("p", { class: "field-label" }, `Question from the MCP server ${revealText(asked.server)}`),
      asked.message ? h("p", { class: "elicit-message" }, revealText(asked.message)) : null,
      open && asked.deadlineAt ? h("p", { class: "elicit-deadline" }, "If no one answers, the server is told cancel ", timeElement(asked.deadlineAt), ".") : null,
      open && !bus ? h("p", { class: "elicit-outcome" }, "Waiting for the person's answer in the notebook.") : null,
      form,
      outcome(asked, callOpen),
    );
  });
}
