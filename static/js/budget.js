// The notebook's budget in its toolbar: what this run may spend and has spent ("$0.0033 of
// $0.50 this run"), counted from the model calls the page has seen at the notebook's price; the
// limits come with `hello` (task.budget, runs/service/budgets.py) and a raise from the turn's
// `budget_raised` actions. The server decides when a run waits; this only shows where it stands.

import { formatUsd, usageCost } from "./cost.js";
import { turnUsage } from "./selectors.js";

const tokens = (n) => `${Number(n).toLocaleString("en")} tokens`;

/** The newest turn that was not stopped (the one a budget applies to now). */
function currentTurn(model) {
  let found = null;
  for (const turn of model.turns.values()) if (turn.status !== "abandoned") found = turn;
  return found;
}

/** The turn's limits after its raises: {run_usd, run_tokens}. */
function limitsOf(model, turn) {
  const limits = { run_usd: model.task?.budget?.run_usd ?? null, run_tokens: model.task?.budget?.run_tokens ?? null };
  for (const id of turn?.stepIds || []) {
    for (const action of model.steps.get(id)?.humanActions || []) {
      if (action.action === "budget_raised" && action.after?.scope === "run") limits[`run_${action.after.unit}`] = action.after.limit;
    }
  }
  return limits;
}

/** {text, reached}: the toolbar's line for the current run. */
export function budgetLine(model) {
  const turn = currentTurn(model);
  const limits = limitsOf(model, turn);
  const usage = turn ? turnUsage(model, turn) : null;
  const parts = [];
  let reached = false;
  if (limits.run_usd != null) {
    const usd = usageCost(usage || {}, model.task?.price);
    if (usd == null) parts.push(`${formatUsd(Number(limits.run_usd))} a run (price unknown)`);
    else {
      parts.push(`${formatUsd(usd)} of ${formatUsd(Number(limits.run_usd))}`);
      reached ||= usd >= Number(limits.run_usd);
    }
  }
  if (limits.run_tokens != null) {
    const used = usage?.total_tokens || 0;
    parts.push(`${used.toLocaleString("en")} of ${tokens(limits.run_tokens)}`);
    reached ||= used >= Number(limits.run_tokens);
  }
  return { text: parts.length ? `${parts.join(", ")} this run` : "none", reached };
}

/** "Your daily budget: $5.00 (UTC day)." or "". */
export function dayLine(model) {
  const b = model.task?.budget || {};
  const parts = [b.day_usd != null ? formatUsd(Number(b.day_usd)) : null, b.day_tokens != null ? tokens(b.day_tokens) : null].filter(Boolean);
  return parts.length ? `Your daily budget, across notebooks: ${parts.join(" and ")} (UTC day).` : "";
}

/** Keep the toolbar's budget current (cheap: a sum over one turn's steps). */
export function renderBudget(root, model) {
  const label = root.querySelector("#budget-label");
  if (!label) return;
  const { text, reached } = budgetLine(model);
  if (label.textContent !== text) label.textContent = text;
  root.querySelector(".nb-budget")?.classList.toggle("is-reached", reached);
  const day = root.querySelector("#budget-day");
  const daily = dayLine(model);
  if (day && day.textContent !== daily) day.textContent = daily;
}
