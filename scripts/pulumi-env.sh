#!/usr/bin/env bash
# Sourced by the project's scripts: puts the pinned Pulumi toolchain on PATH and sets the
# embedded defaults. Every default yields to a value the user already exported.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=node-env.sh
. "$root/scripts/node-env.sh"
dflash_node_env || return 1
toolchain_bin=$("$root/toolchain/ensure.sh") || return 1
export PATH="$toolchain_bin:$PATH"
# Again: a toolchain folder of the user's own (their pulumi's) may hold an older node too.
dflash_node_env || return 1
# Local state inside the project (git-ignored) unless the user chose a backend.
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$root/.pulumi-state}"
# No default secrets passphrase: an empty one would let anyone who reads a committed stack
# file decrypt its secrets. Pulumi asks at a terminal and refuses without one, as it does
# anywhere; scripts/pulumi-guard.ts refuses an empty one. Only the throwaway workspaces of the
# demo, the tests and simulated sweeps set their own (lib/workspace.ts).
# A stack file that lacks its secrets settings (a clone made before a colleague committed
# them, a workspace of our scripts) takes them from the stack's state, not a new salt:
# everyone who shares a backend then writes the same encryptionsalt into the stack file.
export PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER="${PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER:-true}"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=true
# Type checking is done by `npm test` (tsc); the engine only needs the program to run.
export PULUMI_NODEJS_TRANSPILE_ONLY="${PULUMI_NODEJS_TRANSPILE_ONLY:-true}"
mkdir -p "$root/.pulumi-state"
