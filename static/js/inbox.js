// The Inbox page: every step waiting for you across your notebooks, live (inbox_feed.js), with the
// decisions of the notebook page inline (approve with edits, reject with a reason, answer a
// question) and keys for all of them (j/k, a, r, e, o; listed on the page). Requests other
// agents made over agentui's MCP server wait in the same list (inbox_requests.js).

import { plannedAs } from "./chain.js";
import { parseArgs } from "./controls.js";
import { countdown } from "./deadline.js";
import { h, prettyJson, replaceChildren } from "./dom.js";
import { hiddenNote, proseNodes, revealText } from "./hidden.js";
import { timeElement } from "./format.js";
import { notificationsOn, setNotifications } from "./inbox_badge.js";
import { inboxFeed } from "./inbox_feed.js";
import { renderRequest, requestKey } from "./inbox_requests.js";

const list = document.getElementById("inbox-list");
const empty = document.getElementById("inbox-empty");
const summary = document.getElementById("inbox-summary");
// your user id: a step of another person's notebook (a group you review) shows whose it is
const ME = Number(list.dataset.user);
const feed = inboxFeed();

/** step id (or requestKey) -> its rendered item (kept while it waits, so what you typed stays) */
const items = new Map();
let selected = null;

const KIND = { tool_calls: "Tool calls", human_input: "Question", llm: "Model step", plan: "Plan" };

function field(item, name) {
  return item.root.querySelector(`[data-field="${name}"]`);
}

function setError(item, text) {
  const slot = item.root.querySelector(".control-error");
  slot.textContent = text || "";
  slot.hidden = !text;
}

function busy(item, on) {
  for (const button of item.root.querySelectorAll("button")) button.disabled = on;
}

/** What the person edited, as `edit_input` takes it, or null when nothing changed; throws a message. */
function edited(item) {
  const step = item.step;
  if (step.kind === "tool_calls") {
    const edits = [];
    for (const call of step.calls) {
      const area = field(item, `args:${call.tool_id}`);
      if (area.value === area.defaultValue) continue;
      const parsed = parseArgs(area.value);
      if (!parsed.ok) {
        area.focus();
        throw new Error(`${revealText(call.tool_name)}: ${parsed.error}`);
      }
      edits.push({ tool_id: call.tool_id, tool_kwargs: parsed.value });
    }
    return edits.length ? JSON.stringify(edits) : null;
  }
  const input = field(item, "input");
  return input && input.value !== input.defaultValue ? input.value : null;
}

async function decide(item, verdict) {
  const step = item.step;
  const fields = { notebook: step.notebook, step_id: step.step_id, verdict };
  try {
    if (verdict === "approve") {
      const change = edited(item);
      if (change !== null) fields.edited = change;
    }
  } catch (err) {
    setError(item, err.message);
    return;
  }
  if (verdict === "answer") {
    fields.text = field(item, "input").value;
    if (!fields.text.trim()) {
      setError(item, "Type an answer first: the run waits for it.");
      field(item, "input").focus();
      return;
    }
  }
  if (verdict === "reject") {
    fields.text = field(item, "reason").value.trim();
    if (!fields.text) {
      setError(item, "Give a reason: the model is told why its calls were rejected.");
      field(item, "reason").focus();
      return;
    }
  }
  setError(item, null);
  busy(item, true);
  const answer = await feed.decide(fields);
  busy(item, false);
  if (answer.type === "error") setError(item, answer.reason);
  else item.root.classList.add("decided"); // the list without it follows at once
}

function callBlock(call) {
  const id = `args-${call.tool_id}`.replace(/[^A-Za-z0-9_-]/g, "_");
  return h(
    "div",
    { class: "inbox-call" },
    hiddenNote(call.tool_name, call.arguments),
    h("label", { for: id, class: "inbox-call-label" }, h("code", {}, revealText(call.tool_name)), " arguments"),
    h("textarea", { id, class: "args-input", rows: Math.min(8, prettyJson(call.arguments).split("\n").length), spellcheck: "false", dataset: { field: `args:${call.tool_id}` } }, prettyJson(call.arguments)),
    // a plan's call waits with the earlier results it uses: how it was planned, as on the notebook
    plannedAs(call.planned_arguments),
  );
}

function render(step) {
  const item = { step, root: null };
  // a group member's notebook (you review their group): decided here, never opened (it stays theirs)
  const theirs = step.owner !== ME;
  // the notebook's title is its first message: shown as its cell shows it (hidden.js prose)
  const named = h("span", { dir: "auto" }, proseNodes(step.title));
  const title = theirs
    ? h("span", { class: "inbox-title" }, named, " ", h("span", { class: "badge inbox-owner" }, `${step.owner_name}'s`))
    : h("a", { href: `/tasks/${step.notebook}/`, class: "inbox-title", dataset: { open: "" } }, named);
  const meta = h(
    "p",
    { class: "inbox-meta muted" },
    h("span", { class: "badge" }, KIND[step.kind] || step.kind),
    " ",
    step.agent_label,
    " · waiting since ",
    timeElement(new Date(step.since * 1000)),
    step.deadline_at ? [" · ", countdown(h, step.deadline_at, step.deadline_action)] : null,
  );
  const body = [];
  const buttons = [];
  // it waits because a budget was reached: approving raises it (recorded), as on the notebook
  if (step.budget) body.push(h("p", { class: "budget-note" }, h("strong", {}, `${step.budget.reason[0].toUpperCase()}${step.budget.reason.slice(1)}.`), `Approving raises it to ${step.budget.raise_words} for this run.`));
  if (step.kind === "human_input") {
    body.push(h("p", { class: "question-text" }, h("span", { class: "field-label" }, `${step.asker || "A tool"} asks you `), step.question ? revealText(step.question) : "(the question was not recorded)"));
    body.push(h("label", { class: "field-label", for: `answer-${step.step_id}` }, "Your answer"));
    body.push(h("textarea", { id: `answer-${step.step_id}`, rows: 2, dataset: { field: "input" } }));
    buttons.push(h("button", { type: "button", class: "button primary", onclick: () => decide(item, "answer") }, "Send answer"));
  } else if (step.kind === "tool_calls") {
    body.push(...step.calls.map(callBlock));
    buttons.push(h("button", { type: "button", class: "button primary", onclick: () => decide(item, "approve") }, "Approve and run"));
    const reason = h("input", { type: "text", class: "reject-reason", placeholder: "Reason (the model is told)", "aria-label": "Reason to reject", dataset: { field: "reason" }, maxlength: 2000 });
    reason.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        decide(item, "reject");
      }
    });
    buttons.push(reason, h("button", { type: "button", class: "button danger", onclick: () => decide(item, "reject") }, "Reject"));
  } else {
    body.push(h("label", { class: "field-label", for: `input-${step.step_id}` }, "Input for this step"));
    body.push(h("textarea", { id: `input-${step.step_id}`, rows: 2, placeholder: "Optional: a message for the model before this step runs", dataset: { field: "input" } }, step.input));
    buttons.push(h("button", { type: "button", class: "button primary", onclick: () => decide(item, "approve") }, "Approve and run"));
  }
  item.root = h(
    "li",
    { class: "inbox-item", tabindex: "-1", dataset: { notebook: String(step.notebook), step: step.step_id } },
    h("div", { class: "inbox-item-head" }, title),
    meta,
    body,
    h("div", { class: "button-row" }, buttons),
    h("p", { class: "control-error", role: "alert", hidden: true }),
  );
  item.root.addEventListener("focusin", () => select(item, false));
  return item;
}

function select(item, focus = true) {
  if (selected && selected !== item) selected.root.classList.remove("selected");
  selected = item;
  if (!item) return;
  item.root.classList.add("selected");
  if (focus) {
    item.root.focus();
    item.root.scrollIntoView({ block: "nearest" });
  }
}

function keyOf(item) {
  return item.step ? item.step.step_id : requestKey(item.request);
}

function requestItem(asked) {
  const item = renderRequest(asked, ME, feed);
  item.root.addEventListener("focusin", () => select(item, false));
  return item;
}

function summaryText(count, requests) {
  if (!requests) return count === 1 ? "1 step waits for you." : `${count} steps wait for you.`;
  const steps = count - requests;
  const parts = [requests === 1 ? "1 request from an agent" : `${requests} requests from agents`];
  if (steps) parts.push(steps === 1 ? "1 step" : `${steps} steps`);
  return `${parts.join(" and ")} ${count === 1 ? "waits" : "wait"} for you.`;
}

function show(message) {
  const seen = new Set();
  const waiting = [
    ...message.items.map((step) => ({ key: step.step_id, since: step.since, make: () => render(step) })),
    ...(message.requests || []).map((asked) => ({ key: requestKey(asked), since: asked.since, make: () => requestItem(asked) })),
  ].sort((a, b) => a.since - b.since);
  const order = [];
  for (const one of waiting) {
    seen.add(one.key);
    let item = items.get(one.key);
    if (!item) {
      item = one.make();
      items.set(one.key, item);
    }
    order.push(item.root);
  }
  let next = null;
  for (const [key, item] of items) {
    if (seen.has(key)) continue;
    if (item === selected) next = order[0] ? [...items.values()].find((i) => i.root === order[0]) : null;
    items.delete(key);
  }
  replaceChildren(list, order);
  empty.hidden = message.count > 0;
  summary.textContent = summaryText(message.count, (message.requests || []).length);
  if (next !== null || (selected && !items.has(keyOf(selected)))) select(next, false);
  if (!selected && order.length) select(items.get(waiting[0].key), false);
}

function move(by) {
  const all = [...items.values()].sort((a, b) => [...list.children].indexOf(a.root) - [...list.children].indexOf(b.root));
  if (!all.length) return;
  const at = all.indexOf(selected);
  select(all[Math.max(0, Math.min(all.length - 1, at + by))]);
}

const KEYS = {
  j: () => move(1),
  k: () => move(-1),
  a: () => selected && (selected.request ? selected.decide(selected.request.kind === "question" ? "answer" : "approve") : decide(selected, selected.step.kind === "human_input" ? "answer" : "approve")),
  r: () => selected && field(selected, "reason")?.focus(),
  e: () => selected?.root.querySelector("textarea, form input, form select")?.focus(),
  o: () => selected?.step && selected.step.owner === ME && location.assign(`/tasks/${selected.step.notebook}/`),
};

document.addEventListener("keydown", (e) => {
  const typing = e.target.closest?.("input, textarea, select");
  if (typing) {
    if (e.key === "Escape") selected ? selected.root.focus() : e.target.blur();
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const run = KEYS[e.key];
  if (!run) return;
  e.preventDefault();
  run();
});

feed.onState((state, detail) => {
  if (state !== "open") summary.textContent = detail || (state === "connecting" ? "Connecting…" : "Offline: reconnecting…");
});
feed.subscribe(show);

const notifyButton = document.getElementById("notify-button");
const notifyState = document.getElementById("notify-state");

function showNotifyState() {
  const on = notificationsOn();
  notifyButton.textContent = on ? "Turn off browser notifications" : "Turn on browser notifications";
  if (!("Notification" in window)) notifyState.textContent = "This browser has no notifications.";
  else if (Notification.permission === "denied") notifyState.textContent = "Notifications are blocked for this site in the browser's settings.";
  else notifyState.textContent = on ? "On: this browser tells you when a step starts waiting." : "";
}

notifyButton.addEventListener("click", async () => {
  await setNotifications(!notificationsOn());
  showNotifyState();
});
showNotifyState();
