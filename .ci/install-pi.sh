#!/usr/bin/env bash
# Install the real Pi coding agent (0.73.1, Node >= 20.6) into a cache folder and
# print the path of its `pi` executable on stdout. Idempotent: does nothing when
# that exact version is already installed there.
#
#   BH_PI_CACHE   install prefix (default: $HOME/.cache/bh-ci/pi-0.73.1)
#
# Usage: export BH_PI_BIN="$(bash .ci/install-pi.sh)"
set -euo pipefail

PI_PKG="@mariozechner/pi-coding-agent"
PI_VERSION="0.73.1"
prefix="${BH_PI_CACHE:-${HOME:?HOME is not set}/.cache/bh-ci/pi-${PI_VERSION}}"
pkg_dir="$prefix/node_modules/$PI_PKG"
bin="$prefix/node_modules/.bin/pi"

command -v node >/dev/null 2>&1 || { echo "install-pi: node not found" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "install-pi: npm not found" >&2; exit 1; }

installed_version() {
  [ -f "$pkg_dir/package.json" ] || return 1
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_dir/package.json"
}

if [ "$(installed_version 2>/dev/null || true)" != "$PI_VERSION" ] || [ ! -x "$bin" ]; then
  mkdir -p "$prefix"
  [ -f "$prefix/package.json" ] || echo '{"private":true}' > "$prefix/package.json"
  echo "install-pi: installing $PI_PKG@$PI_VERSION into $prefix" >&2
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    "$PI_PKG@$PI_VERSION" >&2
fi

[ "$(installed_version)" = "$PI_VERSION" ] || { echo "install-pi: wrong version installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "install-pi: $bin missing" >&2; exit 1; }
echo "$bin"
