import { setUpCompose } from "./compose.js";
import { ImagePicker } from "./image_picker.js";
import { watchHiddenInput } from "./hidden_input.js";
import { watchLength } from "./length_limit.js";

// The new-notebook form: Ctrl+Enter submits, example prompts fill it in, the preset's
// description follows the picker, and the length limit is shown. The form works without this
// script too (the server refuses an over-long message with the reason and keeps the text).

const form = document.getElementById("new-notebook");
const text = document.getElementById("new-text");
const agent = document.getElementById("new-agent");
const help = document.getElementById("agent-help");
const images = document.getElementById("new-images");
const picker = new ImagePicker(form.querySelector("[data-image-picker]"), form);
const length = watchLength(text, document.getElementById("new-count"));
watchHiddenInput(text, document.getElementById("new-count"));

function pickerFollowsAgent() {
  picker.setEnabled(agent.selectedOptions[0]?.dataset.images === "true");
}

form.addEventListener("submit", (event) => {
  if (length.tooLong()) {
    event.preventDefault();
    text.focus();
    return;
  }
  if (picker.busy) {
    event.preventDefault();
    picker.showError("Wait for the images to finish uploading.");
    return;
  }
  images.value = picker.enabled ? picker.ids().join(",") : "";
});

text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    form.requestSubmit();
  }
});

agent.addEventListener("change", () => {
  help.textContent = agent.selectedOptions[0]?.dataset.help || "";
  pickerFollowsAgent();
});

for (const example of form.querySelectorAll("[data-example]")) {
  example.addEventListener("click", () => {
    text.value = example.dataset.example;
    if ([...agent.options].some((o) => o.value === example.dataset.preset)) {
      agent.value = example.dataset.preset;
      agent.dispatchEvent(new Event("change"));
    }
    if (example.dataset.image) {
      picker.clear();
      picker.addFromUrl(example.dataset.image, "sample-chart.png");
    }
    text.focus();
  });
}

setUpCompose(form, agent);
