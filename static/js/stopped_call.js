// What Stop did to a tool call that had not returned, on its card (the notebook and the trace).
//
// A plain-function tool runs in a worker thread that Stop cannot stop: the card says its effect
// may have happened, and, if the thread ended while the server ran, what it returned and when.
// That late outcome is only recorded: the model was not given it and nothing ran again. When the
// step runs again, its model is told of the calls that had begun (runs/engine/stopped_note.py):
// the run shows that note, word for word.

import { formatDuration, h } from "./dom.js";
import { cutNotice } from "./cut.js";

const STOPPED_TEXT = {
  left_running:
    "Stopped while the tool was still running. A plain-function tool cannot be stopped part way, so it ran on: its effect may have happened.",
  cancelled: "Stopped while the tool ran: it was cancelled before it returned.",
  not_started: "Stopped before the tool began: it did not run.",
};
const SERVER_STOPPED_TEXT = "The server stopped while this call ran: its effect may have happened.";
const NOT_FOR_MODEL = "Recorded for the audit only: the model was not given it, and nothing ran again.";
const WAITING_TEXT = "If it finishes while the server runs, what it returned is added here.";

/** The note of a call cut off by Stop or by its server stopping; null for any other call. */
export function stoppedCallNote(step, call) {
  if (call.status !== "interrupted") return null;
  const text = call.stopped ? STOPPED_TEXT[call.stopped] : step.interruptedBy === "server_stopped" ? SERVER_STOPPED_TEXT : null;
  if (!text) return null;
  const mayHaveRun = call.stopped === "left_running" || !call.stopped;
  return h(
    "div",
    { class: `tool-stopped${mayHaveRun ? " may-have-run" : ""}`, role: "note" },
    h("p", { class: "tool-stopped-text" }, text),
    call.late ? lateOutcome(call.late) : call.stopped === "left_running" ? h("p", { class: "tool-stopped-wait" }, WAITING_TEXT) : null,
  );
}

function lateOutcome(late) {
  const after = formatDuration(late.endedAt - late.stoppedAt) || "moments";
  const verb = late.isError ? "Failed" : "Finished";
  return h(
    "div",
    { class: `tool-late${late.isError ? " is-error" : ""}` },
    h("span", { class: "field-label" }, `${verb} ${after} after Stop:`),
    h("pre", { class: "tool-pre tool-late-output" }, late.content),
    late.cut ? cutNotice(late.cut) : null,
    h("p", { class: "tool-late-note" }, NOT_FOR_MODEL),
  );
}

/** What a run's model was told of calls an earlier, stopped run had begun; null if nothing. */
export function toldOfStoppedCalls(attempt) {
  if (!attempt.toldOfStopped) return null;
  return h(
    "div",
    { class: "told-of-stopped", role: "note" },
    h("span", { class: "field-label" }, "The model was told:"),
    h("pre", { class: "tool-pre told-of-stopped-text" }, attempt.toldOfStopped),
  );
}
