// Where the notebook page stands: it opens at the step waiting for the person, or where they
// left this notebook (kept per user and notebook in localStorage), and what it scrolls into view
// stops above the sticky composer (its height is --composer-height, read by the page's
// scroll-padding-bottom).

import { domId } from "./dom.js";
import { storageKey } from "./split.js";

const SAVE_DELAY_MS = 250;
const NEAR_BOTTOM_PX = 160;

function atBottom() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - NEAR_BOTTOM_PX;
}

export class Landing {
  constructor(root, composer) {
    this.root = root;
    this.key = storageKey(`scroll:${root.dataset.taskId}`);
    this.landed = false;
    this.timer = 0;
    if (composer && "ResizeObserver" in window) {
      new ResizeObserver(() => {
        document.documentElement.style.setProperty("--composer-height", `${Math.ceil(composer.getBoundingClientRect().height)}px`);
      }).observe(composer);
    }
    window.addEventListener("scroll", () => this.#later(), { passive: true });
    window.addEventListener("pagehide", () => this.save());
    if ("scrollRestoration" in history) history.scrollRestoration = "manual"; // this class decides
  }

  /** Once the notebook is first drawn: go to its waiting step, else where the person left it. */
  land(model, perms) {
    if (this.landed || !model.turns.size) return;
    this.landed = true;
    const waiting = perms.canApprove && perms.nextStepId ? document.getElementById(domId("step", perms.nextStepId)) : null;
    if (waiting) {
      this.reveal(waiting);
      return;
    }
    const saved = this.#read();
    if (!saved || saved.atBottom) return; // the page follows the end of the notebook, as before
    // back to the cell that was at the top, as far into it as it was (cells out of view have
    // estimated heights, so a bare scroll offset would land elsewhere)
    const anchor = saved.anchor && document.getElementById(saved.anchor);
    if (anchor) {
      anchor.scrollIntoView({ block: "start" });
      window.scrollBy(0, saved.offset || 0);
    } else window.scrollTo({ top: saved.y });
    this.root.dataset.userScrolled = "true";
  }

  /** Scroll a step so its controls (Approve, Send answer) show above the composer. */
  reveal(cell) {
    const controls = cell.querySelector(".step-controls") || cell;
    const room = window.innerHeight - (parseFloat(getComputedStyle(document.documentElement).scrollPaddingBottom) || 0);
    const tall = controls.getBoundingClientRect().height > room;
    controls.scrollIntoView({ block: tall ? "start" : "end" });
    if (!atBottom()) this.root.dataset.userScrolled = "true";
  }

  save() {
    if (!this.landed) return;
    try {
      const top = this.#topCell();
      const offset = top ? Math.round(-top.getBoundingClientRect().top) : 0;
      localStorage.setItem(this.key, JSON.stringify({ y: Math.round(window.scrollY), atBottom: atBottom(), anchor: top?.id || null, offset }));
    } catch {
      /* storage refused: the position is not remembered */
    }
  }

  /** The first cell reaching the top of the window. */
  #topCell() {
    for (const cell of this.root.querySelectorAll("#cells .cell[id]")) {
      if (cell.getBoundingClientRect().bottom > 0) return cell;
    }
    return null;
  }

  #later() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.save(), SAVE_DELAY_MS);
  }

  #read() {
    try {
      const value = JSON.parse(localStorage.getItem(this.key) || "null");
      return value && Number.isFinite(value.y) ? value : null;
    } catch {
      return null;
    }
  }
}
