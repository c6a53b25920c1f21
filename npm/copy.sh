#!/usr/bin/env bash
# Copy the installed libraries' browser builds and every installed package's license into
# static/vendor/, and Vega-Lite's JSON schema to runs/presets/tools/ (the chart tool validates with it).
# Run by `make vendor` after `npm ci` in npm/.
set -euo pipefail
cd "$(dirname "$0")/.."
modules=npm/node_modules
out=static/vendor
rm -rf "$out"
mkdir -p "$out/licenses"
copy() {  # copy PACKAGE FILE...: FILEs of PACKAGE into static/vendor/PACKAGE/
  local package=$1
  shift
  mkdir -p "$out/$package"
  for file in "$@"; do cp "$modules/$package/$file" "$out/$package/"; done
}
copy markdown-it dist/browser/markdown-it.esm.min.mjs
copy dompurify dist/purify.es.mjs
copy vega build/vega.min.js
# The step DAG: Cytoscape.js (draws on canvas: labels are text, never HTML) and its dagre layout,
# whose ES module build bundles dagre itself (@dagrejs/dagre is installed only for its license).
copy cytoscape dist/cytoscape.esm.min.mjs
copy cytoscape-dagre dist/cytoscape-dagre.min.mjs
copy vega-lite build/vega-lite.min.js
copy vega-embed build/vega-embed.min.js
# axe-core: loaded only by the browser tests (tests/axe_support.py), never by a page.
copy axe-core axe.min.js
# vega-interpreter (Vega expressions without eval, for the CSP) is an ES module whose one import,
# from vega-util, the vega build above exposes on its global: take it from there, or stop if the
# import changed.
mkdir -p "$out/vega-interpreter"
node -e '
  const fs = require("fs");
  const [from, to] = process.argv.slice(1);
  const text = fs.readFileSync(from, "utf8");
  const line = /^import \{ ([\w, ]+) \} from .vega-util.;$/m;
  const match = text.match(line);
  if (!match || (text.match(/^import /gm) || []).length !== 1) {
    console.error(`vega-interpreter: expected one import from vega-util in ${from}`);
    process.exit(1);
  }
  const names = match[1].split(", ");
  fs.writeFileSync(to, text.replace(line, `const { ${names.join(", ")} } = globalThis.vega; // vega-util, from vega.min.js`));
' "$modules/vega-interpreter/build/vega-interpreter.js" "$out/vega-interpreter/vega-interpreter.js"
cp "$modules/vega-lite/build/vega-lite-schema.json" runs/presets/tools/vega-lite-schema.json
# The builds bundle their dependencies: keep the license of every installed package.
for dir in "$modules"/* "$modules"/@*/*; do
  [ -f "$dir/package.json" ] || continue
  name=${dir#"$modules"/}
  for license in "$dir"/LICEN[CS]E* "$dir"/licen[cs]e* "$dir"/COPYING*; do
    [ -f "$license" ] || continue
    case $license in *.js | *.mjs) continue ;; esac  # a package's license tooling, not a license
    cp "$license" "$out/licenses/${name//\//__}.$(basename "$license")"
  done
done
node -e '
  const lock = require("./npm/package-lock.json");
  const lines = ["# Vendored JavaScript libraries", "",
    "Copied from npm by `make vendor` (npm/package.json pins them). Do not edit by hand.", "",
    "| package | version | files |", "| --- | --- | --- |"];
  const fs = require("fs");
  for (const name of Object.keys(require("./npm/package.json").dependencies)) {
    const dir = `static/vendor/${name}`;
    const files = fs.existsSync(dir) ? fs.readdirSync(dir).join(", ") : "(bundled in another build; license only)";
    lines.push(`| ${name} | ${lock.packages["node_modules/" + name].version} | ${files} |`);
  }
  lines.push("", "`licenses/` holds the license of every package installed with them (the builds bundle some).", "");
  fs.writeFileSync("static/vendor/README.md", lines.join("\n"));
'
echo "vendored into $out: $(ls "$out" | tr '\n' ' ')"
