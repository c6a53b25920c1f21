// The person's inbox socket, ws/inbox/ (docs/protocol.md#the-inbox-socket-wsinbox): one per page,
// shared by the nav's waiting count and the Inbox page. Every `inbox` message has the count of
// steps waiting for the person, the whole list on the Inbox page (other pages ask for the count
// only), and in `started` the notebook that has just begun waiting.

import { TaskSocket, socketUrl } from "./socket.js";

class InboxFeed {
  constructor() {
    /** @type {Set<(message: object) => void>} */
    this.listeners = new Set();
    /** @type {Set<(state: string, detail?: string) => void>} */
    this.stateListeners = new Set();
    this.last = null;
    const list = document.body.classList.contains("page-inbox");
    this.socket = new TaskSocket(socketUrl(list ? "/ws/inbox/" : "/ws/inbox/?list=0"), {
      resumes: false,
      lastSeq: () => 0,
      onMessage: (message) => {
        if (message.type !== "inbox") return;
        this.last = message;
        for (const listen of this.listeners) listen(message);
      },
      onState: (state, detail) => {
        for (const listen of this.stateListeners) listen(state, detail);
      },
    });
    this.socket.connect();
  }

  /** Call `listen` with every list (at once with the last one, if there is one). */
  subscribe(listen) {
    this.listeners.add(listen);
    if (this.last) listen({ ...this.last, started: null });
  }

  onState(listen) {
    this.stateListeners.add(listen);
    listen(this.socket.state);
  }

  /** A decision on a waiting step; resolves with the server's `ack` or `error`. */
  decide(fields) {
    return this.socket.send("decide", fields);
  }

  /** Any inbox frame (`decide_request`: a decision on another agent's request). */
  send(action, fields) {
    return this.socket.send(action, fields);
  }
}

let feed = null;

/** The page's one inbox feed. */
export function inboxFeed() {
  feed ||= new InboxFeed();
  return feed;
}
