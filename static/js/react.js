// ReAct text as distinct parts (Thought / Action / Action Input / Answer), for a cell that is
// still streaming: the engine's structured parts (agent_reasoning events) arrive only once a
// reply is complete, so the page reads the same keywords from the text as it grows.

import { h } from "./dom.js";
import { proseNodes } from "./hidden.js";

const KEYWORD_SOURCE = "^[ \\t]*(Thought|Action Input|Action|Answer|Observation)[ \\t]*:";
const HAS_KEYWORD = new RegExp(KEYWORD_SOURCE, "im"); // not global: test() keeps no state
const KEYWORDS = () => new RegExp(KEYWORD_SOURCE, "gim");

/** Whether `text` is written in the ReAct protocol. */
export function isReAct(text) {
  return HAS_KEYWORD.test(text || "");
}

/** [{kind, text}] in order; kind is thought | action | action-input | answer | observation. */
export function reactParts(text) {
  const parts = [];
  const matches = [...(text || "").matchAll(KEYWORDS())];
  const lead = text.slice(0, matches.length ? matches[0].index : text.length).trim();
  if (lead) parts.push({ kind: "thought", text: lead });
  matches.forEach((match, i) => {
    const end = i + 1 < matches.length ? matches[i + 1].index : text.length;
    const kind = match[1].toLowerCase().replace(" ", "-");
    parts.push({ kind, text: text.slice(match.index + match[0].length, end).trim() });
  });
  return parts;
}

const LABELS = { thought: "Thought", action: "Action", "action-input": "Action Input", answer: "Answer", observation: "Observation" };

/** One labelled block per part. */
export function reactBlocks(parts) {
  return parts.map((part) =>
    h(
      "div",
      { class: `react-part react-${part.kind}${part.isError ? " is-error" : ""}`, "data-part": part.kind },
      h("span", { class: "react-label" }, LABELS[part.kind] || part.kind),
      h(part.kind === "action-input" ? "pre" : "div", { class: "react-text", dir: "auto" }, proseNodes(part.text)),
    ),
  );
}
