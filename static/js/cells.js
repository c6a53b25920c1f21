// Renders the notebook's cells: per turn the user's message, one cell per step (streamed text,
// tool-call cards, output or error, earlier undone/failed runs) and the final answer.
//
// Cells are built once and patched: `update` touches only turns and steps the model marked
// dirty, and streamed text only rewrites one text node per stream. Controls for a pending step
// come from controls.js and are rebuilt only when what they offer changes, so typing survives.

import { domId, formatDuration, h, keepChildren, prettyJson, replaceChildren, sentence } from "./dom.js";
import { chainCalls, chainSignature, dependencyName, hasPlaceholders, namesResults, pendingResultName, plannedAs, renderChain, resultName } from "./chain.js";
import { humanActionsBlock, stoppedText } from "./audit.js";
import { foldToggle, setFoldableText } from "./fold.js";
import { assistantText, textBlock } from "./render/text.js";
import { toolResultBody } from "./render/results.js";
import { toolLabel } from "./render/mcp.js";
import { cutNotice, modelCutNotice } from "./cut.js";
import { ProseTally, hiddenNote, proseNote, revealText } from "./hidden.js";
import { stoppedCallNote, toldOfStoppedCalls } from "./stopped_call.js";
import { isReAct, reactBlocks, reactParts } from "./react.js";
import { liveSteps, shownAttempt, turnUsage } from "./selectors.js";
import { costLine } from "./cost.js";
import { timeElement } from "./format.js";
import { agentClass, stepAgent, teamExtras } from "./team.js";
import { elicitationsBlock } from "./elicit.js";
import { logsBlock, progressBlock } from "./progress.js";

const KIND_TEXT = { tool_calls: "tool calls", human_input: "question" };

const STATUS_TEXT = {
  pending: "pending",
  running: "running",
  completed: "completed",
  failed: "failed",
  undone: "undone",
  interrupted: "interrupted",
  waiting: "waiting for you",
  not_run: "not run: stopped",
  stopped: "stopped",
};

export class CellsView {
  /**
   * @param {HTMLElement} container
   * @param {{controls?: import("./controls.js").StepControls}} options  no controls: read-only
   */
  constructor(container, { controls = null } = {}) {
    this.container = container;
    this.controls = controls;
    /** @type {Map<string, {root: HTMLElement, steps: HTMLElement, answer: HTMLElement, message: HTMLElement}>} */
    this.turnViews = new Map();
    /** @type {Map<string, StepView>} */
    this.stepViews = new Map();
    this.controlled = new Set();
    this.empty = container.querySelector("[data-empty]");
  }

  /** Patch the DOM for what changed in the model (all of it on the first call). */
  update(model, perms = null) {
    const first = this.turnViews.size === 0 && this.stepViews.size === 0;
    const turnIds = first ? [...model.turns.keys()] : [...model.dirty.turns];
    const stepIds = first ? [...model.steps.keys()] : [...model.dirty.steps];
    for (const turnId of turnIds) this.#patchTurn(model, model.turns.get(turnId));
    for (const stepId of stepIds) {
      const step = model.steps.get(stepId);
      if (step && !step.dropped) this.#stepView(model, step).patch(model, step);
    }
    const streamIds = new Set(first ? stepIds : model.dirty.streams);
    // a chain's chips fill in as the calls step runs: redraw the turn's reasoning with it
    for (const stepId of first ? [] : model.dirty.steps) {
      const step = model.steps.get(stepId);
      if (step && namesResults(step)) for (const id of model.turns.get(step.turnId)?.stepIds || []) streamIds.add(id);
    }
    for (const stepId of streamIds) {
      const step = model.steps.get(stepId);
      if (step && !step.dropped) this.#stepView(model, step).patchStreams(step, model);
    }
    if (this.controls && perms) this.#patchControls(model, perms);
    this.#patchEmpty(model);
  }

  #patchEmpty(model) {
    if (model.turns.size && this.empty) {
      this.empty.remove();
      this.empty = null;
    }
  }

  #turnView(model, turn) {
    let view = this.turnViews.get(turn.id);
    if (view) return view;
    const message = h("div", { class: "foldable" });
    const note = proseNote(); // hidden characters in the message (pasted from a page, say)
    const images = h("div", { class: "message-images", hidden: true });
    const root = h(
      "section",
      { class: "turn", id: domId("turn", turn.id), "aria-label": `Turn ${turn.index}`, tabindex: "-1" },
      h("article", { class: "cell cell-message" }, h("header", { class: "cell-head" }, h("h2", { class: "cell-title" }, "You")), note, message, images),
    );
    const steps = h("div", { class: "turn-steps" });
    const answer = h("div", { class: "turn-end" });
    root.append(steps, answer);
    this.container.append(root);
    view = { root, steps, answer, message, note, images };
    this.turnViews.set(turn.id, view);
    return view;
  }

  #patchTurn(model, turn) {
    if (!turn) return;
    const view = this.#turnView(model, turn);
    if (view.input !== turn.input) {
      view.input = turn.input;
      setFoldableText(view.message, turn.input, "message-text", { prose: true });
      const tally = new ProseTally("you");
      tally.add(turn.input || "");
      proseNote(view.note, tally.note);
    }
    const imageSig = (turn.images || []).map((i) => i.id).join(",");
    if (view.images.dataset.sig !== imageSig) {
      view.images.dataset.sig = imageSig;
      view.images.hidden = !imageSig;
      replaceChildren(view.images, (turn.images || []).map(imageThumb));
    }
    // Keep step cells in creation order; dropped steps (undone before they ever ran) leave the page.
    const live = liveSteps(model, turn);
    let previous = null;
    for (const step of live) {
      const cell = this.#stepView(model, step).root;
      const wanted = previous ? previous.nextSibling : view.steps.firstChild;
      if (cell !== wanted) view.steps.insertBefore(cell, wanted);
      previous = cell;
    }
    for (const stepId of turn.stepIds) {
      const step = model.steps.get(stepId);
      if (step?.dropped && this.stepViews.has(stepId)) {
        this.stepViews.get(stepId).root.remove();
        this.stepViews.delete(stepId);
        this.controlled.delete(stepId);
      }
    }
    live.forEach((step, i) => this.stepViews.get(step.id).setIndex(i + 1));
    const spent = turn.status === "completed" ? costLine(turnUsage(model, turn), model.task?.price) : null;
    const sig = `${turn.status}|${turn.response ?? ""}|${turn.stop?.at ?? ""}|${spent?.text ?? ""}`;
    if (view.answer.dataset.sig === sig) return;
    view.answer.dataset.sig = sig;
    if (turn.status === "completed") {
      // what the whole turn used, every step's runs together
      const turnCost = spent ? h("span", { class: "cell-meta turn-cost", title: spent.title }, `this turn: ${spent.text}`) : null;
      replaceChildren(
        view.answer,
        h(
          "article",
          { class: "cell cell-answer", "aria-label": "Answer" },
          h("header", { class: "cell-head" }, h("span", { class: "status-dot status status-completed", "aria-hidden": "true" }), h("h2", { class: "cell-title" }, "Answer"), turnCost),
          ...foldedAnswer(turn.response || ""),
        ),
      );
    } else if (turn.status === "abandoned") {
      replaceChildren(view.answer, h("p", { class: "turn-note turn-stopped" }, ...stoppedText(model, turn)));
    } else {
      view.answer.replaceChildren();
    }
  }

  #stepView(model, step) {
    let view = this.stepViews.get(step.id);
    if (!view) {
      view = new StepView(step);
      this.stepViews.set(step.id, view);
      const turnView = this.#turnView(model, model.turns.get(step.turnId));
      turnView.steps.append(view.root);
    }
    return view;
  }

  #patchControls(model, perms) {
    const wanted = new Set([...perms.runnableIds, ...perms.undoStepIds, ...this.controlled].filter(Boolean));
    for (const stepId of wanted) {
      const step = model.steps.get(stepId);
      const view = this.stepViews.get(stepId);
      if (!step || !view) {
        this.controlled.delete(stepId);
        continue;
      }
      const owned = view.controlsSlot.dataset.ownsCalls;
      const built = this.controls.render(view.controlsSlot, model, step, perms);
      if (built) this.controlled.add(stepId);
      else this.controlled.delete(stepId);
      // The editable call cards moved between the controls and the body: redraw the body.
      if (view.controlsSlot.dataset.ownsCalls !== owned) view.patch(model, step);
    }
  }

  /** Where the cell for a DAG node's target lives. */
  find(target) {
    return document.getElementById(target);
  }
}

/** The rendered answer, folded with its toggle after it when it is long. */
function foldedAnswer(text) {
  const answer = assistantText(text, "answer-text");
  return [answer, foldToggle(answer, text)];
}

/** One step's cell. */
class StepView {
  constructor(step) {
    this.id = step.id;
    this.title = h("h3", { class: "cell-title" }, "Step");
    this.dot = h("span", { class: "status-dot status", "aria-hidden": "true" });
    this.kind = h("span", { class: "badge kind" });
    this.agent = h("span", { class: "badge agent", hidden: true });
    this.badge = h("span", { class: "badge status" });
    this.meta = h("span", { class: "cell-meta" });
    this.body = h("div", { class: "cell-body" });
    this.controlsSlot = h("div", { class: "cell-controls" });
    this.root = h(
      "article",
      { class: "cell cell-step", id: domId("step", step.id), tabindex: "-1", "data-step-id": step.id },
      h("header", { class: "cell-head" }, this.dot, this.title, this.kind, this.agent, this.badge, this.meta),
      this.body,
      this.controlsSlot,
    );
    this.root.setAttribute("aria-labelledby", (this.title.id = domId("step-title", step.id)));
    /** @type {{el: HTMLElement, stream: object}[]} */
    this.streamEls = [];
    /** @type {WeakMap<object, {wrapper: HTMLElement, el: HTMLElement, view: object, stream: object}>} */
    this.streamBlocks = new WeakMap();
    this.index = 0;
    this.bodySig = null;
    this.startedAt = null;
    this.when = null;
  }

  setIndex(index) {
    if (this.index === index) return;
    this.index = index;
    this.title.textContent = `Step ${index}`;
  }

  patch(model, step) {
    const stopped = step.status === "pending" && model.turns.get(step.turnId)?.status === "abandoned";
    const cutOff = step.status === "interrupted" && step.interruptedBy === "cancelled";
    const status = stopped ? "not_run" : cutOff ? "stopped" : step.status === "pending" && step.waiting ? "waiting" : step.status;
    const agentName = stepAgent(model, step);
    const colour = agentName ? agentClass(model, agentName) : "";
    this.root.className = `cell cell-step status status-${step.status}${step.waiting && !stopped ? " is-waiting" : ""}${step.humanActions.length ? " has-human" : ""}${colour ? ` agent-cell ${colour}` : ""}`;
    this.root.dataset.status = step.status;
    this.dot.className = `status-dot status status-${step.status}`;
    this.kind.textContent = KIND_TEXT[step.kind] || step.kind;
    const showAgent = agentName && agentName !== "agent";
    this.agent.hidden = !showAgent;
    if (showAgent) {
      this.agent.textContent = agentName;
      this.agent.className = `badge agent ${colour}`;
    }
    this.badge.className = `badge status status-${step.status}`;
    this.badge.textContent = STATUS_TEXT[status] || status;
    const attempt = shownAttempt(step);
    const live = attempt && attempt.status !== "undone" ? attempt : null;
    const parts = [];
    if (live?.startedAt && live.endedAt) parts.push(formatDuration(live.endedAt - live.startedAt));
    const cost = costLine(live?.usage, model.task?.price);
    if (cost) parts.push(cost.text);
    // when the step ran, as every date reads ("3 minutes ago", the full date on hover)
    const started = live?.startedAt ?? null;
    if (started !== this.startedAt) {
      this.startedAt = started;
      this.when = started ? timeElement(started, "cell-when") : null;
    }
    const line = parts.join(" · ");
    replaceChildren(this.meta, this.when, this.when && line ? " · " : null, line);
    this.meta.title = cost ? cost.title : "";
    if (cost?.usd != null) this.meta.dataset.costUsd = String(cost.usd);
    else delete this.meta.dataset.costUsd;
    this.#patchBody(model, step, live);
  }

  #patchBody(model, step, live) {
    const turn = model.turns.get(step.turnId);
    const earlier = step.attempts.filter((a) => a !== live && a.status !== "running");
    const body = [];
    this.streamEls = [];
    const firstOfTurn = turn && turn.stepIds[0] === step.id;
    // The first step's input is the user's message, already shown above it.
    const showInput = step.kind !== "tool_calls" && step.input && !(firstOfTurn && step.input === turn.input);
    if (showInput && step.status !== "pending") {
      body.push(h("div", { class: "step-input" }, h("span", { class: "field-label" }, "Input"), h("div", { class: "cell-text" }, step.input)));
    }
    if (live) {
      const told = toldOfStoppedCalls(live);
      if (told) body.push(told);
      for (const stream of live.streams) {
        const block = this.#streamBlock(stream);
        body.push(block.wrapper);
        this.streamEls.push(block);
      }
      const react = live.reasoning.length > 0 || live.streams.some((s) => isReAct(s.text));
      const resultLabel = react ? "Observation" : "Result";
      // a ReAct step's Action Input is already on show above the card: the card shows the observation
      const cardsClass = react && live.streams.length ? "tool-cards react-calls" : "tool-cards";
      if (live.calls.size) body.push(h("div", { class: cardsClass }, [...live.calls.values()].map((c) => callCard(step, c, true, resultLabel))));
      // observations no tool card shows: a reply the engine could not read, an invented tool, feedback
      const loose = live.calls.size ? [] : live.reasoning.filter((p) => p.kind === "observation");
      if (loose.length) {
        body.push(h("div", { class: "react-parts" }, reactBlocks(loose.map((p) => ({ kind: "observation", text: p.observation, isError: p.is_error })))));
      }
      if (!live.streams.length && live.output && !live.calls.size) body.push(assistantText(live.output, "step-output"));
      if (live.error) {
        body.push(h("div", { class: "step-error", role: "status" }, h("strong", {}, live.errorType || "Error"), ": ", live.error));
      }
    }
    body.push(...teamExtras(model, step, live));
    const pending = step.pendingCalls && step.kind !== "human_input" && step.status !== "completed" && !(live && live.calls.size);
    if (pending && !this.#controlsOwnCalls()) {
      body.push(h("div", { class: "tool-cards" }, step.pendingCalls.map((c) => pendingCard(step, c))));
    }
    if (!live && step.status === "pending" && !pending && !step.attempts.length && step.kind !== "human_input") {
      const stopped = turn?.status === "abandoned";
      const note = stopped ? "Not run: the turn was stopped." : step.waiting ? "Waiting for your approval." : "Not run yet.";
      body.push(h("p", { class: "cell-placeholder" }, note));
    }
    const human = humanActionsBlock(model, step);
    if (human) body.push(human);
    if (earlier.length) body.push(earlierRuns(step, earlier));
    keepChildren(this.body, body);
    this.patchStreams(step, model);
  }

  /**
   * The drawn text of `stream`, made once and kept while the step is redrawn (its status, a
   * call, its end): what was streamed stays the nodes the person watched, never drawn again.
   */
  #streamBlock(stream) {
    let block = this.streamBlocks.get(stream);
    if (!block) {
      const { root, view } = textBlock(stream.phase, "stream-text");
      const label = stream.phase || (stream.agent !== "agent" ? stream.agent : null);
      const wrapper = h("div", { class: "stream", "data-phase": stream.phase || "" }, label ? h("span", { class: "field-label" }, label) : null, root);
      block = { wrapper, el: view.el, view, stream };
      this.streamBlocks.set(stream, block);
    }
    return block;
  }

  #controlsOwnCalls() {
    return this.controlsSlot.dataset.ownsCalls === "true";
  }

  patchStreams(step, model) {
    const running = step.status === "running";
    for (const { el, view, stream } of this.streamEls) {
      if (isReAct(stream.text)) {
        // ReAct: Thought / Action / Action Input / Answer as labelled blocks, redrawn as the text grows
        if (el.dataset.shown !== stream.text) {
          el.dataset.shown = stream.text;
          el.classList.add("react-parts");
          replaceChildren(el, reactBlocks(reactParts(stream.text)));
        }
      } else if (stream.phase === "reasoning" && hasPlaceholders(stream.text)) {
        const calls = chainCalls(model, model.turns.get(step.turnId));
        const sig = chainSignature(stream.text, calls);
        if (el.dataset.chain !== sig) {
          renderChain(el, stream.text, calls);
          el.dataset.chain = sig;
        }
      } else {
        delete el.dataset.chain;
        view.update(stream.text, { final: stream.done });
      }
      el.classList.toggle("is-streaming", running && !stream.done);
    }
  }
}

function callMeta(call) {
  const parts = [];
  if (call.startedAt != null && call.endedAt != null) parts.push(formatDuration(call.endedAt - call.startedAt));
  return parts.join(" · ");
}

/** A tool call that ran or is running. */
export function callCard(step, call, withId = true, resultLabel = "Result") {
  const deps = call.dependsOn?.length ? `after ${call.dependsOn.map((d) => dependencyName(call, d)).join(", ")}` : null;
  const result =
    call.output == null
      ? call.status === "running"
        ? h("p", { class: "tool-wait" }, call.elicitations?.some((e) => !e.closed && !e.refused) ? "Waiting for your answer to the MCP server's question." : "Running…")
        : call.status === "waiting"
          ? h("p", { class: "tool-wait" }, "Waiting for the person's answer (the question step below).")
          : call.status === "answered"
            ? h("p", { class: "tool-answered" }, `${sentence(`Answered: ${call.answer}`)} It ran again with the answer in the question step below.`)
            : null
      : h(
          "div",
          { class: `tool-result${call.isError ? " is-error" : ""}` },
          h("span", { class: "field-label" }, call.isError ? `${resultLabel} (error)` : resultLabel),
          toolResultBody(step.id, call),
          call.outputCut ? cutNotice(call.outputCut) : null,
          call.modelChars != null ? modelCutNotice(call.modelChars) : null,
        );
  const outcome =
    call.status === "rejected"
      ? h("p", { class: "tool-reason" }, `Rejected, not run. Reason: ${call.reason || "(none given)"}`)
      : result;
  return h(
    "div",
    {
      class: `tool-card status status-${call.status}`,
      id: withId ? domId("call", `${step.id}-${call.id}`) : null,
      tabindex: withId ? "-1" : null,
      "data-tool-id": call.id,
    },
    h(
      "div",
      { class: "tool-head" },
      h("span", { class: `status-dot status status-${call.status}`, "aria-hidden": "true" }),
      resultName(call) ? h("span", { class: "badge plan-index" }, resultName(call)) : null,
      toolLabel(call.name),
      deps ? h("span", { class: "tool-deps" }, deps) : null,
      h("span", { class: "tool-meta" }, callMeta(call)),
      h("span", { class: `badge status status-${call.status}` }, call.status),
    ),
    hiddenNote(call.name, call.kwargs),
    h("pre", { class: "tool-pre tool-args", "aria-label": "Arguments" }, prettyJson(call.kwargs)),
    elicitationsBlock(call),
    progressBlock(call),
    logsBlock(call),
    outcome,
    stoppedCallNote(step, call),
  );
}

/** A thumbnail of an image attached to a message; it opens the full image. */
export function imageThumb(image) {
  return h(
    "a",
    { class: "image-thumb", href: image.url, target: "_blank", rel: "noopener", title: image.name || "image" },
    h("img", { src: image.url, alt: image.name ? `Attached image ${image.name}` : "Attached image", loading: "lazy" }),
  );
}

/** A tool call waiting for approval, read-only (the trace view, or when another turn is active). */
export function pendingCard(step, call) {
  const decision = call.decision || "pending";
  const status = decision === "rejected" ? "rejected" : "pending";
  return h(
    "div",
    { class: `tool-card status status-${status}`, id: domId("call", `${step.id}-${call.tool_id}`), "data-tool-id": call.tool_id },
    h(
      "div",
      { class: "tool-head" },
      h("span", { class: `status-dot status status-${status}`, "aria-hidden": "true" }),
      pendingResultName(call) ? h("span", { class: "badge plan-index" }, pendingResultName(call)) : null,
      toolLabel(call.tool_name),
      h("span", { class: "tool-meta" }),
      h("span", { class: `badge decision decision-${decision}` }, decision),
    ),
    hiddenNote(call.tool_name, call.tool_kwargs),
    h("pre", { class: "tool-pre tool-args", "aria-label": "Arguments" }, prettyJson(call.tool_kwargs)),
    plannedAs(call.planned_kwargs),
    call.reason ? h("p", { class: "tool-reason" }, `Reason: ${call.reason}`) : null,
  );
}

function earlierRuns(step, attempts) {
  const undone = attempts.filter((a) => a.status === "undone").length;
  const summary = undone === attempts.length ? `Undone output (${undone})` : `Earlier runs (${attempts.length})`;
  return h(
    "details",
    { class: "earlier-runs" },
    h("summary", {}, summary),
    attempts.map((attempt) =>
      h(
        "div",
        { class: `attempt attempt-${attempt.status}` },
        h("span", { class: `badge status status-${attempt.status}` }, attempt.status),
        toldOfStoppedCalls(attempt),
        attempt.streams.map((s) => assistantText(s.text, "attempt-text", s.phase)),
        attempt.calls.size ? h("div", { class: "tool-cards" }, [...attempt.calls.values()].map((c) => callCard(step, c, false))) : null,
        attempt.error ? h("div", { class: "step-error" }, attempt.error) : null,
      ),
    ),
  );
}
