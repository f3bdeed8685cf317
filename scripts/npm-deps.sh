#!/usr/bin/env bash
# The npm dependencies: `npm ci` when node_modules was never installed by it, or when
# package-lock.json changed since (a copy of the lock file in node_modules says which it
# was). With --if-missing only in the first case: scripts/run.sh needs just enough to
# start a script, whose own set-up (scripts/setup.sh) then catches a changed lock file.
# Either way it links `npx pulumi` to the project's wrapper, so that it works after any of
# the project's commands (npm ci empties node_modules, so the link is made after it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=node-env.sh
. ./scripts/node-env.sh
dflash_node_env
stamp=node_modules/.dflash-lock-stamp
link() { ln -sfn ../../scripts/pulumi.sh node_modules/.bin/pulumi; }
if [ "${1:-}" = "--if-missing" ] && [ -e "$stamp" ]; then link; exit 0; fi
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >&2
  cp package-lock.json "$stamp"
fi
link
