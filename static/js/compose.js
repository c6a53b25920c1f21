import { CONFIRMED, confirmAction } from "./confirm.js";

// "Compose your own" on the new-notebook form: the built-in tool boxes follow the agent picked
// (a box the agent does not have is greyed out, so it is not sent), "Use" has the form's one
// Start begin with a saved preset (its picks shown on the form, greyed out, and a note saying
// they are the preset's; "Use my own picks instead" gives them back), "Edit" loads a saved preset
// into the form (saving then changes it; renaming is editing its name), "Delete" asks first,
// and Enter in the name saves rather than starting a notebook. The form works without this
// script: the server checks every pick and says what does not fit.

/** @param {HTMLFormElement} form @param {HTMLSelectElement} agent */
export function setUpCompose(form, agent) {
  const compose = form.querySelector("#compose");
  if (!compose) return;
  const toolBoxes = [...compose.querySelectorAll("input[name=tools]")];
  const name = compose.querySelector("#compose-name");
  const presetId = compose.querySelector("#compose-preset-id");
  const save = compose.querySelector("#compose-save");
  const editing = compose.querySelector("#compose-editing");
  const mode = form.querySelector("#new-mode");

  function toolsFollowAgent() {
    for (const box of toolBoxes) {
      box.disabled = !box.dataset.agents.split(" ").includes(agent.value);
    }
  }

  function stopEditing() {
    presetId.value = "";
    save.textContent = "Save as my preset";
    editing.hidden = true;
  }

  function tick(selector, values) {
    for (const box of form.querySelectorAll(selector)) {
      box.checked = values === null ? true : values.includes(box.value);
    }
  }

  /** The saved preset's picks, shown on the form. */
  function apply(config) {
    if ([...agent.options].some((o) => o.value === config.agent)) {
      agent.value = config.agent;
      agent.dispatchEvent(new Event("change"));
    }
    if (mode) mode.value = config.mode;
    const model = compose.querySelector("#compose-model");
    model.value = [...model.options].some((o) => o.value === config.model) ? config.model : "";
    tick("input[name=tools]", config.tools);
    tick("input[name=data_tables]", config.data_tables || []);
    tick("input[name=mcp_tools]", config.mcp_tools || []);
  }

  // What a chosen preset decides: every pick but the message and its images.
  const picks = [...form.querySelectorAll("#new-agent, #new-mode, .mcp-tools input, #compose input, #compose select, #compose button")];
  const chosenId = form.querySelector("#user-preset");
  const chosenNote = form.querySelector("#preset-chosen");
  const start = form.querySelector("#new-start");
  const useButtons = [...form.querySelectorAll("[data-use-preset]")];

  function choose(button) {
    stopEditing();
    apply(JSON.parse(button.dataset.config));
    for (const el of picks) {
      el.disabled = true;
      el.setAttribute("aria-describedby", `${el.getAttribute("aria-describedby") || ""} preset-chosen`.trim());
    }
    chosenId.value = button.dataset.usePreset;
    chosenId.disabled = false;
    chosenNote.querySelector("[data-chosen-text]").textContent =
      `Starting with your preset “${button.dataset.name}”: its agent, approval, model, tools, MCP tools and data tables apply, so those picks are greyed out here.`;
    chosenNote.hidden = false;
    start.textContent = `Start with ${button.dataset.name}`;
    for (const other of useButtons) {
      other.setAttribute("aria-pressed", String(other === button));
      other.closest(".my-preset").classList.toggle("is-chosen", other === button);
    }
  }

  function unchoose() {
    if (chosenId.disabled) return;
    for (const el of picks) {
      el.disabled = false;
      const rest = (el.getAttribute("aria-describedby") || "").replace(/\s*preset-chosen\b/, "").trim();
      if (rest) el.setAttribute("aria-describedby", rest);
      else el.removeAttribute("aria-describedby");
    }
    toolsFollowAgent();
    chosenId.value = "";
    chosenId.disabled = true;
    chosenNote.hidden = true;
    start.textContent = "Start";
    for (const other of useButtons) {
      other.setAttribute("aria-pressed", "false");
      other.closest(".my-preset").classList.remove("is-chosen");
    }
  }

  function load(button) {
    unchoose();
    apply(JSON.parse(button.dataset.config));
    name.value = button.dataset.name;
    presetId.value = button.dataset.editPreset;
    save.textContent = "Save changes";
    editing.querySelector("[data-editing-text]").textContent =
      `Editing “${button.dataset.name}”: saving changes it (rename it here).`;
    editing.hidden = false;
    compose.open = true;
    name.focus();
    name.select();
  }

  agent.addEventListener("change", toolsFollowAgent);
  toolsFollowAgent();
  compose.querySelector("#compose-new")?.addEventListener("click", () => {
    stopEditing();
    name.focus();
  });
  name.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      form.requestSubmit(save);
    }
  });
  for (const button of form.querySelectorAll("[data-edit-preset]")) {
    button.addEventListener("click", () => load(button));
  }
  for (const button of useButtons) {
    button.addEventListener("click", () => (button.getAttribute("aria-pressed") === "true" ? unchoose() : choose(button)));
  }
  form.querySelector("#preset-unchoose")?.addEventListener("click", unchoose);
  // the start page's link to a preset opens this page with it shown: chosen, ready to start
  const shown = form.querySelector(".my-preset.is-shown [data-use-preset]");
  if (shown) choose(shown);
  for (const button of form.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", async (event) => {
      if (button.dataset.confirmed) return;
      event.preventDefault();
      const yes = await confirmAction({
        title: "Delete preset",
        text: `${button.dataset.confirm} Notebooks started from it keep their settings.`,
        confirm: "Delete",
      });
      if (!yes) return;
      button.dataset.confirmed = "1";
      // sent by this button only (not by Start or Save), so the server deletes without asking again
      button.name = CONFIRMED.name;
      button.value = CONFIRMED.value;
      form.requestSubmit(button);
    });
    button.dataset.confirmReady = "true"; // as confirm.js marks the forms it guards
  }
}
