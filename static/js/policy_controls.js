// The batch and rule controls of a waiting step's card (issue 30): approve and remember its
// tools (in this notebook, or in all my notebooks: an approval rule, runs/service/policies),
// reject every pending call with one reason, approve every waiting branch of a parallel step.

import { domId, h } from "./dom.js";
import { revealText } from "./hidden.js";

function button(label, action, allowed, describedBy) {
  const el = h("button", { type: "button", class: "button secondary", "data-action": action, "data-allowed": String(allowed), "aria-describedby": describedBy }, label);
  el.disabled = !allowed;
  return el;
}

function toolList(names) {
  return names.length < 2 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

/**
 * Controls below the step's Approve row, or [] when there are none.
 * `approve(btn)` saves the card's edits and approves the step (false: it did not).
 */
export function batchControls(bus, step, calls, perms, approve) {
  const parts = [];
  const pending = calls.filter((c) => (c.decision || "pending") === "pending");
  const allowed = perms.canApprove && step.status === "pending";
  if (step.kind === "tool_calls" && pending.length) {
    const tools = [...new Set(pending.map((c) => c.tool_name))];
    const names = toolList(tools.map(revealText)); // a name hiding a character says so (hidden.js)
    const ruleErr = domId("err-rule", step.id);
    const here = button(`Approve and always allow ${names} in this notebook`, "allow-notebook", allowed, ruleErr);
    const everywhere = button(`Approve and always allow ${names} in all my notebooks`, "allow-mine", allowed, ruleErr);
    const remember = async (scope, btn) => {
      for (const tool of tools) {
        const ok = await bus.act(`rule:${step.id}`, "set_policy", { tool, decision: "allow", scope, step_id: step.id }, btn);
        if (!ok) return;
      }
      await approve(btn);
    };
    here.addEventListener("click", () => remember("notebook", here));
    everywhere.addEventListener("click", () => remember("mine", everywhere));
    const reasonId = domId("reject-all-reason", step.id);
    const rejectErr = domId("err-reject-all", step.id);
    const reason = h("input", { type: "text", id: reasonId, class: "reason-field", "data-field": "reject-all-reason", "aria-describedby": rejectErr, placeholder: "One reason for all; the model is told." });
    reason.disabled = !allowed;
    const rejectAll = button(pending.length > 1 ? `Reject all ${pending.length} calls` : "Reject the call and go on", "reject-all", allowed, rejectErr);
    rejectAll.addEventListener("click", async () => {
      const text = reason.value.trim();
      if (!text) {
        bus.setError(`reject-all:${step.id}`, "Give a reason: the model is told why its calls were rejected.");
        reason.focus();
        return;
      }
      await bus.act(`reject-all:${step.id}`, "reject_all", { step_id: step.id, reason: text }, rejectAll);
    });
    parts.push(
      h("div", { class: "button-row rule-row" }, here, everywhere, h("a", { class: "hint", href: "/policies/" }, "Rules…")),
      bus.slot(`rule:${step.id}`, ruleErr),
      h("div", { class: "reject-row reject-all-row" }, h("label", { for: reasonId, class: "field-label" }, "Reject every pending call"), reason, rejectAll),
      bus.slot(`reject-all:${step.id}`, rejectErr),
    );
  }
  // one button for the whole fan-out, on its first waiting branch's card (not on every card)
  if (perms.branches && perms.runnableIds.length > 1 && perms.runnableIds[0] === step.id) {
    const err = domId("err-branches", step.id);
    const all = button(`Approve all ${perms.runnableIds.length} waiting branches`, "approve-branches", perms.canApprove, err);
    all.addEventListener("click", () => bus.act("branches", "approve_branches", {}, all));
    parts.push(h("div", { class: "button-row" }, all), bus.slot("branches", err));
  }
  return parts;
}
