// On every page: the nav's count of steps waiting for the person, live, and browser notifications
// when a step starts waiting (only once the person turned them on with the Inbox page's button).

import { inboxFeed } from "./inbox_feed.js";

const NOTIFY_KEY = `agentui-notify:${document.body.dataset.user || ""}`;

/** Whether this browser shows notifications for this user (asked for with a click, and allowed). */
export function notificationsOn() {
  return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
}

/** Turn notifications on (asks the browser's permission; call it from a click) or off. */
export async function setNotifications(on) {
  if (!on) {
    localStorage.removeItem(NOTIFY_KEY);
    return false;
  }
  if (!("Notification" in window)) return false;
  const permission = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
  if (permission !== "granted") return false;
  localStorage.setItem(NOTIFY_KEY, "on");
  return true;
}

function showCount(count) {
  for (const badge of document.querySelectorAll("[data-inbox-count]")) {
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.title = count === 1 ? "1 step waits for you" : `${count} steps wait for you`;
  }
}

function notify(message) {
  const started = message.started;
  if (!started || !notificationsOn()) return;
  // The title is the person's own; a Notification's body is plain text, never markup.
  // an agent's request over agentui's MCP server: its title names the token, not the agent's words
  const asked = started.request != null;
  const shown = new Notification(asked ? "An agent waits for you" : "A step waits for you", {
    body: started.title,
    tag: asked ? `agentui-request-${started.request}` : `agentui-wait-${started.notebook}`, // one per notebook or request, however many tabs are open
  });
  shown.addEventListener("click", () => {
    window.focus();
    location.assign(asked ? "/inbox/" : `/tasks/${started.notebook}/`);
  });
}

if (document.body.dataset.user) {
  inboxFeed().subscribe((message) => {
    showCount(message.count);
    notify(message);
  });
}
