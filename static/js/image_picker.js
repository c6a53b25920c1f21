// Images for a message: picked, dropped or pasted; checked here (type, size) and uploaded at
// once to /api/images/, which checks again from the bytes. A refusal is shown next to the
// control and nothing is attached; the thumbnails can be removed before sending.

import { h, replaceChildren } from "./dom.js";

const ACCEPTED = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"]);

function sizeText(bytes) {
  return bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MB` : `${Math.round(bytes / 1024)} KB`;
}

function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  if (field) return field.value;
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.split("=")[1]) : "";
}

export class ImagePicker {
  /**
   * @param {HTMLElement} root   the [data-image-picker] element
   * @param {HTMLElement} dropTarget  where files may be dropped and pasted (the form)
   */
  constructor(root, dropTarget) {
    this.root = root;
    this.input = root.querySelector("input[type=file]");
    this.error = root.querySelector("[data-image-error]");
    this.list = root.querySelector("[data-image-list]");
    this.uploadUrl = root.dataset.uploadUrl;
    this.maxBytes = Number(root.dataset.maxBytes);
    this.maxCount = Number(root.dataset.maxCount) || 4;
    /** @type {{id: number, url: string, name: string}[]} */
    this.images = [];
    this.pending = 0;
    this.input.addEventListener("change", () => {
      this.add([...this.input.files]);
      this.input.value = "";
    });
    dropTarget.addEventListener("dragover", (event) => {
      if (this.root.hidden || !event.dataTransfer?.types.includes("Files")) return;
      event.preventDefault();
      dropTarget.classList.add("is-over");
    });
    dropTarget.addEventListener("dragleave", () => dropTarget.classList.remove("is-over"));
    dropTarget.addEventListener("drop", (event) => {
      dropTarget.classList.remove("is-over");
      if (this.root.hidden || !event.dataTransfer?.files.length) return;
      event.preventDefault();
      this.add([...event.dataTransfer.files]);
    });
    dropTarget.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (this.root.hidden || !files.length) return;
      event.preventDefault();
      this.add(files);
    });
    dropTarget.classList.add("image-drop");
  }

  get enabled() {
    return !this.root.hidden;
  }

  setEnabled(on) {
    this.root.hidden = !on;
    if (!on) this.clear();
  }

  ids() {
    return this.images.map((i) => i.id);
  }

  get busy() {
    return this.pending > 0;
  }

  clear() {
    this.images = [];
    this.showError(null);
    this.#render();
  }

  showError(message) {
    this.error.hidden = !message;
    this.error.textContent = message || "";
  }

  /** Check and upload each file; the first refusal is shown. */
  async add(files) {
    this.showError(null);
    for (const file of files) {
      const problem = this.#check(file);
      if (problem) {
        this.showError(problem);
        continue;
      }
      await this.#upload(file, file.name || "pasted image");
    }
  }

  /** Attach an image from a URL of this site (the demo's sample chart). */
  async addFromUrl(url, name) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) {
      this.showError(`Could not load ${name}.`);
      return;
    }
    const blob = await response.blob();
    await this.add([new File([blob], name, { type: blob.type })]);
  }

  #check(file) {
    const name = file.name || "The pasted file";
    if (this.images.length >= this.maxCount) return `A message may carry at most ${this.maxCount} images.`;
    if (!ACCEPTED.has(file.type)) return `${name} is not an image this agent takes (PNG, JPEG, WebP or GIF).`;
    if (file.size > this.maxBytes) return `${name} is ${sizeText(file.size)}; images may be at most ${sizeText(this.maxBytes)}.`;
    return null;
  }

  async #upload(file, name) {
    const body = new FormData();
    body.append("image", file, name);
    this.pending++;
    this.root.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(this.uploadUrl, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
      });
      const reply = await response.json().catch(() => ({}));
      if (!response.ok) {
        this.showError(reply.error || `The upload of ${name} failed (HTTP ${response.status}).`);
        return;
      }
      this.images.push(reply);
      this.#render();
    } catch (error) {
      this.showError(`The upload of ${name} failed: ${error.message}`);
    } finally {
      this.pending--;
      if (!this.pending) this.root.removeAttribute("aria-busy");
    }
  }

  /** Let the server drop a removed upload, so it no longer counts as unsent (best effort). */
  #discard(image) {
    fetch(image.url, {
      method: "DELETE",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    }).catch(() => {});
  }

  #render() {
    replaceChildren(
      this.list,
      this.images.map((image) =>
        h(
          "div",
          { class: "composer-image", "data-image-id": String(image.id) },
          h("img", { src: image.url, alt: `Attached image ${image.name}`, class: "image-thumb-img" }),
          h(
            "button",
            {
              type: "button",
              class: "button small",
              "aria-label": `Remove ${image.name}`,
              onclick: () => {
                this.images = this.images.filter((i) => i !== image);
                this.#render();
                this.#discard(image);
              },
            },
            "×",
          ),
        ),
      ),
    );
  }
}
