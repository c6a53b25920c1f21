// Drives an agentui notebook with the official AG-UI client (@ag-ui/client's HttpAgent).
//
//   node run.mjs <endpoint url> <API token> <thread id> <message> [approval mode]
//
// Runs the agent with the message (a new thread gets the approval mode, default auto) and
// answers every interrupt a run ends with by approving it (resume) until the run finishes. Prints one JSON object: the text, tool calls and
// results the client received, each run's outcome, and the client's own message list; at each
// MESSAGES_SNAPSHOT, the messages the client had folded from the events and the snapshot's.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, threadId, message, mode = "auto"] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  threadId,
  headers: { Authorization: `Bearer ${token}` },
});
agent.addMessage({ id: `user-${Date.now()}`, role: "user", content: message });

// A message as the tests compare them: no id (events mint their own, a snapshot has the stored rows').
const parsed = (text) => {
  try {
    return JSON.parse(text || "{}");
  } catch {
    return text; // arguments that are not JSON (e.g. sent twice) are compared as they are
  }
};
const comparable = (m) => ({
  role: m.role,
  content: m.content || null,
  toolCalls: (m.toolCalls ?? []).map((c) => [c.id, c.function.name, parsed(c.function.arguments)]),
  toolCallId: m.toolCallId ?? null,
  metadata: m.metadata ?? null,
});

const seen = { text: "", toolCalls: {}, results: {}, metadata: {}, outcomes: [], errors: [], steps: 0, snapshots: [] };
let runs = 0;
const subscriber = {
  onRunStartedEvent() {
    runs += 1;
  },
  // what the client had folded from the events when a snapshot came, and what the snapshot says
  onMessagesSnapshotEvent({ event, messages }) {
    seen.snapshots.push({ run: runs, folded: messages.map(comparable), snapshot: event.messages.map(comparable) });
  },
  onTextMessageContentEvent({ event }) {
    seen.text += event.delta;
  },
  onToolCallEndEvent({ event, toolCallName, toolCallArgs }) {
    seen.toolCalls[event.toolCallId] = { name: toolCallName, args: toolCallArgs };
  },
  onToolCallResultEvent({ event }) {
    seen.results[event.toolCallId] = event.content;
    if (event.metadata) seen.metadata[event.toolCallId] = event.metadata;
  },
  onStepStartedEvent() {
    seen.steps += 1;
  },
  onRunFinishedEvent(params) {
    seen.outcomes.push(params.outcome);
    if (params.outcome === "success") seen.result = params.event.result;
  },
  onRunErrorEvent({ event }) {
    seen.errors.push(event.message);
  },
  onRunFailed({ error }) {
    seen.errors.push(String(error));
  },
};

await agent.runAgent({ forwardedProps: { mode } }, subscriber);
for (let rounds = 0; agent.pendingInterrupts.length && rounds < 10; rounds++) {
  const answers = Object.fromEntries(
    agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { action: "approve" } }]),
  );
  await agent.runAgent({ resume: buildResumeArray(agent.pendingInterrupts, answers) }, subscriber);
}
seen.messages = agent.messages.map((m) => ({ role: m.role, content: m.content ?? null, toolCalls: m.toolCalls ?? null }));
seen.conversation = agent.messages.map(comparable);
process.stdout.write(JSON.stringify(seen));
