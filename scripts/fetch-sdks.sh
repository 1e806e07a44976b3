#!/usr/bin/env bash
# Installs the real client SDKs that tests/server drives `halo serve` with: npm packages
# openai@6.30.1 and @anthropic-ai/sdk@1.14.0 (pinned) into
# third_party/server-sdks/node_modules. openai 7.x needs Node 22; these run on the Node 18/20 of
# Debian 12 and NodeSource. Idempotent and quiet: prints nothing when they are already there.
set -euo pipefail
cd "$(dirname "$0")/.."

dest="third_party/server-sdks"
openai="6.30.1"
anthropic="1.14.0"

have() { grep -q "\"version\": *\"$2\"" "$dest/node_modules/$1/package.json" 2>/dev/null; }
if have openai "$openai" && have @anthropic-ai/sdk "$anthropic"; then
    exit 0
fi

command -v npm >/dev/null || { echo "fetch-sdks.sh: npm not found (run scripts/deps.sh)" >&2; exit 1; }
mkdir -p "$dest"
[ -f "$dest/package.json" ] || echo '{"name":"halo-server-sdks","private":true}' >"$dest/package.json"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(cd "$dest" && npm install --no-audit --no-fund --silent --save-exact \
    "openai@$openai" "@anthropic-ai/sdk@$anthropic" >"$log" 2>&1) || {
    cat "$log" >&2
    echo "fetch-sdks.sh: npm install failed" >&2
    exit 1
}
