// The Data page: drop (or pick) a CSV, Parquet or Excel file to upload it as a table of the
// person's own DuckDB database (in parts through /api/v1/data/uploads with the session, a bar
// showing the bytes sent), then list the tables with columns, types and row counts and preview one.
// Database sources an admin granted are listed under them, each with the tables its role can
// read (information_schema) and a preview of one.

import { h, replaceChildren } from "./dom.js";
import { confirmAction } from "./confirm.js";
import { numberCell } from "./render/table.js";

const panel = document.getElementById("data-panel");
const zone = document.getElementById("drop-zone");
const picker = document.getElementById("data-file");
const nameInput = document.getElementById("data-name");
const status = document.getElementById("upload-status");
const label = document.getElementById("upload-label");
const progress = document.getElementById("upload-progress");
const errorBox = document.getElementById("data-error");
const doneBox = document.getElementById("data-done");
const list = document.getElementById("data-tables");
const empty = document.getElementById("tables-empty");
const previewPanel = document.getElementById("preview-panel");
const previewTable = document.getElementById("data-preview");
const sourcesPanel = document.getElementById("sources-panel");
const sourcesList = document.getElementById("data-sources");
const maxBytes = Number(panel.dataset.maxBytes);
const csrf = document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";

function showError(text) {
  errorBox.textContent = text;
  errorBox.hidden = !text;
  if (text) doneBox.hidden = true;
}

function sizeText(bytes) {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(0)} KB`;
  return `${bytes} bytes`;
}

async function api(method, url, body, headers = {}) {
  let response;
  try {
    response = await fetch(url, { method, body, credentials: "same-origin", headers: { "X-CSRFToken": csrf, ...headers } });
  } catch (err) {
    return { ok: false, detail: "could not reach the server" };
  }
  const data = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, ...data, detail: data.detail || (response.ok ? "" : `the server answered ${response.status}`) };
}

/**
 * Upload one file in parts (POST /data/uploads, PUT each part, POST .../finish): every request
 * stays small however large the file, and the bar moves with each part sent.
 */
async function upload(file) {
  showError("");
  doneBox.hidden = true;
  if (file.size > maxBytes) {
    showError(`${file.name} is ${sizeText(file.size)}; files are limited to ${sizeText(maxBytes)}.`);
    return;
  }
  const json = { "Content-Type": "application/json" };
  const started = await api("POST", panel.dataset.startUrl, JSON.stringify({ filename: file.name, size: file.size, name: nameInput.value.trim() }), json);
  if (!started.ok) {
    showError(started.detail);
    return;
  }
  const base = `${panel.dataset.startUrl}/${started.id}`;
  status.hidden = false;
  progress.value = 0;
  label.textContent = `Uploading ${file.name} (${sizeText(file.size)})…`;
  let offset = 0;
  while (offset < file.size) {
    const part = file.slice(offset, offset + started.part_bytes);
    const sent = await api("PUT", `${base}?offset=${offset}`, part, { "Content-Type": "application/octet-stream" });
    if (!sent.ok) {
      status.hidden = true;
      await api("DELETE", base);
      showError(`The upload of ${file.name} failed: ${sent.detail}. Nothing was added.`);
      return;
    }
    offset = sent.received;
    progress.value = Math.round((offset / file.size) * 100);
  }
  label.textContent = `Importing ${file.name} into DuckDB…`;
  const table = await api("POST", `${base}/finish`);
  status.hidden = true;
  if (!table.ok) {
    showError(table.detail);
    return;
  }
  doneBox.textContent = `${file.name} is now the table ${table.name} (${table.rows.toLocaleString("en")} rows).`;
  doneBox.hidden = false;
  nameInput.value = "";
  loadTables(table.name);
}

function filesFrom(event) {
  const files = [...(event.dataTransfer?.files || [])];
  if (files.length !== 1) {
    showError(files.length ? "Drop one file at a time." : "That was not a file.");
    return null;
  }
  return files[0];
}

zone.addEventListener("dragover", (event) => {
  event.preventDefault();
  zone.classList.add("dragging");
});
zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  zone.classList.remove("dragging");
  const file = filesFrom(event);
  if (file) upload(file);
});
// The keyboard's way in: a real button (a focusable drop zone holding a link would nest controls).
document.getElementById("choose-file").addEventListener("click", () => picker.click());
picker.addEventListener("change", () => {
  if (picker.files.length) upload(picker.files[0]);
  picker.value = "";
});

async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `the server answered ${response.status}`);
  return body;
}

async function remove(name) {
  const sure = await confirmAction({
    title: `Delete the table ${name}?`,
    text: "Its rows go from your database. Notebooks that used it keep what they read.",
    confirm: "Delete table",
  });
  if (!sure) return;
  const response = await fetch(`${panel.dataset.tablesUrl}/${encodeURIComponent(name)}`, {
    method: "DELETE",
    credentials: "same-origin",
    headers: { "X-CSRFToken": csrf },
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    showError(body.detail || `Could not delete ${name}: the server answered ${response.status}.`);
  }
  previewPanel.hidden = true;
  loadTables();
loadSources();
}

function showPreview(caption, columns, rows, key) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.name, h("span", { class: "col-type" }, c.type)))));
  // numbers read as in result tables: rounded, right-aligned, the exact value in the tooltip
  const cell = (v) => (typeof v === "number" ? numberCell(v) : h("td", {}, v === null ? "∅" : String(v)));
  const body = h("tbody", {}, rows.map((row) => h("tr", {}, row.map(cell))));
  replaceChildren(previewTable, h("caption", {}, caption), head, body);
  previewPanel.hidden = false;
  for (const item of document.querySelectorAll("li.data-table")) item.classList.toggle("selected", item.dataset.table === key);
}

async function preview(name) {
  try {
    const table = await getJson(`${panel.dataset.tablesUrl}/${encodeURIComponent(name)}?rows=20`);
    showPreview(`${table.name}: the first ${table.preview.length} of ${table.rows.toLocaleString("en")} rows`, table.columns, table.preview, name);
  } catch (err) {
    showError(`Could not preview ${name}: ${err.message}`);
  }
}

function columnList(name, columns) {
  return h("ul", { class: "data-columns", "aria-label": `Columns of ${name}` },
    columns.map((c) => h("li", {}, h("code", {}, c.name), " ", h("span", { class: "col-type" }, c.type))));
}

function sourceUrl(source, ...rest) {
  return [panel.dataset.sourcesUrl, source, ...rest].map((part, i) => (i ? encodeURIComponent(part) : part)).join("/");
}

async function previewSource(source, name) {
  try {
    const table = await getJson(`${sourceUrl(source, "tables", name)}?rows=20`);
    const types = Object.fromEntries(table.columns.map((c) => [c.name, c.type]));
    const columns = table.preview_columns.map((c) => ({ name: c, type: types[c] || "" }));
    showPreview(`${source}: ${table.name}, the first ${table.preview.length} rows`, columns, table.preview, `${source}:${name}`);
  } catch (err) {
    showError(`Could not preview ${name} of ${source}: ${err.message}`);
  }
}

async function loadSourceTables(source, holder) {
  let tables;
  try {
    tables = await getJson(sourceUrl(source, "tables"));
  } catch (err) {
    replaceChildren(holder, h("li", { class: "notice notice-error" }, `Could not read ${source}: ${err.message}`));
    return;
  }
  replaceChildren(
    holder,
    tables.length
      ? tables.map((t) =>
          h("li", { class: "data-table", dataset: { table: `${source}:${t.name}` } },
            h("div", { class: "data-table-head" },
              h("button", { type: "button", class: "button-link table-name", onclick: () => previewSource(source, t.name) }, t.name)),
            columnList(t.name, t.columns)))
      : [h("li", { class: "muted" }, "No tables its role can read.")],
  );
}

async function loadSources() {
  let sources;
  try {
    sources = await getJson(panel.dataset.sourcesUrl);
  } catch (err) {
    showError(`Could not list your database sources: ${err.message}`);
    return;
  }
  sourcesPanel.hidden = sources.length === 0;
  const holders = sources.map((s) => [s.name, h("ul", { class: "data-tables source-tables", "aria-label": `Tables of ${s.name}` }, h("li", { class: "muted" }, "Reading its tables…"))]);
  replaceChildren(
    sourcesList,
    sources.map((s, i) =>
      h("li", { class: "data-source", dataset: { source: s.name } },
        h("div", { class: "data-table-head" },
          h("span", { class: "table-name" }, s.name),
          s.dialect ? h("span", { class: "badge source-dialect" }, s.dialect) : null,
          h("span", { class: "muted table-rows" }, s.description || "")),
        holders[i][1])),
  );
  for (const [name, holder] of holders) loadSourceTables(name, holder);
}

async function loadTables(select) {
  let tables;
  try {
    tables = await getJson(panel.dataset.tablesUrl);
  } catch (err) {
    showError(`Could not list your tables: ${err.message}`);
    return;
  }
  empty.hidden = tables.length > 0;
  replaceChildren(
    list,
    tables.map((t) =>
      h(
        "li",
        { class: "data-table", dataset: { table: t.name } },
        h("div", { class: "data-table-head" },
          h("button", { type: "button", class: "button-link table-name", onclick: () => preview(t.name) }, t.name),
          h("span", { class: "muted table-rows" }, `${t.rows.toLocaleString("en")} rows`),
          h("button", { type: "button", class: "button secondary small", "aria-label": `Delete ${t.name}`, onclick: () => remove(t.name) }, "Delete")),
        columnList(t.name, t.columns),
      ),
    ),
  );
  if (select) preview(select);
}

loadTables();
loadSources();
