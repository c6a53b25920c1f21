// Drawing what is off screen only when it comes near: the trace view builds 500 cells at once,
// and its tables, charts and Markdown would cost seconds to draw up front. The live notebook
// draws at once (what streams is on screen, and tests and people read it straight away).

let lazy = false;
let observer = null;
const waiting = new Map();

/** Draw results and texts only near the viewport from now on (the trace view turns this on). */
export function drawLazily(on = true) {
  lazy = on;
}

function observe() {
  observer ??= new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        observer.unobserve(entry.target);
        const draw = waiting.get(entry.target);
        waiting.delete(entry.target);
        draw?.();
      }
    },
    { rootMargin: "1000px 0px" },
  );
  return observer;
}

/** Run `draw` now, or (when drawing lazily) once `el` is within a screen or so of the viewport. */
export function whenNear(el, draw) {
  if (!lazy || typeof IntersectionObserver === "undefined") {
    draw();
    return;
  }
  waiting.set(el, draw);
  observe().observe(el);
}
