// The API tokens page: revoking a token asks first (a script using it stops working at once).

import { confirmAction } from "./confirm.js";

for (const form of document.querySelectorAll("form[data-revoke]")) {
  form.addEventListener("submit", async (event) => {
    if (form.dataset.confirmed === "true") return;
    event.preventDefault();
    const ok = await confirmAction({
      title: `Revoke the token “${form.dataset.revoke}”?`,
      text: "Scripts that use it are refused from now on. This cannot be undone: a new token has to be created for them.",
      confirm: "Revoke token",
    });
    if (!ok) return;
    form.dataset.confirmed = "true";
    form.requestSubmit();
  });
}
