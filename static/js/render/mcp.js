// What an MCP tool brings to its card: its title and the hints its server gave (the name stays
// shown, for the audit), and the parts of its result beside the text — image thumbnails, resource
// texts, files to download, links shown as inert text — with what the model was given.
//
// Everything here is the server's, so untrusted: text goes in as text (h() never sets HTML),
// images and files load only from this origin's tool-part URL, and a link's URI is never a link.

import { h } from "../dom.js";
import { revealText } from "../hidden.js";

let info = null;

/** The notebook's MCP tools as the page was given them (#mcp-tool-info): name -> {title, server, hints}. */
function toolInfo(name) {
  if (info == null) {
    const el = document.getElementById("mcp-tool-info");
    try {
      info = el ? JSON.parse(el.textContent || "{}") : {};
    } catch {
      info = {};
    }
  }
  return Object.prototype.hasOwnProperty.call(info, name) ? info[name] : null;
}

const HINT_BADGES = [
  ["readOnlyHint", true, "read-only", "its server says it only reads"],
  ["destructiveHint", true, "destructive", "its server says it may change or delete things"],
];

/** The tool's name on a card: its title where the server gave one, the name beside it. */
export function toolLabel(name) {
  const code = h("code", { class: "tool-name" }, revealText(name));
  const about = toolInfo(name);
  if (!about) return [code];
  const badges = HINT_BADGES.filter(([key, value]) => about.hints?.[key] === value).map(([, , text, title]) =>
    h("span", { class: `badge tool-hint hint-${text}`, title: `${title} (a hint from the server ${about.server})` }, text),
  );
  const title = about.title ? h("span", { class: "tool-title" }, about.title) : null;
  return [title, code, ...badges];
}

/** Where the page serves one part of a call's result (data-tool-part-url). */
function partUrl(stepId, callId, index) {
  const base = document.querySelector("[data-tool-part-url]")?.dataset.toolPartUrl;
  if (!base) return null;
  return `${base}?${new URLSearchParams({ step: stepId, call: callId, part: String(index) })}`;
}

function sizeText(size) {
  if (size >= 1024 * 1024) return `${(size / (1024 * 1024)).toFixed(1)} MB`;
  return size >= 1024 ? `${(size / 1024).toFixed(1)} KB` : `${size} bytes`;
}

function refusedNote(what, reason) {
  return h("p", { class: "tool-part part-refused" }, `${what} not shown: ${reason}`);
}

function imagePart(stepId, callId, part, index, number) {
  const url = part.data && !part.refused ? partUrl(stepId, callId, index) : null;
  if (!url) return refusedNote(`Image ${number}`, part.refused || "it was not kept");
  const alt = `Image ${number} from the tool (${part.mime}, ${sizeText(part.size)})`;
  return h(
    "figure",
    { class: "tool-part part-image" },
    h("a", { href: url, target: "_blank", rel: "noopener", title: "Open the full image" }, h("img", { src: url, alt, loading: "lazy" })),
    h("figcaption", { class: "muted" }, alt),
  );
}

function textResource(part) {
  return h(
    "div",
    { class: "tool-part part-resource" },
    h("p", { class: "part-head" }, h("span", { class: "field-label" }, "Resource"), " ", h("code", {}, part.uri || "(no URI)"), part.mime ? ` (${part.mime})` : ""),
    h("pre", { class: "tool-pre" }, part.text),
  );
}

function blobPart(stepId, callId, part, index) {
  const label = `${part.uri || "a file"} (${part.mime || "unknown type"}${part.size ? `, ${sizeText(part.size)}` : ""})`;
  const url = part.data && !part.refused ? partUrl(stepId, callId, index) : null;
  if (!url) return refusedNote(`File ${label}`, part.refused || "it was not kept");
  return h(
    "p",
    { class: "tool-part part-blob" },
    h("a", { href: url, download: "", class: "button-link" }, "Download"),
    " ",
    h("code", {}, label),
  );
}

function linkPart(part) {
  // inert: the URI is text to read or copy; the page never fetches or links it
  return h(
    "p",
    { class: "tool-part part-link" },
    h("span", { class: "field-label" }, "Resource link"),
    " ",
    part.title || part.name ? h("strong", {}, part.title || part.name) : null,
    " ",
    h("code", { class: "link-uri" }, part.uri),
    part.description ? h("span", { class: "muted" }, ` ${part.description}`) : null,
  );
}

/** The parts of `call`'s result, one element each, in the order the server sent them. */
export function partsView(stepId, call) {
  let images = 0;
  const shown = call.parts.map((part, index) => {
    if (part.type === "image") return imagePart(stepId, call.id, part, index, ++images);
    if (part.type === "text_resource") return textResource(part);
    if (part.type === "blob") return blobPart(stepId, call.id, part, index);
    if (part.type === "resource_link") return linkPart(part);
    return h("p", { class: "tool-part part-other muted" }, `${part.kind || "content"} (${part.mime || "no type"}): not shown`);
  });
  return h("div", { class: "tool-parts", "aria-label": "What the tool returned" }, shown);
}
