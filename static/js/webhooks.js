// The webhooks page: deleting a webhook asks first (its receiver stops hearing at once).

import { confirmForms } from "./confirm.js";

confirmForms("form[data-delete-webhook]", (form) => ({
  title: "Delete this webhook?",
  text: `Nothing more is sent to ${form.dataset.deleteWebhook}, and its delivery log goes with it.`,
  confirm: "Delete webhook",
}));
