// A Markdown text's first line as plain words, for lists that show one line of an answer
// ("## Sales revenue by city, 2024" reads "Sales revenue by city, 2024").

const FENCE_OR_RULE = /^(`{3,}|~{3,}|([-*_])(\s*\2){2,}\s*$|\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$)/;

/** The first line with words in it, without its Markdown marks. */
export function plainLine(text) {
  const lines = String(text ?? "").split("\n").map((line) => line.trim());
  const line = lines.find((l) => l && !FENCE_OR_RULE.test(l)) || "";
  return line
    .replace(/^#{1,6}\s+/, "")
    .replace(/\s+#+\s*$/, "")
    .replace(/^(>\s?)+/, "")
    .replace(/^([-*+]|\d{1,9}[.)])\s+(\[[ xX]\]\s+)?/, "")
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\[([^\]]+)\]\([^)]*\)/g, "$1")
    .replace(/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, "$2")
    .replace(/\*(?=\S)(.+?)(?<=\S)\*/g, "$1")
    .replace(/(^|[^\w])_(?=\S)(.+?)(?<=\S)_(?!\w)/g, "$1$2")
    .replace(/~~(.+?)~~/g, "$1")
    .replace(/`+([^`]*)`+/g, "$1")
    .replace(/^\|\s*|\s*\|$/g, "")
    .replace(/\s*(?<!\\)\|\s*/g, " · ")
    .replace(/\\([\\`*_{}[\]()#+\-.!|>~])/g, "$1")
    .trim();
}
