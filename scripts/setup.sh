#!/usr/bin/env bash
# Everything the README's commands need on a fresh machine, each step cached:
# npm dependencies, the pinned Pulumi toolchain, the simulated hosts' rootfs and the
# compiled simulators. Prints nothing but progress on stderr. The project's commands run it
# after reading their command line (lib/cli.ts setUp), `npm test` before testing.
# DFLASH_FORBID_SETUP=1 makes it fail at once: tests of what must not reach set-up use it.
set -euo pipefail
if [ -n "${DFLASH_FORBID_SETUP:-}" ]; then
  echo "setup: refused: DFLASH_FORBID_SETUP is set (a check that nothing is set up reached set-up)" >&2
  exit 3
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
./scripts/npm-deps.sh
# `npx pulumi ...` in this folder: the pinned CLI with the project's defaults (npm ci
# empties node_modules, so the link is made after it, every time).
ln -sfn ../../scripts/pulumi.sh node_modules/.bin/pulumi
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
  ./simhost/prepare.sh
fi
