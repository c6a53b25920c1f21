// The webhooks page: deleting a webhook asks first (its receiver stops hearing at once).

import { confirmAction } from "./confirm.js";

for (const form of document.querySelectorAll("form[data-delete-webhook]")) {
  form.addEventListener("submit", async (event) => {
    if (form.dataset.confirmed === "true") return;
    event.preventDefault();
    const ok = await confirmAction({
      title: "Delete this webhook?",
      text: `Nothing more is sent to ${form.dataset.deleteWebhook}, and its delivery log goes with it.`,
      confirm: "Delete webhook",
    });
    if (!ok) return;
    form.dataset.confirmed = "true";
    form.requestSubmit();
  });
}
