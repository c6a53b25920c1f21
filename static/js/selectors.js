// State derived from the notebook model (store.js): which turn is active, which step runs or
// waits, what the page may offer right now, and the totals of a trace. The server decides what
// is allowed; these only say which controls to show and when to grey them out.

import { addUsage } from "./store.js";

/** Statuses from which a step may be approved (run) again. */
const RUNNABLE = new Set(["pending", "failed", "interrupted"]);

export function activeTurn(model) {
  let found = null;
  for (const turn of model.turns.values()) if (turn.status === "active") found = turn;
  return found;
}

export function lastTurn(model) {
  let last = null;
  for (const turn of model.turns.values()) last = turn;
  return last;
}

/** A turn's steps in order, without those an undo dropped before they ran. */
export function liveSteps(model, turn) {
  return turn.stepIds.map((id) => model.steps.get(id)).filter((s) => s && !s.dropped);
}

export function runningStep(model) {
  for (const step of model.steps.values()) if (step.status === "running") return step;
  return null;
}

/** The step the active turn runs next. */
export function nextStep(model) {
  const turn = activeTurn(model);
  if (!turn) return null;
  // an undone step still shown (it ran before an undo dropped it) is history, not next
  return liveSteps(model, turn).find((s) => s.status !== "completed" && s.status !== "undone") || null;
}

/**
 * The steps `undo` may take back: completed steps of the active (or last) turn that no step
 * after them (one listing them in its prevSteps) has run or is running. In a chain that is the
 * last completed step; in a fan-out (a parallel runner) each finished branch.
 */
export function undoableSteps(model) {
  const turn = activeTurn(model) || lastTurn(model);
  if (!turn || turn.status === "abandoned") return [];
  const steps = liveSteps(model, turn);
  const moved = new Set();
  for (const s of steps) {
    if (s.status === "completed" || s.status === "running") for (const id of s.prevSteps || []) moved.add(id);
  }
  return steps.filter((s) => s.status === "completed" && !moved.has(s.id));
}

/** The step a plain `undo` undoes: the last of the undoable steps. */
export function undoableStep(model) {
  const undoable = undoableSteps(model);
  return undoable.length ? undoable[undoable.length - 1] : null;
}

/**
 * Which actions the page may offer right now. The ids say where a control belongs even while
 * it is disabled (offline, or a step is running); the booleans say whether it may be used.
 */
export function permissions(model, connected, closedForGood = false) {
  const turn = activeTurn(model);
  const running = runningStep(model);
  const undoables = undoableSteps(model);
  const undoable = undoables.length ? undoables[undoables.length - 1] : null;
  // A pending step in auto mode starts by itself; offer approval once the server says it waits.
  const waits = (step) => step.status !== "pending" || step.waiting || step.undoCount > 0 || model.mode === "step";
  // An agent whose ready steps run side by side (parallel research): every waiting branch is
  // approved, edited or undone on its own, also while other branches run.
  const branches = Boolean(model.task?.branches);
  const runnable = branches ? readySteps(model, turn).filter(waits) : [nextStep(model)].filter((s) => s && RUNNABLE.has(s.status));
  const blocked = Boolean(running) && !branches;
  return {
    connected,
    // what the controls say while not connected: a socket closed for good does not reconnect
    offline: closedForGood ? "Disconnected: this page will not reconnect." : "Offline: reconnecting…",
    running: Boolean(running),
    branches,
    nextStepId: runnable.length ? runnable[0].id : null,
    runnableIds: runnable.map((s) => s.id),
    canApprove: Boolean(connected && runnable.some(waits) && !blocked),
    canEdit: Boolean(connected && runnable.some((s) => s.status === "pending") && !blocked),
    undoStepId: undoable ? undoable.id : null,
    undoStepIds: undoables.map((s) => s.id),
    canUndo: Boolean(connected && undoable && !blocked),
    send: Boolean(connected && !turn),
    abandon: Boolean(connected && turn),
    setMode: Boolean(connected),
  };
}

/** A turn's steps that may run now: runnable, and every step before them completed. */
function readySteps(model, turn) {
  if (!turn) return [];
  const steps = liveSteps(model, turn);
  const done = new Set(steps.filter((s) => s.status === "completed").map((s) => s.id));
  return steps.filter((s) => RUNNABLE.has(s.status) && (s.prevSteps || []).every((id) => done.has(id)));
}

/** The attempt whose outputs a step shows: the current one, or the last undone one. */
export function shownAttempt(step) {
  return step.attempts[step.attempts.length - 1] || null;
}

/**
 * When a notebook's own time began (seconds), for its wall time: a fork's log starts with the
 * events it copied from its source, which keep the source's times; null for any other notebook.
 */
export function ownStart(task) {
  if (!task?.forked_from || !task.created_at) return null;
  const at = Date.parse(task.created_at);
  return Number.isNaN(at) ? null : at / 1000;
}

/** Totals over the whole log: steps, tool calls, tokens (and `usage`, to cost them) and wall time (seconds, from `since` if given). */
export function totals(model, since = ownStart(model.task)) {
  let steps = 0;
  let calls = 0;
  let tokens = 0;
  let usage = null;
  let human = 0;
  let first = Infinity;
  let last = -Infinity;
  for (const step of model.steps.values()) {
    human += step.humanActions?.length || 0;
    if (step.dropped || !step.attempts.length) continue; // a step that never ran is not counted
    steps++;
    for (const attempt of step.attempts) {
      calls += attempt.calls.size;
      if (attempt.usage) {
        tokens += attempt.usage.total_tokens || 0;
        usage = addUsage(usage, attempt.usage);
      }
      if (attempt.startedAt != null) first = Math.min(first, attempt.startedAt);
      if (attempt.endedAt != null) last = Math.max(last, attempt.endedAt);
      for (const call of attempt.calls.values()) if (call.endedAt != null) last = Math.max(last, call.endedAt);
    }
  }
  for (const turn of model.turns.values()) {
    if (turn.createdAt) first = Math.min(first, turn.createdAt);
    if (turn.endedAt) last = Math.max(last, turn.endedAt);
  }
  if (since != null) first = Math.max(first, since);
  return { steps, calls, tokens, usage, humanActions: human, wallTime: last > first ? last - first : 0 };
}

/** The tokens a turn's steps used, every run of each (an undone run was paid for too); null: none. */
export function turnUsage(model, turn) {
  let usage = null;
  for (const id of turn?.stepIds || []) {
    for (const attempt of model.steps.get(id)?.attempts || []) if (attempt.usage) usage = addUsage(usage, attempt.usage);
  }
  return usage;
}
