// A link in a model's answer goes wherever the model, or a document it read, chose; its text may
// name another place ("https://bank.example" leading elsewhere) and its address may carry what
// the person is working on out to that site (`?q=<the figures>`). So a click on one (a middle
// click or Enter too) asks first, naming the site and showing the whole address; only a yes
// opens it, in a new tab with no opener and no referrer. Links within the page (#…) are not asked.
// The address is held in data-href, not href: with no href the browser's own ways round a click
// handler (its context menu's "Open link in new tab", dragging the link to the tab bar) have
// nothing to open.

import { confirmAction } from "../confirm.js";
import { h } from "../dom.js";
import { revealText } from "../hidden.js";

/** The class sanitize.js gives every link it keeps from model output. */
export const MODEL_LINK = "model-link";
const SHOWN_CHARS = 2000; // of the address; a longer one says how much more it holds

function decoded(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a malformed %-escape: shown as written
  }
}

function describe(url) {
  const address = revealText(url.href);
  const cut = address.length > SHOWN_CHARS;
  const where =
    url.protocol === "mailto:"
      ? ["It writes an e-mail to ", h("strong", { class: "link-host" }, revealText(decoded(url.pathname)) || "nobody named")]
      : ["It leads to ", h("strong", { class: "link-host" }, revealText(url.host))];
  return [
    ...where,
    ":",
    h("code", { class: "link-address" }, cut ? `${address.slice(0, SHOWN_CHARS)}…` : address),
    cut ? `(${(address.length - SHOWN_CHARS).toLocaleString()} more characters not shown.) ` : "",
    "A link in an answer can carry what you are working on to that site; open it only if you expected it.",
  ];
}

function parsed(address) {
  try {
    return new URL(address, document.baseURI);
  } catch {
    return null; // the sanitiser keeps only http(s) and mailto addresses: nothing else to open
  }
}

/**
 * Called by the sanitiser on each link it keeps: an address outside the page moves from href to
 * data-href (the link stays a link to keyboards and screen readers); a link within it is left.
 */
export function holdAddress(link) {
  link.classList.add(MODEL_LINK);
  const address = link.getAttribute("href");
  if (address === null || address.startsWith("#")) return;
  link.removeAttribute("href");
  link.dataset.href = address;
  link.setAttribute("role", "link");
  link.setAttribute("tabindex", "0");
  const url = parsed(address);
  if (url && !link.hasAttribute("title")) {
    const where = url.protocol === "mailto:" ? "an e-mail" : url.host;
    link.title = `${where} (asks before it opens)`;
  }
}

async function ask(event) {
  if (event.type === "auxclick" && event.button !== 1) return;
  if (event.type === "keydown" && event.key !== "Enter") return;
  const link = event.target instanceof Element ? event.target.closest(`a.${MODEL_LINK}[data-href]`) : null;
  if (!link) return;
  event.preventDefault();
  const url = parsed(link.dataset.href);
  if (!url) return;
  const yes = await confirmAction({
    title: "Open a link from the model's answer?",
    text: describe(url),
    confirm: "Open link",
  });
  if (yes) window.open(url.href, "_blank", "noopener,noreferrer");
}

let guarded = false;

/** Ask before any model link of this page opens (idempotent: one listener per page). */
export function guardModelLinks() {
  if (guarded) return;
  guarded = true;
  document.addEventListener("click", ask);
  document.addEventListener("auxclick", ask);
  document.addEventListener("keydown", ask); // an href-less link gets no click from Enter
}
