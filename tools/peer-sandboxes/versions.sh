#!/bin/sh
# The versions of everything run_all.sh measures.
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BH="${BH_BIN:-$REPO/target/debug/bh}"
P="${BH_PEERS_DIR:-/var/tmp/bh-peers}/npm/node_modules"
echo "bh: $("$BH" --version 2>&1 | head -1); checkout $(git -C "$REPO" rev-parse --short HEAD), $(git -C "$REPO" status --short | wc -l) uncommitted paths"
echo "codex: $($P/.bin/codex --version 2>&1)"
echo "sandbox-runtime (srt): $(node -p "require('$P/@anthropic-ai/sandbox-runtime/package.json').version")"
echo "system bwrap (used by srt): $(bwrap --version)"
echo "node: $(node --version); python3: $(python3 --version 2>&1)"
echo "kernel: $(uname -r); Landlock ABI per bh's report; dev.tty.legacy_tiocsti=$(sysctl -n dev.tty.legacy_tiocsti 2>/dev/null)"
