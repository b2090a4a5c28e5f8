#!/usr/bin/env bash
# Install the host CLIs that the tests of the `claude` and `codex` targets run:
# the npm packages @anthropic-ai/claude-agent-sdk and @openai/codex-sdk carry
# the native `claude` and `codex` executables. Versions are pinned by the
# lock file beside this script; they go to .hosts/ at the repository root
# (git-ignored). Needs Node.js 18+ and npm; nothing else, no sign-in.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.hosts"
stamp="$dest/.installed"
if [ -f "$stamp" ] && cmp -s "$here/package-lock.json" "$stamp"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "tests/hosts/install.sh: npm is needed (Node.js 18 or later) to install the host CLIs" >&2
  exit 1
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
# --legacy-peer-deps: the SDKs' JavaScript peers are not needed, only the binaries.
# --ignore-scripts: nothing runs at install time.
(cd "$dest" && npm ci --legacy-peer-deps --ignore-scripts --no-audit --no-fund --loglevel=error)
cp "$here/package-lock.json" "$stamp"
echo "host CLIs installed in $dest"
