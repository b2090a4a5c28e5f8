#!/usr/bin/env bash
# Create bench/.venv with assay (editable) and the peer frameworks used by
# bench/throughput.py. Idempotent: re-running skips what is already there.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
venv="$here/.venv"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi

pip=("$venv/bin/python" -m pip)

have() { "$venv/bin/python" -m pip show -q "$1" >/dev/null 2>&1; }

for pkg in deepeval inspect-ai; do
  if have "$pkg"; then
    echo "setup: $pkg already installed ($("$venv/bin/python" -m pip show "$pkg" | sed -n 's/^Version: //p'))"
  else
    echo "setup: installing $pkg"
    "${pip[@]}" install -q "$pkg"
  fi
done

if have assay; then
  echo "setup: assay already installed"
else
  echo "setup: installing assay (editable) from $repo"
  "${pip[@]}" install -q -e "$repo"
fi

echo "setup: done; run: $venv/bin/python $here/throughput.py"
