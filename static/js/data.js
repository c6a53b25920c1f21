// The Data page: drop (or pick) a CSV, Parquet or Excel file to upload it as a table of the
// person's own DuckDB database (POST /api/v1/data/files with the session, progress shown while
// it uploads), then list the tables with columns, types and row counts and preview one.

import { h, replaceChildren } from "./dom.js";

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

/** Upload one file with XMLHttpRequest (fetch reports no upload progress). */
function upload(file) {
  showError("");
  doneBox.hidden = true;
  if (file.size > maxBytes) {
    showError(`${file.name} is ${sizeText(file.size)}; files are limited to ${sizeText(maxBytes)}.`);
    return;
  }
  const form = new FormData();
  form.append("file", file);
  if (nameInput.value.trim()) form.append("name", nameInput.value.trim());
  const xhr = new XMLHttpRequest();
  xhr.open("POST", panel.dataset.uploadUrl);
  xhr.setRequestHeader("X-CSRFToken", csrf);
  xhr.responseType = "json";
  status.hidden = false;
  progress.value = 0;
  label.textContent = `Uploading ${file.name} (${sizeText(file.size)})…`;
  xhr.upload.addEventListener("progress", (event) => {
    if (!event.lengthComputable) return;
    progress.value = Math.round((event.loaded / event.total) * 100);
    if (event.loaded === event.total) label.textContent = `Importing ${file.name} into DuckDB…`;
  });
  xhr.addEventListener("load", () => {
    status.hidden = true;
    const body = xhr.response || {};
    if (xhr.status === 201) {
      doneBox.textContent = `${file.name} is now the table ${body.name} (${body.rows.toLocaleString()} rows).`;
      doneBox.hidden = false;
      nameInput.value = "";
      loadTables(body.name);
    } else {
      showError(body.detail || `The upload failed: the server answered ${xhr.status}.`);
    }
  });
  xhr.addEventListener("error", () => {
    status.hidden = true;
    showError("The upload failed: could not reach the server. Nothing was added.");
  });
  xhr.send(form);
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
zone.addEventListener("keydown", (event) => {
  if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    picker.click();
  }
});
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
  if (!confirm(`Delete the table ${name}? Notebooks that used it keep what they read.`)) return;
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
}

async function preview(name) {
  try {
    const table = await getJson(`${panel.dataset.tablesUrl}/${encodeURIComponent(name)}?rows=20`);
    const head = h("thead", {}, h("tr", {}, table.columns.map((c) => h("th", { scope: "col" }, c.name, h("span", { class: "col-type" }, c.type)))));
    const body = h("tbody", {}, table.preview.map((row) => h("tr", {}, row.map((v) => h("td", {}, v === null ? "∅" : String(v))))));
    replaceChildren(previewTable, h("caption", {}, `${table.name}: the first ${table.preview.length} of ${table.rows.toLocaleString()} rows`), head, body);
    previewPanel.hidden = false;
    for (const item of list.querySelectorAll("li")) item.classList.toggle("selected", item.dataset.table === name);
  } catch (err) {
    showError(`Could not preview ${name}: ${err.message}`);
  }
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
          h("span", { class: "muted table-rows" }, `${t.rows.toLocaleString()} rows`),
          h("button", { type: "button", class: "button secondary small", "aria-label": `Delete ${t.name}`, onclick: () => remove(t.name) }, "Delete")),
        h("ul", { class: "data-columns", "aria-label": `Columns of ${t.name}` },
          t.columns.map((c) => h("li", {}, h("code", {}, c.name), " ", h("span", { class: "col-type" }, c.type)))),
      ),
    ),
  );
  if (select) preview(select);
}

loadTables();
