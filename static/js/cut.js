// A value the server cut to a preview because the event was too large for a websocket frame
// (runs/protocol/wire.py): the event's `truncated` list says what is left out and where the whole
// value downloads from the database.

import { h } from "./dom.js";

/** The `truncated` entry of `event` for the value at `path` (e.g. ["tool_output", "content"]), or null. */
export function cutAt(event, path) {
  const want = JSON.stringify(path);
  return (event.truncated || []).find((cut) => JSON.stringify(cut.path) === want) ?? null;
}

function sizeText(bytes) {
  const kb = Math.max(1, Math.round(bytes / 1024));
  return `${kb.toLocaleString("en")} KB`;
}

/** "Showing the first … — N KB more — download" under a cut value. */
export function cutNotice(cut) {
  return h(
    "p",
    { class: "value-cut" },
    cut.shown_chars ? `Showing the first ${cut.shown_chars.toLocaleString("en")} of ${(cut.chars ?? 0).toLocaleString("en")} characters. ` : "Too large to show here. ",
    h("a", { href: cut.url, download: "" }, `${sizeText(cut.more_bytes)} more — download`),
  );
}

/** What the model read of a tool result it was given cut (AGENTUI_TOOL_OUTPUT_MODEL_CHARS): the
 * page shows more than the model read, so it says how much the model read. */
export function modelCutNotice(chars) {
  return h("p", { class: "model-cut" }, `The model was given only the first ${chars.toLocaleString("en")} characters of this result, and told that the rest was left out.`);
}
