#!/usr/bin/env bash
# Rebuild the third-party JavaScript the explorer page inlines (assets/vendor/), from the versions pinned in
# package-lock.json. Needs node/npm; CI and `pip install` do not: the built files are committed as package data.
#   gradviz/explorer/build.sh
set -euo pipefail
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
out=assets/vendor
mkdir -p "$out"
# the pinned IIFE bundle (dagre with graphlib inside, global `dagre`); the source-map comment is dropped so that
# nothing in the page ever refers to another file
grep -v '^//# sourceMappingURL=' node_modules/@dagrejs/dagre/dist/dagre.min.js \
  | sed 's|dagre.min.js.LEGAL.txt|LICENSE-dagre.txt and LICENSE-graphlib.txt beside this file|' > "$out/dagre.min.js"
cat node_modules/@dagrejs/dagre/LICENSE > "$out/LICENSE-dagre.txt"
cat node_modules/@dagrejs/graphlib/LICENSE > "$out/LICENSE-graphlib.txt"
node -e '
const lock = require("./package-lock.json").packages;
const pick = (p) => ({version: lock[p].version, integrity: lock[p].integrity, license: lock[p].license});
const out = {"@dagrejs/dagre": pick("node_modules/@dagrejs/dagre"), "@dagrejs/graphlib": pick("node_modules/@dagrejs/graphlib")};
process.stdout.write(JSON.stringify(out, null, 2) + "\n");
' > "$out/versions.json"
rm -rf node_modules
echo "wrote $out: $(wc -c < "$out/dagre.min.js") bytes of dagre.min.js"
