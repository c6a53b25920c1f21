// Model output is untrusted: every piece of HTML built from it passes DOMPurify with an allow-list
// of what Markdown produces (why DOMPurify in the page and not nh3 on the server: docs/rendering.md). No script, no event handlers, no styles, no images or frames (so no
// remote resource loads), links only to http(s)/mailto and always rel="noopener noreferrer",
// each asking before it opens (outbound.js).

import DOMPurify from "../../vendor/dompurify/purify.es.mjs";
import { guardModelLinks, holdAddress } from "./outbound.js";

const TAGS = [
  "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li",
  "strong", "em", "del", "s", "code", "pre", "a", "span", "div",
  "table", "thead", "tbody", "tr", "th", "td",
];
const ATTRS = ["href", "title", "class", "start", "colspan", "rowspan"];
const ALIGN = /^text-align:\s*(left|right|center);?$/i;

const purify = DOMPurify(window);
purify.addHook("uponSanitizeAttribute", (node, data) => {
  // markdown.js writes GFM column alignment as a class; a style that got here anyway becomes one.
  if (data.attrName === "style") {
    const align = ALIGN.exec(data.attrValue.trim());
    if (align) node.classList.add(`align-${align[1].toLowerCase()}`);
    data.keepAttr = false;
  }
  if (data.attrName === "class" && !/^[\w\s-]*$/.test(data.attrValue)) data.keepAttr = false;
});
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("rel", "noopener noreferrer");
    holdAddress(node); // a click asks first; the address is out of the browser's reach (outbound.js)
  }
});
guardModelLinks();

// Set once: parsing the configuration on every call would cost more than many sanitisations.
purify.setConfig({
  ALLOWED_TAGS: TAGS,
  ALLOWED_ATTR: ATTRS,
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  KEEP_CONTENT: true,
  RETURN_DOM_FRAGMENT: true,
});

/** A DocumentFragment of `html` with everything outside the allow-list removed. */
export function sanitize(html) {
  return purify.sanitize(html.trim());
}

/** The same for a piece of HTML added inside an element: its leading and trailing space count. */
export function sanitizePart(html) {
  return purify.sanitize(html);
}

/** What the last sanitize call removed (for tests and the console). */
export function removed() {
  return purify.removed;
}
