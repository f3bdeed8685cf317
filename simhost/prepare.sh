#!/usr/bin/env bash
# What simulated hosts need on this machine: the Debian rootfs they boot from (rootfs.sh,
# cached) and the simulators compiled to build/sim (they run inside the hosts as plain
# JavaScript, bind-mounted, without node_modules). Run by scripts/setup.sh and by
# `simhost start`. Prints nothing but progress on stderr.
set -euo pipefail
if [ -n "${DFLASH_FORBID_SETUP:-}" ]; then
  echo "simhost prepare: refused: DFLASH_FORBID_SETUP is set (a check that nothing is set up reached set-up)" >&2
  exit 3
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$here/rootfs.sh" >/dev/null
cd "$here/.."
npx tsc -p simhost/sim/tsconfig.json >&2
