// The message length limit, shown instead of enforced by `maxlength` (which cuts a paste
// silently): a counter once the text nears the limit, a clear message over it, and the form
// refuses to send until the text fits. The server refuses over-long messages too.

const NEAR = 0.8; // the counter shows from 80 % of the limit

/**
 * Watch a textarea with `data-max-chars` and a counter element.
 * @param {HTMLTextAreaElement} text
 * @param {HTMLElement} counter
 * @returns {{tooLong: () => string|null}}  the reason the text cannot be sent, or null
 */
export function watchLength(text, counter) {
  const limit = Number(text.dataset.maxChars);
  const format = (n) => n.toLocaleString("en");
  const tooLong = () => {
    const over = text.value.length - limit;
    return over > 0 ? `The message is ${format(over)} characters too long: a message may have at most ${format(limit)}. Shorten it to send it.` : null;
  };
  const show = () => {
    const length = text.value.length;
    const reason = tooLong();
    counter.hidden = length < limit * NEAR;
    counter.textContent = reason ?? `${format(length)} / ${format(limit)} characters`;
    counter.classList.toggle("is-over", reason != null);
    if (reason) text.setAttribute("aria-invalid", "true");
    else text.removeAttribute("aria-invalid");
  };
  text.addEventListener("input", show);
  show();
  return { tooLong };
}
