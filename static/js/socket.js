// The notebook's websocket (docs/protocol.md): connect, resume from the last stored event,
// reconnect with backoff when the connection drops, and tag every action with a request id so
// an `ack` or `error` finds its way back to the control that sent it.

/**
 * A running step whose socket has said nothing for this long asks for what was stored meanwhile:
 * a channel layer drops copies when a socket's queue is full (a busy server), and a gap is
 * otherwise noticed only when a later event arrives, which after a turn's last event never does.
 */
const QUIET_RESYNC_MS = 8_000;

/** What the connection says once the notebook was deleted (close code 4410). */
export const DELETED_NOTE = "This notebook was deleted.";

/** Close codes after which reconnecting cannot help. */
const FATAL_CLOSE = new Map([
  [4401, "You are logged out. Log in again."],
  [4403, "This notebook belongs to someone else."],
  [4404, "This notebook does not exist (any more)."],
  [4410, DELETED_NOTE],
]);
/** The server's limit of open sockets per person (AGENTUI_SOCKETS_PER_USER): try again later. */
const TOO_MANY_SOCKETS = 4429;

export class TaskSocket {
  /**
   * @param {string} url  absolute ws:// or wss:// URL
   * @param {object} handlers
   * @param {(message: object) => void} handlers.onMessage  every server message except ack/error
   * @param {(state: string, detail?: string) => void} handlers.onState  connecting|open|closed|fatal
   * @param {() => number} handlers.lastSeq  the last stored event this page has applied
   * @param {() => boolean} [handlers.expectingMore]  true while a step runs (events are due)
   * @param {boolean} [handlers.resumes]  false for a socket with no stored events to resume (the inbox's)
   */
  constructor(url, { onMessage, onState, lastSeq, expectingMore = () => false, resumes = true }) {
    this.url = url;
    this.resumes = resumes;
    this.onMessage = onMessage;
    this.onState = onState;
    this.lastSeq = lastSeq;
    this.expectingMore = expectingMore;
    this.heardAt = performance.now();
    this.quietTimer = setInterval(() => this.#resyncIfQuiet(), QUIET_RESYNC_MS / 4);
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.closedByUs = false;
    this.requestCounter = 0;
    /** @type {Map<string, {action: string, resolve: Function}>} */
    this.pending = new Map();
    this.state = "idle";
    this.prefix = Math.random().toString(36).slice(2, 8);
  }

  connect() {
    clearTimeout(this.timer);
    this.closedByUs = false;
    this.#setState("connecting");
    let ws;
    try {
      ws = new WebSocket(this.url);
    } catch (err) {
      this.#scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.attempt = 0;
      this.heardAt = performance.now();
      this.#setState("open");
      // Ask for everything after what we have; the server replays it, then continues live.
      if (this.resumes) this.#raw({ action: "resume", last_seq: this.lastSeq() });
    });
    ws.addEventListener("message", (e) => this.#receive(e.data));
    ws.addEventListener("close", (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.#failPending("The connection dropped before the server answered.");
      if (FATAL_CLOSE.has(e.code)) {
        this.#setState("fatal", FATAL_CLOSE.get(e.code));
        return;
      }
      if (this.closedByUs) {
        this.#setState("closed");
        return;
      }
      if (e.code === TOO_MANY_SOCKETS) {
        this.#scheduleReconnect("You have too many pages of agentui open; close some.");
        return;
      }
      this.#scheduleReconnect();
    });
  }

  /** Close for good (page teardown). */
  close() {
    this.closedByUs = true;
    clearTimeout(this.timer);
    clearInterval(this.quietTimer);
    this.ws?.close(1000);
  }

  /** Drop the connection as a network failure would (tests, "reconnect now"). */
  drop() {
    this.ws?.close(4000, "dropped by the page");
  }

  /** Resume again from lastSeq (after a gap in the stored events). */
  resync() {
    this.#raw({ action: "resume", last_seq: this.lastSeq() });
  }

  get isOpen() {
    return this.ws != null && this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * Send an action; resolves with the server's `ack` or `error` message (never rejects).
   * An error for a closed socket is made up locally, with code "offline".
   */
  send(action, fields = {}) {
    const requestId = `${this.prefix}-${++this.requestCounter}`;
    if (!this.isOpen) {
      return Promise.resolve({ type: "error", code: "offline", reason: "Not connected; reconnecting…", request_id: requestId, action });
    }
    return new Promise((resolve) => {
      this.pending.set(requestId, { action, resolve });
      this.#raw({ action, request_id: requestId, ...fields });
    });
  }

  #raw(message) {
    this.ws?.send(JSON.stringify(message));
  }

  #resyncIfQuiet() {
    if (!this.isOpen || !this.expectingMore()) return;
    if (performance.now() - this.heardAt < QUIET_RESYNC_MS) return;
    this.heardAt = performance.now(); // once per quiet spell, not on every tick
    this.resync();
  }

  #receive(data) {
    this.heardAt = performance.now();
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    if ((message.type === "ack" || message.type === "error") && message.request_id && this.pending.has(message.request_id)) {
      const { resolve } = this.pending.get(message.request_id);
      this.pending.delete(message.request_id);
      resolve(message);
      return;
    }
    this.onMessage(message);
  }

  #failPending(reason) {
    for (const [requestId, { action, resolve }] of this.pending) {
      resolve({ type: "error", code: "offline", reason, request_id: requestId, action });
    }
    this.pending.clear();
  }

  #scheduleReconnect(why = "") {
    // 0.5 s, 1 s, 2 s … capped at 10 s, with jitter so many tabs do not reconnect in step.
    const base = Math.min(10_000, 500 * 2 ** this.attempt);
    const delay = base / 2 + Math.random() * (base / 2);
    this.attempt++;
    const again = `Reconnecting in ${Math.ceil(delay / 1000)} s…`;
    this.#setState("closed", why ? `${why} ${again}` : again);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  #setState(state, detail) {
    this.state = state;
    this.onState(state, detail);
  }
}

/** ws:// or wss:// URL for a path on this page's host. */
export function socketUrl(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}
