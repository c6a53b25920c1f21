// A waiting step's deadline as a countdown ("Rejected automatically in 4:32"), on the notebook's
// card and in the inbox. Elements with data-deadline-at (epoch seconds) and data-deadline-action
// are updated every second by one timer per page.

const ACTION_WORD = { reject: "Rejected", stop: "Stopped", timeout: "Times out" };

/** "4:32", "1:02:09", "12 s": what is left until `at` (epoch seconds). */
export function timeLeft(at, now = Date.now() / 1000) {
  const left = Math.max(0, Math.round(at - now));
  if (left < 60) return `${left} s`;
  const hours = Math.floor(left / 3600);
  const minutes = Math.floor((left % 3600) / 60);
  const seconds = String(left % 60).padStart(2, "0");
  return hours ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
}

export function countdownText(at, action, now = Date.now() / 1000) {
  const word = ACTION_WORD[action] || "Decided";
  if (at <= now) return `${word} automatically any moment now (the deadline has passed)`;
  return `${word} automatically in ${timeLeft(at, now)}`;
}

function tick() {
  for (const el of document.querySelectorAll("[data-deadline-at]")) {
    el.textContent = countdownText(Number(el.dataset.deadlineAt), el.dataset.deadlineAction);
  }
}

let timer = null;

/** A countdown element; the page's timer keeps it current. */
export function countdown(h, at, action) {
  timer ||= setInterval(tick, 1000);
  return h("span", { class: "deadline", role: "timer", dataset: { deadlineAt: String(at), deadlineAction: action } }, countdownText(at, action));
}
