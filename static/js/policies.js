// The Policies page: revoking a rule asks first (the next matching call is asked about again).

import { confirmForms } from "./confirm.js";

confirmForms("form[data-revoke-rule]", (form) => ({
  title: `Revoke “${form.dataset.revokeRule}”?`,
  text: "From the next call on, this rule no longer decides: the mode or another rule does.",
  confirm: "Revoke rule",
}));
