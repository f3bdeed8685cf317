#!/usr/bin/env bash
# `npm run <command>` -> scripts/run.sh <script.ts> [args]: runs a TypeScript script of the
# project with tsx. It installs the npm dependencies only if they were never installed;
# the script reads its command line first (--help and mistakes end there) and then does
# its own set-up (lib/cli.ts setUp -> scripts/setup.sh).
#
# The script becomes the process npm waits for (package.json's scripts `exec` this, and this
# `exec`s node with tsx's loader, not the tsx command, which would be a second process
# relaying signals and SIGKILLing a script that is slow to acknowledge them). So a Ctrl-C or
# a `timeout` reaches the script itself, and npm returns only once the script has ended,
# after stopping the simulated hosts it booted (simhost/owned-hosts.ts).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script=${1:?usage: scripts/run.sh SCRIPT.ts [ARGS...]}
shift
# shellcheck source=node-env.sh
. "$root/scripts/node-env.sh"
dflash_node_env
"$root/scripts/npm-deps.sh" --if-missing
# tsx is found from the project folder (where npm runs scripts anyway); the scripts resolve
# relative paths against the project folder themselves.
cd "$root"
exec node --import tsx "$root/$script" "$@"
