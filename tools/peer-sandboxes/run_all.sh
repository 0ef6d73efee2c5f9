#!/bin/sh
# bh's sandbox, OpenAI Codex's and Anthropic's sandbox-runtime against the
# same attacks (A-M, then the extra checks X1-X5), every effect checked on the
# host; prints the versions and the table ARCHITECTURE.md quotes. Needs root
# (H writes /root/.ssh/id_test, G binds under /run/user/0), node + npm, and
# apt for bubblewrap. Scratch: $BH_PEERS_DIR (default /var/tmp/bh-peers);
# bh: $BH_BIN (default target/debug/bh of this checkout; `cargo build` first).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
export BH_PEERS_DIR="${BH_PEERS_DIR:-/var/tmp/bh-peers}"
mkdir -p "$BH_PEERS_DIR/logs"
if [ ! -x "$BH_PEERS_DIR/npm/node_modules/.bin/codex" ] || [ ! -x "$BH_PEERS_DIR/npm/node_modules/.bin/srt" ]; then
    npm install --silent --prefix "$BH_PEERS_DIR/npm" @openai/codex @anthropic-ai/sandbox-runtime
fi
command -v bwrap >/dev/null && command -v socat >/dev/null && command -v rg >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq bubblewrap socat ripgrep; }
cd "$BH_PEERS_DIR"
# Codex's bubblewrap leaves empty mount targets (an empty /tmp/.git among
# them) on the host; one left in /tmp makes /tmp look like a repository to
# whatever runs next (bh-serve's project guess did). Removed at the end if
# this run made it.
tmp_git_before=$([ -e /tmp/.git ] && echo yes || echo no)
trap '[ "$tmp_git_before" = no ] && rmdir /tmp/.git 2>/dev/null; true' EXIT
sh "$HERE/versions.sh"
echo
rm -f results.json
python3 "$HERE/harness.py" --sandboxes none,bh,codex,srt --results results.json 2>logs/evidence.txt
echo
echo "Extra checks:"
python3 "$HERE/extras.py" 2>>logs/evidence.txt
echo
echo "(evidence per cell: $BH_PEERS_DIR/logs/evidence.txt and $BH_PEERS_DIR/logs/<sandbox>_<attack>.log)"
