// A request another agent made over agentui's MCP server (runs/mcpserver/, docs/mcp.md) as the
// inbox shows it: who asked (the API token's name and the client), what, and the decision —
// approve or reject with a reason, or answer a question (text, or a form from its schema, built
// as an MCP server's questions are: elicit.js). The agent's words are set as text, never markup.

import { countdown } from "./deadline.js";
import { h, prettyJson } from "./dom.js";
import { formInput, formValues } from "./elicit.js";
import { revealText } from "./hidden.js";
import { timeElement } from "./format.js";

/** The inbox's key of a request (steps are keyed by their step id). */
export function requestKey(asked) {
  return `request-${asked.request}`;
}

function problem(item, text) {
  const slot = item.root.querySelector(".control-error");
  slot.textContent = text || "";
  slot.hidden = !text;
}

async function send(item, feed, verdict) {
  const asked = item.request;
  const fields = { request: asked.request, verdict, text: "" };
  const reason = item.root.querySelector("[data-field=reason]");
  if (verdict === "reject") {
    fields.text = reason.value.trim();
    if (asked.kind === "approval" && !fields.text) {
      problem(item, "Give a reason: the agent that asked is told why.");
      reason.focus();
      return;
    }
  } else if (verdict === "answer") {
    if (asked.fields.length) {
      fields.content = formValues(item.root.querySelector("form"), asked.fields);
    } else {
      fields.text = item.root.querySelector("[data-field=input]").value;
      if (!fields.text.trim()) {
        problem(item, "Type an answer first: the agent waits for it.");
        item.root.querySelector("[data-field=input]").focus();
        return;
      }
    }
  }
  problem(item, null);
  for (const button of item.root.querySelectorAll("button")) button.disabled = true;
  const answer = await feed.send("decide_request", fields);
  for (const button of item.root.querySelectorAll("button")) button.disabled = false;
  if (answer.type === "error") problem(item, answer.reason);
  else item.root.classList.add("decided");
}

/** The inbox item of request `asked`: `{root, request, decide(verdict)}`. */
export function renderRequest(asked, me, feed) {
  const item = { request: asked, root: null, decide: (verdict) => send(item, feed, verdict) };
  const question = asked.kind === "question";
  const who = h("span", { class: "inbox-title" }, `An agent asks ${question ? "you" : "for your approval"}`);
  const theirs = asked.owner !== me ? h("span", { class: "badge inbox-owner" }, `${asked.owner_name}'s`) : null;
  const meta = h(
    "p",
    { class: "inbox-meta muted" },
    h("span", { class: "badge" }, question ? "Agent's question" : "Agent's request"),
    " with the API token ",
    h("strong", { class: "request-token" }, revealText(asked.token_name)),
    asked.client_name ? [" (", h("span", { class: "request-client" }, revealText(asked.client_name)), ")"] : null,
    " · asked ",
    timeElement(new Date(asked.since * 1000)),
    " · ",
    countdown(h, asked.deadline_at, "timeout"),
  );
  const body = [h("p", { class: "question-text request-description", dir: "auto" }, revealText(asked.description))];
  if (asked.arguments != null) body.push(h("pre", { class: "tool-pre request-arguments", "aria-label": "What it would do" }, prettyJson(asked.arguments)));
  const buttons = [];
  if (question && asked.fields.length) {
    const form = h("form", { class: "elicit-form", novalidate: true }, asked.fields.map((field) => formInput({ id: requestKey(asked) }, field)));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      item.decide("answer");
    });
    body.push(form);
  } else if (question) {
    const id = `${requestKey(asked)}-answer`;
    body.push(h("label", { class: "field-label", for: id }, "Your answer"), h("textarea", { id, rows: 2, dataset: { field: "input" } }));
  }
  buttons.push(h("button", { type: "button", class: "button primary", onclick: () => item.decide(question ? "answer" : "approve") }, question ? "Send answer" : "Approve"));
  const reason = h("input", { type: "text", class: "reject-reason", placeholder: question ? "Why not (optional; the agent is told)" : "Reason (the agent is told)", "aria-label": question ? "Reason to decline" : "Reason to reject", dataset: { field: "reason" }, maxlength: 2000 });
  reason.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      item.decide("reject");
    }
  });
  buttons.push(reason, h("button", { type: "button", class: "button danger", onclick: () => item.decide("reject") }, question ? "Decline" : "Reject"));
  item.root = h(
    "li",
    { class: "inbox-item inbox-request", tabindex: "-1", dataset: { request: String(asked.request) } },
    h("div", { class: "inbox-item-head" }, who, theirs),
    meta,
    body,
    h("div", { class: "button-row" }, buttons),
    h("p", { class: "control-error", role: "alert", hidden: true }),
  );
  return item;
}
