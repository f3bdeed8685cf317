#!/usr/bin/env bash
# Everything the README's commands need on a fresh machine, each step cached:
# npm dependencies, the pinned Pulumi toolchain, the simulated hosts' rootfs and the
# compiled simulators. Prints nothing but progress on stderr. The project's commands run it
# after reading their command line (lib/cli.ts setUp), `npm test` before testing.
#   --no-hosts   skip the simulated hosts' image
#   --postgres   also PostgreSQL's programs (for test/lib/team-state.test.ts, which runs a
#                throwaway server of its own): Debian's `postgresql`, installed if missing
# DFLASH_FORBID_SETUP=1 makes it fail at once: tests of what must not reach set-up use it.
set -euo pipefail
if [ -n "${DFLASH_FORBID_SETUP:-}" ]; then
  echo "setup: refused: DFLASH_FORBID_SETUP is set (a check that nothing is set up reached set-up)" >&2
  exit 3
fi
hosts=yes
postgres=no
for arg in "$@"; do
  case "$arg" in
    --no-hosts) hosts=no ;;
    --postgres) postgres=yes ;;
    *) echo "setup: unknown option $arg (known: --no-hosts, --postgres)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=node-env.sh
. ./scripts/node-env.sh
dflash_node_env
# Node's compile cache (node-env.sh) keeps an entry per file path, and every temporary clone
# (the README walkthrough's, a benchmark's baseline) adds its own: past 256 MB it starts again.
# Only the project's own folder; one the user chose is theirs. Other Node.js processes may be
# writing to it meanwhile (`npm test` runs five files at once): it is renamed away first (one
# step; a process that still writes there writes into the renamed folder), then removed as far
# as it can be; a failure to prune is no failure of the set-up.
compile_cache=$(dflash_compile_cache)
if [ -n "$compile_cache" ] && [ "${NODE_COMPILE_CACHE:-}" = "$compile_cache" ] && [ -d "$compile_cache" ] &&
  [ "$(du -sm "$compile_cache" 2>/dev/null | cut -f1)" -gt 256 ]; then
  pruned="$compile_cache.pruned.$$"
  if mv "$compile_cache" "$pruned" 2>/dev/null; then rm -rf "$pruned" 2>/dev/null || true; fi
fi
# Pruned folders another set-up could not remove whole (a writer was still in them).
find "$(dirname "${compile_cache:-/nonexistent/x}")" -maxdepth 1 -name 'node-compile-cache.pruned.*' -mmin +10 -exec rm -rf {} + 2>/dev/null || true
# npm dependencies, and `npx pulumi` in this folder linked to the pinned CLI with the
# project's defaults (scripts/pulumi.sh).
./scripts/npm-deps.sh
./toolchain/ensure.sh >/dev/null
# A Debian package a part of the project needs, installed with apt-get when missing (as root);
# without it, only that part fails, saying so. ensure_package COMMAND PACKAGE WHAT-NEEDS-IT WITHOUT-IT
ensure_package() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $2 with apt-get ($3)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2") >&2 ||
      echo "setup: could not install $2; $4 until it is (apt-get install $2)" >&2
  else
    echo "setup: $2 is not installed; $4 until it is (Debian: apt-get install $2)" >&2
  fi
}
# The benchmark's coding check runs model-written code only inside a bubblewrap sandbox.
ensure_package bwrap bubblewrap "the coding check's sandbox" "the coding check will refuse to run model code"
# npm test checks every host script with shellcheck.
ensure_package shellcheck shellcheck "npm test checks every host script with it" "the shellcheck tests will fail"
# PostgreSQL's server programs (initdb, pg_ctl), on PATH or where Debian puts them.
have_postgres() {
  { command -v initdb && command -v pg_ctl; } >/dev/null 2>&1 && return 0
  local bin
  for bin in /usr/lib/postgresql/*/bin; do
    [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && return 0
  done
  return 1
}
# Debian's package would create a cluster ("main", port 5432) and start it. Neither is
# wanted: for the install only, a createcluster.d file says create_main_cluster = false and,
# unless the machine has its own, a policy-rc.d forbids starting services (exit 101), as
# Debian's invoke-rc.d documents. Existing clusters and their files are not touched.
install_postgres() {
  local conf=/etc/postgresql-common/createcluster.d/zz-dflash-setup-no-main-cluster.conf
  local policy=/usr/sbin/policy-rc.d own_policy=no status=0
  mkdir -p "$(dirname "$conf")"
  echo "create_main_cluster = false" >"$conf"
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# dflash-sglang set-up: no service starts while it installs PostgreSQL\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    own_policy=yes
  fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2 || status=$?
  rm -f "$conf"
  [ "$own_policy" = yes ] && rm -f "$policy"
  return "$status"
}
if [ "$postgres" = yes ] && ! have_postgres; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing PostgreSQL with apt-get (postgresql: the team-state test runs a throwaway server of its own; no cluster is created or started)" >&2
    install_postgres || { echo "setup: could not install PostgreSQL (apt-get install postgresql failed, see above)" >&2; exit 1; }
  else
    echo "setup: PostgreSQL is not installed and cannot be installed here (needs root and apt-get): install it (Debian: apt-get install postgresql) and run again" >&2
    exit 1
  fi
fi
if [ "$hosts" = yes ]; then
  ./simhost/prepare.sh
fi
