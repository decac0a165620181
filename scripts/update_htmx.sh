#!/usr/bin/env bash
# Refresh the inspector's bundled htmx from its npm registry package, with its licence.
#   bash scripts/update_htmx.sh            # the version below
#   bash scripts/update_htmx.sh 2.0.12     # another 2.x version
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-2.0.11}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "htmx.org@${version}" >/dev/null && tar xzf htmx.org-*.tgz)
static=prime_memory_folding/web/static
cp "$work/package/dist/htmx.min.js" "$static/htmx.min.js"
cp "$work/package/LICENSE" "$static/htmx-LICENSE.txt"
echo "htmx ${version} copied into ${static}; update the version in NOTICE"
