// The notebook model, reduced from the event log (docs/protocol.md, runs/engine/events.py).
//
// Nothing here touches the DOM: `applyMessage` folds one server message into the model and
// records what changed in `model.dirty`, so the renderers redraw only those parts, once per
// animation frame. The trace view feeds the same reducer a whole stored log in one pass.
// What the page may do with the model (permissions, totals) is derived in selectors.js.

import { cutAt } from "./cut.js";

/** @typedef {"pending"|"running"|"completed"|"failed"|"undone"|"interrupted"} StepStatus */

/**
 * @typedef {object} Turn  one engine task: the person's message and the steps answering it
 * @property {string} id
 * @property {number} index   1-based position in the notebook
 * @property {string} input
 * @property {"active"|"completed"|"abandoned"} status
 * @property {string[]} stepIds  steps in creation order (dropped ones included, flagged)
 * @property {string|null} response
 * @property {number} createdAt
 * @property {number|null} endedAt
 */

/**
 * @typedef {object} Attempt  one run of a step (a step runs again after failing or an undo)
 * @property {StepStatus} status
 * @property {number|null} startedAt
 * @property {number|null} endedAt
 * @property {Stream[]} streams   one per model call (phase), in order
 * @property {Map<string, Call>} calls  by tool_id
 * @property {string} output
 * @property {object|null} usage
 * @property {string|null} error
 * @property {string|null} errorType
 */

/**
 * @typedef {object} Stream  one model call of a step
 * @property {string|null} phase
 * @property {string} agent
 * @property {string} text
 * @property {boolean} done       its agent_output arrived: the text is final
 * @property {boolean} announced  its agent_input arrived (a snapshot can open a stream before it)
 * @property {object[]} toolSelections
 */

/**
 * @typedef {object} Call
 * @property {string} id  tool_id
 * @property {string} name
 * @property {object} kwargs
 * @property {number|null} planIndex   LLMCompiler's $N
 * @property {number[]} dependsOn      plan indexes this call waits for
 * @property {"running"|"waiting"|"completed"|"failed"|"undone"} status  waiting: for the person's answer
 * @property {string|null} output
 * @property {boolean} isError
 * @property {number|null} startedAt
 * @property {number|null} endedAt
 */

/** A fresh, empty notebook model. */
export function createModel() {
  return {
    task: null, // the notebook summary from `hello`: {id, title, agent, mode, status}
    mode: null,
    lastSeq: 0,
    serverLastSeq: 0,
    /** @type {Map<string, Turn>} engine task id -> turn, in arrival order */
    turns: new Map(),
    /** @type {Map<string, object>} step id -> step */
    steps: new Map(),
    /** @type {Map<string, object>} questions a tool asked the person, by tool_id (team.js) */
    questions: new Map(),
    // `structure`: nodes, edges or statuses changed (DAG, controls); the sets name what to patch.
    dirty: { structure: true, task: true, steps: new Set(), turns: new Set(), streams: new Set() },
  };
}

// --- records ---------------------------------------------------------------------------------

function newAttempt(at) {
  return { status: "running", startedAt: at ?? null, endedAt: null, streams: [], calls: new Map(), reasoning: [], output: "", usage: null, error: null, errorType: null, toldOfStopped: null };
}

function newStream(phase, agent, announced = true) {
  return { phase: phase ?? null, agent: agent || "agent", text: "", done: false, announced, toolSelections: [] };
}

function newStep(event, turnId) {
  return {
    id: event.step_id,
    turnId,
    kind: event.kind || "llm",
    input: event.input ?? null,
    prevSteps: [...(event.prev_steps || [])],
    nextSteps: [],
    /** @type {StepStatus} */
    status: "pending",
    waiting: false, // the server said it waits for the person (step_waiting)
    dropped: false, // dropped by an undo before it ever ran: gone from the page
    isLast: false,
    pendingCalls: event.tool_calls ? event.tool_calls.map((c) => ({ ...c })) : null,
    /** @type {Attempt[]} */
    attempts: [],
    undoCount: 0,
    /** @type {object[]} human_action events on this step: who edited, rejected, approved, stopped */
    humanActions: [],
    /** @type {{start: number, end: number, decision: object|null}[]} the step's waits for a person
     * that ended (step_waiting to its start, or to a stop), each with the action that ended it */
    waits: [],
    waitingSince: null, // when the open wait began (its step_waiting), or null
    decision: null, // the approval that will end the open wait, once a person (or a rule) gave it
    agent: null,
    inputVersion: 0,
  };
}

/** Actions that end a step's wait for a person: it runs next (or never, when stopped). */
const DECIDES_WAIT = new Set(["approved", "auto_approved", "budget_raised", "stopped"]);

function endWait(step, at, decision) {
  if (step.waitingSince == null) return;
  step.waits.push({ start: step.waitingSince, end: Math.max(at, step.waitingSince), decision });
  step.waitingSince = null;
  step.decision = null;
}

function ensureTurn(model, turnId, at) {
  let turn = model.turns.get(turnId);
  if (!turn) {
    turn = { id: turnId, index: model.turns.size + 1, input: "", status: "active", stepIds: [], response: null, createdAt: at ?? 0, endedAt: null, images: [] };
    model.turns.set(turnId, turn);
  }
  model.dirty.turns.add(turnId);
  model.dirty.structure = true;
  return turn;
}

/** The attempt events of a step go to: the running one (a new one if the last was undone). */
function currentAttempt(step, at) {
  let attempt = step.attempts[step.attempts.length - 1];
  if (!attempt || attempt.status === "undone") {
    attempt = newAttempt(at);
    step.attempts.push(attempt);
  }
  return attempt;
}

/** The latest stream of `phase` in the attempt, finished or not. */
function latestStream(attempt, phase) {
  const key = phase ?? null;
  for (let i = attempt.streams.length - 1; i >= 0; i--) if (attempt.streams[i].phase === key) return attempt.streams[i];
  return null;
}

function finishRunningCalls(attempt, status, at) {
  for (const call of attempt.calls.values()) {
    if (call.status === "running") {
      call.status = status;
      call.endedAt = at ?? null;
    }
  }
}

/** The call `toolId` of the step's latest attempt that made it. */
function findCall(step, toolId) {
  for (let i = step.attempts.length - 1; i >= 0; i--) {
    const call = step.attempts[i].calls.get(toolId);
    if (call) return call;
  }
  return null;
}

function ensureCall(attempt, event) {
  let call = attempt.calls.get(event.tool_id);
  if (!call) {
    call = {
      id: event.tool_id, name: event.tool_name, kwargs: event.tool_kwargs || {}, planIndex: event.plan_index ?? null,
      outputName: event.output_name ?? null, dependsOn: event.depends_on || [], status: "running", output: null, isError: false, startedAt: event.at ?? null, endedAt: null,
    };
    attempt.calls.set(call.id, call);
  }
  return call;
}

// --- events of the notebook and its turns ----------------------------------------------------

const TURN_EVENTS = {
  task_created(model, event) {
    const turn = ensureTurn(model, event.task_id, event.at);
    turn.input = event.input;
    turn.createdAt = event.at;
  },
  step_created(model, event) {
    const turn = ensureTurn(model, event.task_id, event.at);
    let step = model.steps.get(event.step_id);
    if (step) {
      // Announced again (e.g. after a restart): refresh what it says, keep its history.
      step.input = event.input ?? step.input;
      step.kind = event.kind || step.kind;
      if (event.tool_calls) step.pendingCalls = event.tool_calls.map((c) => ({ ...c }));
      step.dropped = false;
    } else {
      step = newStep(event, turn.id);
      model.steps.set(step.id, step);
      turn.stepIds.push(step.id);
    }
    model.dirty.steps.add(step.id);
  },
  task_completed(model, event) {
    const turn = ensureTurn(model, event.task_id, event.at);
    turn.status = "completed";
    turn.response = event.response;
    turn.endedAt = event.at;
    for (const stepId of turn.stepIds) if (model.steps.get(stepId)?.humanActions.length) model.dirty.steps.add(stepId);
  },
  message_images(model, event) {
    const turn = ensureTurn(model, event.task_id, event.at);
    turn.images = [...(event.images || [])];
  },
  task_deleted: abandonTurn,
  task_abandoned: abandonTurn,
  mode_changed(model, event) {
    model.mode = event.mode;
    if (model.task) model.task.mode = event.mode;
    model.dirty.task = true;
    model.dirty.structure = true;
  },
};

function abandonTurn(model, event) {
  const turn = model.turns.get(event.task_id);
  if (turn && turn.status === "active") {
    turn.status = "abandoned";
    turn.endedAt = event.at;
    for (const stepId of turn.stepIds) model.dirty.steps.add(stepId); // unrun steps now say so
    model.dirty.turns.add(turn.id);
    model.dirty.structure = true;
  }
}

// --- events of one step: (model, step, event) ------------------------------------------------

const STEP_EVENTS = {
  step_waiting(model, step, event) {
    step.waiting = true;
    if (step.waitingSince == null && event.at != null) step.waitingSince = event.at;
    // the deadline this wait runs under (runs/service/deadlines.py), fixed when it began
    step.deadline = event.deadline_at ? { at: event.deadline_at, action: event.deadline_action, seconds: event.deadline_s } : null;
    // it waits because its run (or its owner's day) spent a budget: why, and what approving raises it to
    step.budget = event.budget || null;
  },
  step_started(model, step, event) {
    endWait(step, event.at, step.decision);
    step.attempts.push(newAttempt(event.at));
    step.status = "running";
    step.waiting = false;
    step.deadline = null;
    step.budget = null;
    if (event.input != null) step.input = event.input;
  },
  agent_input(model, step, event) {
    const attempt = currentAttempt(step, event.at);
    // A snapshot sent while this event was on its way may have opened the stream already.
    let stream = latestStream(attempt, event.phase);
    if (stream && !stream.announced && !stream.done) {
      stream.announced = true;
      stream.agent = event.current_agent_name || stream.agent;
    } else {
      attempt.streams.push((stream = newStream(event.phase, event.current_agent_name)));
    }
    step.agent = stream.agent;
  },
  agent_output(model, step, event) {
    const attempt = currentAttempt(step, event.at);
    let stream = latestStream(attempt, event.phase);
    if (!stream || stream.done) attempt.streams.push((stream = newStream(event.phase, event.current_agent_name)));
    stream.text = event.response?.content ?? stream.text;
    stream.done = true;
    stream.toolSelections = event.tool_calls || [];
    if (event.usage) attempt.usage = addUsage(attempt.usage, event.usage);
    model.dirty.streams.add(step.id);
  },
  agent_reasoning(model, step, event) {
    // ReAct's structured parts; the page shows the observations that no tool card carries
    currentAttempt(step, event.at).reasoning.push(event.part);
  },
  tool_call(model, step, event) {
    const attempt = currentAttempt(step, event.at);
    attempt.calls.delete(event.tool_id); // a call that runs again starts afresh
    ensureCall(attempt, event);
  },
  tool_call_result(model, step, event) {
    const call = ensureCall(currentAttempt(step, event.at), event);
    const out = event.tool_output || {};
    call.output = out.content ?? "";
    call.rawOutput = out.raw_output ?? null; // what render/results.js draws as a table or chart
    call.parts = Array.isArray(out.parts) ? out.parts : []; // an MCP result's images, resources, links
    call.outputCut = cutAt(event, ["tool_output", "content"]); // a preview: the rest downloads
    call.modelChars = event.model_chars ?? null; // the model was given only this much of it
    call.isError = Boolean(out.is_error);
    call.status = call.isError ? "failed" : "completed";
    // A call the person rejected did not fail: it was not run, and the model was told why.
    const decided = step.pendingCalls?.find((c) => c.tool_id === event.tool_id);
    if (decided?.decision === "rejected") Object.assign(call, { status: "rejected", isError: false, reason: decided.reason ?? null });
    call.startedAt = event.started_at ?? call.startedAt;
    call.endedAt = event.ended_at ?? event.at;
  },
  tool_call_stopped(model, step, event) {
    // Stop reached the call before it returned: left_running (a thread that runs on), cancelled, not_started
    const call = ensureCall(currentAttempt(step, event.at), event);
    Object.assign(call, { status: "interrupted", stopped: event.state, stoppedAt: event.stopped_at, endedAt: event.stopped_at });
  },
  stopped_calls_note(model, step, event) {
    // this run's model was told of calls an earlier, stopped run had begun: exactly this text
    currentAttempt(step, event.at).toldOfStopped = event.text;
  },
  tool_call_late_outcome(model, step, event) {
    // what a thread left running by Stop returned at last: for the audit, never for the model
    const call = findCall(step, event.tool_id);
    if (!call) return;
    const out = event.tool_output || {};
    call.late = {
      content: out.content ?? "", isError: Boolean(out.is_error), cut: cutAt(event, ["tool_output", "content"]),
      stoppedAt: event.stopped_at, endedAt: event.ended_at,
    };
  },
  tool_call_decided(model, step, event) {
    const call = step.pendingCalls?.find((c) => c.tool_id === event.tool_id);
    if (call) {
      call.decision = event.decision;
      call.reason = event.reason ?? null;
      if (event.tool_kwargs) call.tool_kwargs = event.tool_kwargs;
    }
    step.inputVersion++;
  },
  human_action(model, step, event) {
    const action = {
      action: event.action, by: event.by || "someone", at: event.at, toolId: event.tool_id ?? null,
      before: event.before ?? null, after: event.after ?? null, reason: event.reason ?? null, whileRunning: Boolean(event.while_running),
      automatic: event.automatic ?? null,
      rule: event.rule ?? null, // auto_approved, auto_refused, set_rule: the approval rule
    };
    step.humanActions.push(action);
    if (step.waitingSince != null && DECIDES_WAIT.has(action.action) && !action.whileRunning) {
      // the step runs next (its step_started ends the wait), or a stop ends it now
      if (action.action === "stopped") endWait(step, action.at, action);
      else step.decision = action;
    }
    const turn = model.turns.get(step.turnId);
    if (turn && action.action === "stopped") {
      // one stop per step that was running (parallel branches), or one at the step that waited
      turn.stop = { ...action, stepId: step.id };
      turn.stops = [...(turn.stops || []), turn.stop];
    }
  },
  step_input_edited(model, step, event) {
    step.input = event.input ?? null;
    if (event.tool_calls) step.pendingCalls = event.tool_calls.map((c) => ({ ...c }));
    step.inputVersion++;
  },
  step_completed(model, step, event) {
    const attempt = currentAttempt(step, event.at);
    Object.assign(attempt, { status: "completed", endedAt: event.at, output: event.output || "" });
    if (event.usage) attempt.usage = event.usage;
    step.status = "completed";
    step.waiting = false;
    step.isLast = Boolean(event.is_last);
    step.nextSteps = [...(event.next_steps || [])];
  },
  step_failed(model, step, event) {
    const attempt = currentAttempt(step, event.at);
    Object.assign(attempt, { status: "failed", endedAt: event.at, error: event.error, errorType: event.error_type });
    finishRunningCalls(attempt, "failed", event.at);
    step.status = "failed";
  },
  step_interrupted(model, step, event) {
    // cut off part way: by a Stop ("cancelled"), or by its server dying ("server_stopped")
    const attempt = step.attempts[step.attempts.length - 1];
    if (attempt && attempt.status === "running") {
      Object.assign(attempt, { status: "interrupted", endedAt: event.at });
      finishRunningCalls(attempt, "interrupted", event.at);
    }
    step.status = "interrupted";
    step.interruptedBy = event.reason || "server_stopped";
  },
  step_undone(model, step, event) {
    // The step is pending again; what its last run produced stays visible, marked undone.
    const attempt = step.attempts[step.attempts.length - 1];
    if (attempt) {
      attempt.status = "undone";
      for (const call of attempt.calls.values()) call.status = "undone";
    }
    Object.assign(step, { status: "pending", waiting: false, isLast: false, nextSteps: [] });
    step.undoCount++;
    for (const droppedId of event.dropped_steps || []) {
      const dropped = model.steps.get(droppedId);
      if (dropped) {
        // One that never ran leaves the page; one that ran stays, undone: its run reached the
        // model, and a person's actions on it are in the audit (as runs/store/load.py numbers cells).
        const last = dropped.attempts[dropped.attempts.length - 1];
        if (last && last.status !== "undone") {
          last.status = "undone";
          for (const call of last.calls.values()) call.status = "undone";
        }
        Object.assign(dropped, { dropped: !dropped.attempts.length, status: "undone", waiting: false });
        model.dirty.steps.add(dropped.id);
      }
    }
    const turn = model.turns.get(step.turnId);
    if (turn && turn.status === "completed") {
      Object.assign(turn, { status: "active", response: null, endedAt: null });
      model.dirty.turns.add(turn.id);
    }
  },
};

// An MCP server's questions to the person during a call (elicit.js draws them on its card).
Object.assign(STEP_EVENTS, {
  elicitation_asked(model, step, event) {
    const call = findCall(step, event.tool_id);
    if (!call) return;
    model.dirty.task = true; // the status line says the step waits for the person
    call.elicitations = (call.elicitations || []).filter((e) => e.id !== event.elicitation_id);
    call.elicitations.push({
      id: event.elicitation_id, server: event.server, message: event.message, fields: event.fields || [],
      deadlineAt: event.deadline_at ?? null, refused: event.refused || "", askedAt: event.at, closed: null,
    });
  },
  elicitation_closed(model, step, event) {
    const asked = findCall(step, event.tool_id)?.elicitations?.find((e) => e.id === event.elicitation_id);
    model.dirty.task = true;
    if (asked) asked.closed = { action: event.action, content: event.content ?? null, by: event.by || "", reason: event.reason || "", at: event.at };
  },
});

// An MCP server's progress and log messages during a call (progress.js draws them on its card);
// the server keeps no more than this many log messages per call, nor does the page.
const MAX_CALL_LOGS = 50;
Object.assign(STEP_EVENTS, {
  tool_progress(model, step, event) {
    const call = findCall(step, event.tool_id);
    if (call) call.progress = { progress: event.progress, total: event.total ?? null, message: event.message || "", at: event.at };
  },
  tool_log(model, step, event) {
    const call = findCall(step, event.tool_id);
    if (!call) return;
    call.logs ||= { items: [], omitted: 0 };
    if (event.omitted) call.logs.omitted = event.omitted;
    else if (call.logs.items.length < MAX_CALL_LOGS) call.logs.items.push({ level: event.level, logger: event.logger || "", text: event.text || "", at: event.at });
  },
});

// Multi-agent workflows: kept on the attempt, so an undone run's handoff and state drop out.
Object.assign(STEP_EVENTS, {
  agent_handoff(model, step, event) {
    currentAttempt(step, event.at).handoff = { from: event.from_agent, to: event.to_agent, reason: event.reason || "" };
  },
  state_changed(model, step, event) {
    currentAttempt(step, event.at).state = { state: event.state || {}, changes: event.changes || {} };
  },
  input_required(model, step, event) {
    const call = currentAttempt(step, event.at).calls.get(event.tool_id);
    if (call) call.status = "waiting"; // no result until the person answers
    model.questions.set(event.tool_id, { stepId: step.id, prefix: event.prefix, waiterId: event.waiter_id, agent: event.current_agent_name, answer: null });
  },
  human_response(model, step, event) {
    // The asking call paused in its own step; answered, it runs again in the question step. So
    // in the asking step it is no longer waiting but answered (its result is the question step's).
    for (const [toolId, question] of model.questions) {
      if (question.waiterId !== event.waiter_id) continue;
      question.answer = event.response;
      const asking = model.steps.get(question.stepId);
      const call = asking?.attempts[asking.attempts.length - 1]?.calls.get(toolId);
      if (call?.status === "waiting") {
        Object.assign(call, { status: "answered", answer: event.response });
        model.dirty.steps.add(asking.id);
      }
    }
  },
});

// Events that change only a step's text, not the graph or what may be done.
const TEXT_ONLY = new Set(["agent_output", "agent_reasoning", "tool_progress", "tool_log"]);

/** Reduce one stored engine (or server lifecycle) event. */
export function applyEvent(model, event) {
  if (event.type === "agent_stream") {
    applyDelta(model, event);
    return;
  }
  const turnHandler = TURN_EVENTS[event.type];
  if (turnHandler) {
    turnHandler(model, event);
    return;
  }
  const stepHandler = STEP_EVENTS[event.type];
  const step = event.step_id ? model.steps.get(event.step_id) : undefined;
  if (!stepHandler || !step) return; // a type this page does not draw (yet), or an unknown step
  stepHandler(model, step, event);
  model.dirty.steps.add(step.id);
  model.dirty.turns.add(step.turnId);
  if (!TEXT_ONLY.has(event.type)) model.dirty.structure = true;
}

/**
 * Text for a running stream from a delta or a snapshot. A phase whose model output already
 * arrived is final: a late delta, or a snapshot flushed before the output, must not reopen it.
 * `text` (a snapshot, or a delta's `response`) is the whole reply so far, so a lost delta heals;
 * a delta's `offset` says where its characters go, so the ones the page already has (from a
 * snapshot that overtook the delta) are not added twice.
 */
function streamText(model, stepId, phase, agent, { text = null, delta = "", offset = null }) {
  const step = model.steps.get(stepId);
  if (!step || step.status !== "running") return; // not replayed yet, or already finished
  const attempt = currentAttempt(step, null);
  let stream = latestStream(attempt, phase);
  if (stream?.done) return;
  if (!stream) attempt.streams.push((stream = newStream(phase, agent, false)));
  if (text != null) {
    if (text.length >= stream.text.length) stream.text = text; // never go backwards
  } else if (offset == null) {
    stream.text += delta; // a server that does not say where the delta goes
  } else if (offset <= stream.text.length && offset + delta.length > stream.text.length) {
    stream.text += delta.slice(stream.text.length - offset);
  } // else: all of it is here already, or characters before it are missing (the next `response` heals)
  model.dirty.streams.add(step.id);
}

/** A streamed token (an `agent_stream` event); `offset` is where its delta starts in the text. */
export function applyDelta(model, event, offset = null) {
  streamText(model, event.step_id, event.phase, event.current_agent_name, { text: event.response ?? null, delta: event.delta || "", offset });
}

/** What a running step streamed before this page (re)connected. */
export function applySnapshot(model, message) {
  streamText(model, message.step_id, message.phase, null, { text: message.text || "" });
}

/**
 * Fold one server message into the model. Returns "ok", "duplicate" (a stored event already
 * applied) or "gap" (a stored event out of order: the caller resumes from lastSeq).
 */
export function applyMessage(model, message) {
  switch (message.type) {
    case "hello":
      model.task = { ...message.task };
      model.mode = message.task?.mode ?? model.mode;
      model.serverLastSeq = message.last_seq ?? 0;
      model.dirty.task = true;
      model.dirty.structure = true;
      return "ok";
    case "event":
      if (message.seq <= model.lastSeq) return "duplicate";
      if (message.seq !== model.lastSeq + 1) return "gap";
      model.lastSeq = message.seq;
      model.serverLastSeq = Math.max(model.serverLastSeq, model.lastSeq);
      applyEvent(model, message.event);
      return "ok";
    case "delta":
      applyDelta(model, message.event, message.offset ?? null);
      return "ok";
    case "stream_snapshot":
      applySnapshot(model, message);
      return "ok";
    case "replay_done":
      model.serverLastSeq = Math.max(model.serverLastSeq, message.last_seq ?? 0);
      model.dirty.structure = true;
      model.dirty.task = true;
      return "ok";
    default:
      return "ok";
  }
}

/** Reduce a whole stored log, `[{seq, event}]` (trace view, tests), in one pass. */
/** The events of an export: `{events: [{seq, ...event}|{seq, event}]}` or a bare list. */
export function eventsOf(data) {
  const list = Array.isArray(data) ? data : data.events || [];
  return list.map((item) => {
    if (item.event) return { seq: item.seq, event: item.event };
    if (item.payload) return { seq: item.seq, event: item.payload };
    return { seq: item.seq, event: item };
  });
}

export function reduceEvents(events, model = createModel()) {
  for (const item of events) {
    if (item.seq != null) model.lastSeq = item.seq;
    applyEvent(model, item.event ?? item);
  }
  return model;
}

export function clearDirty(model) {
  model.dirty.structure = false;
  model.dirty.task = false;
  model.dirty.steps.clear();
  model.dirty.turns.clear();
  model.dirty.streams.clear();
}

export function addUsage(a, b) {
  if (!a) return { ...b };
  return {
    prompt_tokens: (a.prompt_tokens || 0) + (b.prompt_tokens || 0),
    completion_tokens: (a.completion_tokens || 0) + (b.completion_tokens || 0),
    total_tokens: (a.total_tokens || 0) + (b.total_tokens || 0),
  };
}
