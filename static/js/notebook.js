// Entry point of the notebook page: socket -> store -> one render per animation frame.
//
// Server values come from data-* attributes on #notebook (filled by {% url %} in the template).
// Every server message is folded into the model at once; drawing waits for the next frame, so a
// replay of thousands of events, or a fast token stream, costs one DOM pass per frame.

import { Annotations } from "./annotations.js";
import { ForkButtons } from "./fork.js";
import { ImagePicker } from "./image_picker.js";
import { CellsView } from "./cells.js";
import { ActionBus } from "./actions.js";
import { useElicitationBus } from "./elicit.js";
import { StepControls } from "./controls.js";
import { DagView } from "./dag.js";
import { proseNodes, revealProse } from "./hidden.js";
import { liveSteps, permissions, runningStep } from "./selectors.js";
import { applyMessage, clearDirty, createModel } from "./store.js";
import { DELETED_NOTE, TaskSocket, socketUrl } from "./socket.js";
import { NotebookControls } from "./toolbar.js";
import { TeamHeader } from "./team.js";
import { Landing } from "./landing.js";
import { splitPane } from "./split.js";
import { StepKeys } from "./keys.js";
import { renderBudget } from "./budget.js";
import { confirmForms } from "./confirm.js";
import { deleteQuestion } from "./delete_notebook.js";

const root = document.getElementById("notebook");
const $ = (selector) => root.querySelector(selector);

const model = createModel();
const metrics = { frames: 0, renderMs: 0, maxRenderMs: 0, deltas: 0, events: 0, firstReplayDoneAt: null, longTasks: 0, longTaskMs: 0 };
let connection = { state: "connecting", detail: "" };
let liveUpdates = true; // false while the server's channel layer is down (it then sends what it stores)
let resyncing = false;
let frame = 0;

const socket = new TaskSocket(socketUrl(root.dataset.wsPath), {
  lastSeq: () => model.lastSeq,
  expectingMore: () => runningStep(model) != null,
  onState: (state, detail = "") => {
    connection = { state, detail };
    if (state === "fatal" && detail === DELETED_NOTE) showDeleted();
    liveUpdates = true; // a new connection says so again if they are still interrupted
    resyncing = state === "open"; // socket.js sends `resume` on open; a drop ends any replay
    model.dirty.structure = true;
    model.dirty.task = true;
    schedule();
  },
  onMessage: (message) => {
    if (message.type === "deleted") {
      showDeleted(message);
      return;
    }
    if (message.type === "event") metrics.events++;
    else if (message.type === "delta") metrics.deltas++;
    else if (message.type === "error") {
      showNotice(`${message.reason || "The server reported an error"}${message.code ? ` (${message.code})` : ""}`);
      if (message.action === "resume") resyncing = false; // do not wait for a replay that will not come
      schedule();
      return;
    }
    if (message.type === "live") {
      liveUpdates = message.live;
      model.dirty.task = true;
      schedule();
      return;
    }
    if (message.type === "replay_done") {
      resyncing = false;
      metrics.firstReplayDoneAt ??= performance.now();
    }
    const result = applyMessage(model, message);
    if (result === "gap" && !resyncing) {
      resyncing = true; // events went missing: ask for them again; duplicates are skipped
      socket.resync();
    }
    schedule();
  },
});

const bus = new ActionBus((action, fields) => socket.send(action, fields));
useElicitationBus(bus);

// Delete asks first, naming the notebook; the server deletes it and shows the list of notebooks.
confirmForms("form[data-delete-notebook]", (form) => deleteQuestion(form.dataset.deleteNotebook));

/** The notebook was deleted (here or in another tab): say so, by whom and when, and lock the
 * page; the socket closes for good (4410). */
function showDeleted({ title = "", deleted_by: by = "", deleted_at: at = "" } = {}) {
  const banner = document.getElementById("notebook-deleted");
  if (!banner || !banner.hidden) return;
  const when = at ? new Date(at).toLocaleString() : "";
  const name = title || root.querySelector("#notebook-title")?.textContent || "This notebook";
  banner.querySelector("[data-deleted-text]").textContent =
    `“${name}” was deleted${by ? ` by ${by}` : ""}${when ? ` on ${when}` : ""}. Nothing more can be done here.`;
  banner.hidden = false;
  root.inert = true;
  root.classList.add("is-deleted");
  document.title = `Deleted: ${name} · agentui`;
  banner.querySelector("a")?.focus();
}
const stepControls = new StepControls(bus);
const cells = new CellsView($("#cells"), { controls: stepControls });
const dag = new DagView($("#dag"), { onSelect: (target, nodeId) => reveal(target, nodeId) });
const team = new TeamHeader($("#team-status"));
// Review from the live page too: notes on steps, calls and answers, and Fork here on completed steps.
const annotations = new Annotations(root.dataset.annotationsUrl);
const forks = new ForkButtons(root.dataset.forkUrl);
let drawnOnce = false;
const landing = new Landing(root, $("#composer"));
splitPane($(".nb-layout"), $(".split-handle"));
const keys = new StepKeys(root, $("#key-status"));
$("#keys-button").addEventListener("click", () => keys.help());
// The step the person moves to (keys, Tab, a click) is marked in the DAG too.
$("#cells").addEventListener("focusin", (event) => {
  const cell = event.target.closest?.("article.cell-step");
  if (cell) dag.show(`s:${cell.dataset.stepId}`);
});
const toolbar = new NotebookControls(bus, {
  mode: $("#mode-select"),
  abandon: $("#abandon-button"),
  form: $("#composer"),
  text: $("#composer-text"),
  send: $("#composer-send"),
  hint: $("#composer-hint"),
  images: $("#composer [data-image-picker]") ? new ImagePicker($("#composer [data-image-picker]"), $("#composer")) : null,
  count: $("#composer-count"),
});

// The DAG is drawn just after the frame that changed the graph, not in it: the cells show first,
// and a burst of structural events (a replay, parallel calls starting) costs one graph update.
let dagTimer = 0;
function drawDagSoon() {
  if (!dagTimer) dagTimer = setTimeout(() => {
    dagTimer = 0;
    dag.update(model);
  });
}

function schedule() {
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  if (resyncing) {
    // A replay is arriving: keep folding it into the model and draw it in one pass at
    // replay_done; until then only the badge moves.
    const badge = $("#connection");
    badge.textContent = `Catching up… ${model.lastSeq.toLocaleString("en")} / ${model.serverLastSeq.toLocaleString("en")}`;
    return;
  }
  const t0 = performance.now();
  const follow = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  const perms = permissions(model, connection.state === "open" && !resyncing, connection.state === "fatal");
  cells.update(model, perms);
  syncReview(perms);
  if (model.dirty.structure) drawDagSoon();
  toolbar.update(model, perms);
  renderBudget(root, model);
  if (model.dirty.structure) team.update(model);
  if (model.dirty.structure || model.dirty.task) renderStatus(perms);
  announceFinishedSteps();
  clearDirty(model);
  if (follow && !root.dataset.userScrolled) window.scrollTo({ top: document.documentElement.scrollHeight });
  if (connection.state === "open") landing.land(model, perms);
  const spent = performance.now() - t0;
  metrics.frames++;
  metrics.renderMs += spent;
  metrics.maxRenderMs = Math.max(metrics.maxRenderMs, spent);
}

/** Put annotation slots and Fork here back on what this frame redrew (everything the first time). */
function syncReview(perms) {
  const all = !drawnOnce && model.turns.size > 0;
  const stepIds = all ? [...model.steps.keys()] : [...model.dirty.steps, ...perms.runnableIds, ...perms.undoStepIds].filter(Boolean);
  const turnIds = all ? [...model.turns.keys()] : [...model.dirty.turns];
  annotations.sync(model, stepIds, turnIds);
  forks.sync(model, stepIds);
  if (all) {
    drawnOnce = true;
    annotations.load();
  }
}

const STATE_TEXT = {
  connecting: "Connecting…", open: "Live", interrupted: "Live updates interrupted", closed: "Offline", fatal: "Disconnected", idle: "",
};
const INTERRUPTED_DETAIL = "The server lost its message bus: steps still run and are saved, and appear here as they are saved; live text resumes when it is back.";

function renderStatus(perms) {
  const badge = $("#connection");
  const interrupted = connection.state === "open" && !liveUpdates;
  const state = interrupted ? "interrupted" : connection.state;
  const detailText = interrupted ? INTERRUPTED_DETAIL : connection.detail || "";
  badge.dataset.state = state;
  badge.textContent = connection.state === "open" && resyncing ? "Catching up…" : STATE_TEXT[state] || state;
  badge.title = detailText;
  const detail = $("#connection-detail");
  detail.textContent = detailText;
  // (a closed-for-good socket's reason is the status sentence below already: said once)
  detail.hidden = !detailText || connection.state === "fatal";
  if (model.task?.title) {
    const heading = $("#notebook-title");
    if (heading.dataset.title !== model.task.title) {
      heading.dataset.title = model.task.title;
      heading.replaceChildren(...proseNodes(model.task.title)); // the first message's words, as its cell shows them
      heading.title = revealProse(model.task.title); // a long title is cut to one line; its tooltip has it all
    }
  }
  // One short sentence for screen readers; changes only when the run's state does.
  const sentence = statusSentence(perms);
  const live = $("#run-status");
  if (live.textContent !== sentence) live.textContent = sentence;
  root.dataset.running = String(perms.running);
  root.dataset.lastSeq = String(model.lastSeq);
}

function stepNumber(step) {
  const turn = model.turns.get(step.turnId);
  return turn ? liveSteps(model, turn).indexOf(step) + 1 : "";
}

// The streamed text is not a live region (a screen reader would read it token by token): a step
// that finishes while the page is open is announced once, politely, with the start of its text.
const pageOpenedAt = Date.now() / 1000;
const ANNOUNCE_CHARS = 300;

function announceFinishedSteps() {
  const region = $("#step-announce");
  for (const id of model.dirty.steps) {
    const step = model.steps.get(id);
    const attempt = step?.attempts[step.attempts.length - 1];
    if (step?.status !== "completed" || !attempt?.endedAt || attempt.endedAt < pageOpenedAt) continue;
    if (region.dataset.stepId === id) continue;
    region.dataset.stepId = id;
    const text = (attempt.streams.map((s) => s.text).join(" ").trim() || attempt.output || "").replace(/\s+/g, " ");
    const clipped = text.length > ANNOUNCE_CHARS ? `${text.slice(0, ANNOUNCE_CHARS)}…` : text;
    region.textContent = `Step ${stepNumber(step)} finished.${clipped ? ` ${clipped}` : ""}`;
  }
}

/** An MCP server's question on one of the step's calls that still waits for the person. */
function openQuestion(step) {
  const attempt = step.attempts[step.attempts.length - 1];
  for (const call of attempt?.calls.values() || []) {
    const open = (call.elicitations || []).find((e) => !e.closed && !e.refused);
    if (open) return open;
  }
  return null;
}

function statusSentence(perms) {
  if (connection.state === "fatal") return connection.detail;
  const running = runningStep(model);
  const number = stepNumber;
  if (running) {
    const asking = openQuestion(running);
    if (asking) return `Step ${number(running)} waits for your answer to the MCP server ${asking.server}'s question.`;
    return `Step ${number(running)} is running.`;
  }
  if (perms.nextStepId) {
    const step = model.steps.get(perms.nextStepId);
    if (step.status === "failed") return `Step ${number(step)} failed.`;
    if (perms.canApprove && step.kind === "human_input") return `Step ${number(step)} waits for your answer.`;
    if (perms.canApprove) return `Step ${number(step)} is waiting for your approval.`;
  }
  if (!model.turns.size) return "Send a message to start.";
  return perms.send ? "Ready for your next message." : "Working…";
}

function showNotice(text) {
  const notice = $("#notice");
  notice.textContent = text;
  notice.hidden = false;
}

/** Scroll to a cell or tool card (from the DAG), and focus it for keyboard users. */
function reveal(target, nodeId) {
  const el = document.getElementById(target);
  if (!el) return;
  root.dataset.userScrolled = "true";
  el.scrollIntoView({ behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth", block: "center" });
  el.focus({ preventScroll: true });
  el.classList.remove("is-flash");
  void el.offsetWidth; // restart the highlight animation
  el.classList.add("is-flash");
  dag.select(nodeId);
}

// Scrolling up stops following the stream; scrolling back to the bottom resumes it.
window.addEventListener("scroll", () => {
  const atBottom = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  if (atBottom) delete root.dataset.userScrolled;
}, { passive: true });
window.addEventListener("wheel", (e) => { if (e.deltaY < 0) root.dataset.userScrolled = "true"; }, { passive: true });

if ("PerformanceObserver" in window && PerformanceObserver.supportedEntryTypes?.includes("longtask")) {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      metrics.longTasks++;
      metrics.longTaskMs += entry.duration;
    }
  }).observe({ type: "longtask" });
}

// For tests and debugging in the console: the model, the socket and the render figures.
window.agentui = { model, socket, metrics, dag, landing };

socket.connect();
schedule();
