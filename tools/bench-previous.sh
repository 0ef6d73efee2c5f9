#!/usr/bin/env bash
# Benchmarks of this checkout side by side with those of an earlier revision
# (issue 26: a refactor shows it made nothing slower). Builds REV in a
# worktree under target/bench-previous/ (its own target folder), then:
#   * the agent bench once, with `--previous` = REV's `bh` (interleaved rounds,
#     a this/previous ratio table);
#   * the session-load and sandbox start-up benches, REV's and this one's
#     executables alternately, ROUNDS times each.
# Usage: tools/bench-previous.sh REV [ROUNDS]   (ROUNDS defaults to 3)
set -euo pipefail
rev=${1:?usage: tools/bench-previous.sh REV [ROUNDS]}
rounds=${2:-3}
root=$(git rev-parse --show-toplevel)
cd "$root"
work="$root/target/bench-previous"
src="$work/src"
mkdir -p "$work"
if [ ! -d "$src" ]; then
  git worktree add --quiet --detach "$src" "$rev"
fi
git -C "$src" checkout --quiet --detach "$rev"

# Prints the executable of bench target $3 of package $2 built in checkout $1
# (target folder $4).
bench_exe() {
  (cd "$1" && CARGO_TARGET_DIR="$4" cargo bench --no-run -p "$2" --bench "$3" \
      --message-format=json 2>/dev/null) |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$3" | tail -1
}

echo "== building $rev and this checkout (release)"
(cd "$src" && CARGO_TARGET_DIR="$work/target" cargo build --release -p bh-cli)
prev_bh="$work/target/release/bh"
declare -A prev this
for b in "bh-session load" "bh-sandbox startup"; do
  set -- $b
  prev[$2]=$(bench_exe "$src" "$1" "$2" "$work/target")
  this[$2]=$(bench_exe "$root" "$1" "$2" "${CARGO_TARGET_DIR:-$root/target}")
done

echo "== agent bench, this build and $rev side by side"
cargo bench -p bh-cli --bench agent -- --rounds 5 --no-pi --previous "$prev_bh"

for b in load startup; do
  for i in $(seq 1 "$rounds"); do
    echo "== $b, round $i: $rev"
    (cd "$src" && "${prev[$b]}" --bench)
    echo "== $b, round $i: this checkout"
    "${this[$b]}" --bench
  done
done
