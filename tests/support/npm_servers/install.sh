#!/usr/bin/env bash
# The MCP servers the upstream tests run (tests/test_upstreams_third_party.py), installed OUTSIDE
# the repo (default ~/.cache/toolproxy/mcp-servers, or $TOOLPROXY_MCP_SERVERS): the reference
# @modelcontextprotocol/server-everything from the npm registry, run by the machine's Node.
# Reinstalled only when package.json changes. Never fails `make test`: what cannot be installed
# is reported here and its tests skip, saying why.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TOOLPROXY_MCP_SERVERS:-$HOME/.cache/toolproxy/mcp-servers}"
mkdir -p "$cache" || { echo "mcp-servers: cannot create $cache" >&2; exit 0; }
stamp="$(sha256sum "$here/package.json" | cut -c1-16)"
[ -f "$cache/.stamp" ] && [ "$(cat "$cache/.stamp")" = "$stamp" ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
    echo "mcp-servers: no npm here; the server-everything tests will skip" >&2; exit 0
fi
cp "$here/package.json" "$cache/package.json"
if (cd "$cache" && npm install --no-audit --no-fund --no-save --silent >"$cache/npm.log" 2>&1); then
    echo "$stamp" >"$cache/.stamp"
else
    echo "mcp-servers: npm install failed (see $cache/npm.log); the server-everything tests will skip" >&2
fi
exit 0
