// Tokens and what they cost, as people read them: "$0.0042 · 1,234 tokens", the exact figures
// in the tooltip. The price (USD per million prompt and completion tokens) comes with the
// notebook (`task.price`, from the server's ModelPrice table); without one the cost is unknown
// and is said so, never shown as $0.

const MILLION = 1_000_000;

/** USD for a usage ({prompt_tokens, completion_tokens}) at `price`; null without a price. */
export function usageCost(usage, price) {
  if (!price || !usage) return null;
  return ((usage.prompt_tokens || 0) * price.input_usd_per_million + (usage.completion_tokens || 0) * price.output_usd_per_million) / MILLION;
}

/** "$0.0042", "$0.51", "$12.30": cents from a dime up, two significant digits below (as the
 * server's budget reasons say it, runs/service/budgets.py). */
export function formatUsd(usd) {
  if (usd == null || !Number.isFinite(usd)) return "";
  if (usd !== 0 && Math.abs(usd) < 0.1) return `$${Number(usd.toPrecision(2)).toString()}`;
  return `$${usd.toLocaleString("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

const count = (n) => (n || 0).toLocaleString("en");

/**
 * What a usage cost, as a line and its tooltip: {text: "$0.0042 · 1,234 tokens", title}; with
 * no price: "1,234 tokens · price unknown". Null when nothing was counted.
 */
export function costLine(usage, price) {
  const tokens = usage?.total_tokens || 0;
  if (!tokens) return null;
  const parts = `${count(usage.prompt_tokens)} prompt + ${count(usage.completion_tokens)} completion tokens`;
  const usd = usageCost(usage, price);
  const words = tokens === 1 ? "1 token" : `${count(tokens)} tokens`;
  if (usd == null) {
    return { text: `${words} · price unknown`, title: `${parts}; no price is set for this model, so the cost is unknown`, usd: null };
  }
  const rate = `$${price.input_usd_per_million}/M prompt, $${price.output_usd_per_million}/M completion (${price.model})`;
  return { text: `${formatUsd(usd)} · ${words}`, title: `$${usd} exactly: ${parts} at ${rate}`, usd };
}
