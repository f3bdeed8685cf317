#!/usr/bin/env bash
# `npm run <command>` -> scripts/run.sh <script.ts> [args]: runs a TypeScript script of the
# project with tsx. It installs the npm dependencies only if they were never installed;
# the script reads its command line first (--help and mistakes end there) and then does
# its own set-up (lib/cli.ts setUp -> scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script=${1:?usage: scripts/run.sh SCRIPT.ts [ARGS...]}
shift
"$root/scripts/npm-deps.sh" --if-missing
exec "$root/node_modules/.bin/tsx" "$root/$script" "$@"
