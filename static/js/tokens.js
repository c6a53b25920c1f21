// The API tokens page: revoking a token asks first (a script using it stops working at once).

import { confirmForms } from "./confirm.js";

confirmForms("form[data-revoke]", (form) => ({
  title: `Revoke the token “${form.dataset.revoke}”?`,
  text: "Scripts that use it are refused from now on. This cannot be undone: a new token has to be created for them.",
  confirm: "Revoke token",
}));
