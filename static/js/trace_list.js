// The trace list: search and filters over GET /api/tasks/, with paging. The filters live in the
// page's query string, so a filtered list can be bookmarked and the back button works.

import { formatDuration, h, postJson } from "./dom.js";
import { timeElement } from "./format.js";
import { formatUsd } from "./cost.js";
import { proseNodes, revealProse } from "./hidden.js";
import { plainLine } from "./render/plain.js";
import { askAndDelete } from "./delete_notebook.js";

const form = document.getElementById("trace-filters");
const rows = document.getElementById("trace-rows");
const count = document.getElementById("trace-count");
const errorBox = document.getElementById("trace-error");
const info = document.getElementById("page-info");
const prev = document.getElementById("page-prev");
const next = document.getElementById("page-next");
const FIELDS = ["q", "agent", "status", "corrected", "created_after", "created_before"];
const MODES = JSON.parse(form.dataset.modes || "{}");
const deleteUrl = (id) => form.dataset.deleteUrl.replace(/0\/delete$/, `${id}/delete`);
// Labels for the codes the API returns, from the filters' own options.
const optionLabels = (name) => Object.fromEntries([...form.elements[name].options].filter((o) => o.value).map((o) => [o.value, o.textContent]));
const AGENTS = optionLabels("agent");
const STATUSES = optionLabels("status");
const STATUS_CLASS = { idle: "completed", running: "running", waiting: "pending", failed: "failed", interrupted: "interrupted" };

const compareButton = document.getElementById("compare-picked");
/** Notebooks picked for Compare (kept across pages and searches), in the order picked. */
const picked = new Map();
let page = Number(new URLSearchParams(location.search).get("page")) || 1;
let controller = null;
let debounce = 0;

function filters() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = form.elements[name].value.trim();
    if (value) params.set(name, value);
  }
  return params;
}

/** The list and paging of an /api/tasks/ answer ({results, count, page, pages}). */
export function pageOf(data) {
  const items = data.results || [];
  const current = data.page || 1;
  const pages = data.pages || 1;
  return { items, total: data.count ?? items.length, current, pages, hasNext: current < pages, hasPrev: current > 1 };
}

function traceUrl(id) {
  return form.dataset.traceUrl.replace(/\/0\/$/, `/${id}/`);
}

/** How the notebook's last turn ended, as a badge: answered, stopped (by whom, where), failed… */
export function outcomeOf(task) {
  switch (task.outcome) {
    case "answered":
      return { text: "answered", cls: "completed" };
    case "stopped": {
      const steps = task.stopped_steps?.length ? task.stopped_steps : task.step ? [task.step] : [];
      const where = steps.length ? ` at step${steps.length > 1 ? "s" : ""} ${steps.join(", ")}` : "";
      return { text: `stopped${task.by ? ` by ${task.by}` : ""}${where}`, cls: "interrupted" };
    }
    case "max_iterations":
      return { text: "max iterations", cls: "interrupted" };
    case "failed":
      return { text: "failed", cls: "failed" };
    case "interrupted":
      return { text: "interrupted", cls: "interrupted" };
    case "waiting":
      return { text: "waiting for you", cls: "pending" };
    case "running":
      return { text: "running", cls: "running" };
    default:
      return { text: "no turns", cls: "pending" };
  }
}

const number = (n) => (n ?? 0).toLocaleString("en");
const plural = (n, one, many) => `${number(n)} ${n === 1 ? one : many}`;

/** What people corrected in the notebook (edits, rejections, corrected answers), or nothing. */
export function correctionsNote(counts) {
  if (!counts) return null;
  const parts = [
    counts.edits ? plural(counts.edits, "edit", "edits") : "",
    counts.rejections ? plural(counts.rejections, "rejected call", "rejected calls") : "",
    counts.corrected_answers ? plural(counts.corrected_answers, "corrected answer", "corrected answers") : "",
  ].filter(Boolean);
  return parts.length ? h("span", { class: "trace-corrections" }, `Corrected: ${parts.join(" · ")}`) : null;
}
// USD from the stored tokens at the model's price; null when the model has no price (said so,
// never $0); the exact figure in the tooltip.
function costCell(usd) {
  if (usd == null) return h("td", { class: "num cost-unknown", "data-col": "cost", title: "No price is set for this model (Django admin: Model prices), so the cost is unknown" }, "price unknown");
  return h("td", { class: "num", "data-col": "cost", "data-cost-usd": String(usd), title: `$${usd} exactly` }, formatUsd(usd));
}

function showPicked() {
  const names = [...picked.values()];
  compareButton.disabled = names.length !== 2;
  const ask = ["Compare: pick two notebooks", "Compare: pick one more"][names.length] || "Compare: pick only two";
  compareButton.textContent = names.length === 2 ? `Compare ${names[0]} with ${names[1]}` : ask;
  addButton.disabled = names.length === 0;
  addButton.textContent = names.length ? `Add ${plural(names.length, "notebook", "notebooks")} to dataset` : "Add to dataset: pick notebooks";
}

// --- Add the picked notebooks to a dataset (a new version of it), over REST ------------------

const addForm = document.getElementById("add-to-dataset");
const addButton = document.getElementById("add-picked");
const datasetPick = document.getElementById("dataset-pick");
const newName = document.getElementById("dataset-new-name");
const addedBox = document.getElementById("dataset-added");
const datasetUrl = (id) => addForm.dataset.datasetUrl.replace(/\/0\/$/, `/${id}/`);

datasetPick.addEventListener("change", () => {
  newName.closest("label").hidden = datasetPick.value !== "new";
});

function saidAdded(name, id, version) {
  const link = h("a", { href: datasetUrl(id) }, `Open “${name}”`);
  addedBox.className = "notice notice-ok";
  addedBox.replaceChildren(`Added to “${name}”: version ${version.number} holds ${plural(version.example_count, "example", "examples")} (+${version.added} ~${version.changed}). `, link);
  addedBox.hidden = false;
}

addForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const notebooks = [...picked.keys()].map(Number);
  if (!notebooks.length) return;
  const base = addForm.dataset.datasetsUrl;
  const isNew = datasetPick.value === "new";
  addButton.disabled = true;
  const answer = isNew
    ? await postJson(base, { name: newName.value, notebooks })
    : await postJson(`${base}${datasetPick.value}/examples`, { notebooks });
  addButton.disabled = false;
  if (answer.error) {
    addedBox.className = "notice";
    addedBox.textContent = `Not added: ${answer.error}`;
    addedBox.hidden = false;
    return;
  }
  if (isNew) {
    datasetPick.prepend(h("option", { value: String(answer.id) }, answer.name));
    datasetPick.value = String(answer.id);
    newName.value = "";
    newName.closest("label").hidden = true;
    saidAdded(answer.name, answer.id, answer.version_list[0]);
  } else {
    saidAdded(datasetPick.selectedOptions[0].textContent, datasetPick.value, answer);
  }
  picked.clear();
  for (const box of rows.querySelectorAll("input.pick")) box.checked = false;
  showPicked();
});

function pickBox(id, title) {
  const box = h("input", { type: "checkbox", class: "pick", "aria-label": `Pick ${title}`, checked: picked.has(id) });
  box.addEventListener("change", () => {
    if (box.checked) picked.set(id, title);
    else picked.delete(id);
    showPicked();
  });
  return box;
}

compareButton.addEventListener("click", () => {
  const [a, b] = picked.keys();
  window.location.assign(`${compareButton.dataset.compareUrl}?a=${a}&b=${b}`);
});

function forkNote(origin) {
  if (!origin) return null;
  const where = `turn ${origin.turn}, step ${origin.step}`;
  return h(
    "span",
    { class: "trace-fork" },
    "fork of ",
    origin.url ? h("a", { href: origin.url }, origin.title) : "a deleted notebook",
    ` at ${where}`,
  );
}

// The columns are narrow (they all fit at 1280 wide): what may be cut short says itself in full
// on hover.
const labelled = (tag, cls, text) => h(tag, { class: cls, title: text }, text);
const figure = (col, text) => h("td", { class: "num", "data-col": col, title: String(text) }, text);

function row(task) {
  const id = task.id ?? task.pk;
  const outcome = outcomeOf(task);
  const status = task.status || "";
  const title = task.title || `Notebook ${id}`;
  return h(
    "tr",
    { "data-task-id": id },
    h("td", {}, pickBox(id, title)),
    h(
      "td",
      { class: "trace-title" },
      h("a", { href: traceUrl(id), dir: "auto", title: revealProse(title) }, proseNodes(title)), // the person's first message
      h(
        "span",
        { class: "muted trace-row-actions" },
        h("a", { href: task.url || `/tasks/${id}/`, class: "muted" }, "open notebook"),
        " · ",
        h(
          "button",
          {
            type: "button",
            class: "button-link danger trace-delete",
            "aria-label": `Delete “${title}”`,
            onclick: () => askAndDelete(deleteUrl(id), title),
          },
          "delete",
        ),
      ),
      forkNote(task.forked_from),
      correctionsNote(task.corrections),
      task.answer ? h("span", { class: "trace-answer", dir: "auto", title: revealProse(task.answer) }, proseNodes(plainLine(task.answer))) : null,
    ),
    h("td", { class: "trace-agent" }, labelled("span", "badge", AGENTS[task.agent] || task.agent || ""), labelled("span", "trace-mode muted", MODES[task.mode] || task.mode || "")),
    h("td", {}, labelled("span", `badge status status-${STATUS_CLASS[status] || "pending"}`, STATUSES[status] || status)),
    h("td", { class: "trace-outcome" }, labelled("span", `badge status status-${outcome.cls}`, outcome.text)),
    figure("turns", task.turns ?? ""),
    figure("steps", number(task.steps)),
    figure("tool-calls", number(task.tool_calls)),
    figure("tokens", number(task.tokens)),
    costCell(task.cost_usd),
    figure("wall-time", task.wall_time_s ? formatDuration(task.wall_time_s) : "—"),
    figure("human-actions", number(task.human_actions)),
    h("td", { class: "trace-when" }, timeElement(task.updated_at || task.created_at)),
  );
}

async function load({ push = false } = {}) {
  const params = filters();
  if (page > 1) params.set("page", String(page));
  const query = params.toString();
  const pageUrl = `${location.pathname}${query ? `?${query}` : ""}`;
  if (push) history.pushState(null, "", pageUrl);
  else history.replaceState(null, "", pageUrl);
  controller?.abort();
  controller = new AbortController();
  count.textContent = "Loading…";
  let data;
  try {
    const response = await fetch(`${form.dataset.apiUrl}?${query}`, { headers: { Accept: "application/json" }, signal: controller.signal, credentials: "same-origin" });
    data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || data.detail || `the server answered ${response.status}`);
  } catch (err) {
    if (err.name === "AbortError") return;
    errorBox.textContent = `Could not load the list: ${err.message}`;
    errorBox.hidden = false;
    count.textContent = "";
    return;
  }
  errorBox.hidden = true;
  const result = pageOf(data);
  rows.replaceChildren(...result.items.map(row));
  rows.dataset.query = query;  // which filters the rows shown answer (tests wait on it)
  if (!result.items.length) rows.append(h("tr", {}, h("td", { colspan: "13", class: "muted" }, params.toString() ? "No notebook matches these filters." : "No notebooks yet.")));
  count.textContent = `${result.total.toLocaleString("en")} notebook${result.total === 1 ? "" : "s"}`;
  info.textContent = result.pages > 1 ? `Page ${result.current} of ${result.pages}` : "";
  info.parentElement.hidden = result.pages <= 1;
  prev.disabled = !result.hasPrev;
  next.disabled = !result.hasNext;
  page = result.current;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  page = 1;
  load({ push: true });
});
form.addEventListener("input", (event) => {
  // Search as you type (debounced); selects and the date apply at once.
  clearTimeout(debounce);
  page = 1;
  debounce = setTimeout(() => load(), event.target.name === "q" ? 300 : 0);
});
prev.addEventListener("click", () => {
  page = Math.max(1, page - 1);
  load({ push: true });
});
next.addEventListener("click", () => {
  page += 1;
  load({ push: true });
});
window.addEventListener("popstate", () => {
  const params = new URLSearchParams(location.search);
  for (const name of FIELDS) form.elements[name].value = params.get(name) || "";
  page = Number(params.get("page")) || 1;
  showPicked();
load();
});

showPicked();
load();
