#!/usr/bin/env bash
# Everything the README's commands need on a fresh machine, each step cached:
# npm dependencies, the pinned Pulumi toolchain, the simulated hosts' rootfs and the
# compiled simulators. Prints nothing but progress on stderr.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
stamp=node_modules/.dflash-lock-stamp
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >&2
  cp package-lock.json "$stamp"
fi
./toolchain/ensure.sh >/dev/null
# The benchmark's coding check runs model-written code only inside a bubblewrap sandbox.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap with apt-get (the coding check's sandbox)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >&2 ||
      echo "setup: could not install bubblewrap; the coding check will refuse to run model code until it is (apt-get install bubblewrap)" >&2
  else
    echo "setup: bubblewrap is not installed; the coding check will refuse to run model code until it is (Debian: apt-get install bubblewrap)" >&2
  fi
fi
if [ "${1:-}" != "--no-hosts" ]; then
  ./simhost/rootfs.sh >/dev/null
  # The simulators run inside the hosts as plain JavaScript (bind-mounted, no node_modules).
  npx tsc -p simhost/sim/tsconfig.json
fi
