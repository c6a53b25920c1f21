// The bar between the cells and the steps panel (notebook and trace): drag it, or focus it and
// press ←/→ (Shift: bigger steps), Home/End. The width is kept per user in localStorage, so every
// notebook opens with the split the person last chose.

const STEP = 16;
const BIG_STEP = 96;
const MIN = 240; // px: the DAG's legend and a node still fit
const MIN_CELLS = 420; // px the cells keep at least

/** Where a person's choices for this page are kept (per user: a shared browser keeps them apart). */
export function storageKey(name) {
  return `agentui:${document.body.dataset.user || "anonymous"}:${name}`;
}

function read(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null; // storage refused (private mode): nothing remembered
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, value);
  } catch {
    /* storage refused or full: the split still works, unremembered */
  }
}

/** Make `handle` resize the grid `layout` (its --dag-width). */
export function splitPane(layout, handle) {
  if (!layout || !handle) return null;
  const key = storageKey("dag-width");
  // at most 60% of the row (notebook.css caps it the same way when the window narrows)
  const max = () => Math.max(MIN, Math.min(layout.clientWidth * 0.6, layout.clientWidth - MIN_CELLS));
  const panel = () => layout.querySelector(".dag-panel");
  const current = () => panel()?.getBoundingClientRect().width || MIN;

  function set(width, remember = true) {
    const px = Math.round(Math.min(max(), Math.max(MIN, width)));
    layout.style.setProperty("--dag-width", `${px}px`);
    handle.setAttribute("aria-valuenow", String(px));
    handle.setAttribute("aria-valuemin", String(MIN));
    handle.setAttribute("aria-valuemax", String(Math.round(max())));
    handle.setAttribute("aria-valuetext", `steps panel ${px} pixels wide`);
    if (remember) write(key, String(px));
    window.dispatchEvent(new CustomEvent("agentui:split", { detail: { width: px } }));
    return px;
  }

  const saved = Number(read(key));
  if (saved > 0) set(saved, false);
  else handle.setAttribute("aria-valuenow", String(Math.round(current())));

  handle.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    event.preventDefault();
    handle.setPointerCapture(event.pointerId);
    handle.classList.add("is-dragging");
    const startX = event.clientX;
    const startWidth = current();
    const move = (e) => set(startWidth + startX - e.clientX, false);
    const up = (e) => {
      handle.releasePointerCapture(e.pointerId);
      handle.classList.remove("is-dragging");
      handle.removeEventListener("pointermove", move);
      handle.removeEventListener("pointerup", up);
      handle.removeEventListener("pointercancel", up);
      set(current());
    };
    handle.addEventListener("pointermove", move);
    handle.addEventListener("pointerup", up);
    handle.addEventListener("pointercancel", up);
  });

  handle.addEventListener("keydown", (event) => {
    const step = event.shiftKey ? BIG_STEP : STEP;
    const widths = { ArrowLeft: current() + step, ArrowRight: current() - step, Home: max(), End: MIN };
    if (!(event.key in widths)) return;
    event.preventDefault();
    set(widths[event.key]);
  });
  return { set, current };
}
