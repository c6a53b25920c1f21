// Deleting a notebook asks first, naming it (the notebook's header and the list of notebooks);
// the server then deletes it (runs/web/deleting.py) and shows the list of notebooks.

import { CONFIRMED, confirmAction } from "./confirm.js";
import { h } from "./dom.js";
import { proseNodes } from "./hidden.js";

/** What the dialog asks before notebook `title` is deleted (confirmAction's options). */
export function deleteQuestion(title) {
  return {
    // (the person's first message: pasted text may hide characters, shown as markers as on its cell)
    title: ["Delete “", ...proseNodes(title), "”?"],
    text: "Its whole trace (turns, steps, messages, events and images) is deleted for good; a turn going on is stopped first. Its forks stay. The deletion is on record.",
    confirm: "Delete notebook",
  };
}

/** Ask, then post the page's own confirmed delete form to `url` (as the header's form does). */
export async function askAndDelete(url, title) {
  if (!(await confirmAction(deleteQuestion(title)))) return;
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  const form = h(
    "form",
    { method: "post", action: url, hidden: "" },
    h("input", { type: "hidden", name: "csrfmiddlewaretoken", value: csrf }),
    h("input", { type: "hidden", ...CONFIRMED }),
  );
  document.body.append(form);
  form.submit();
}
