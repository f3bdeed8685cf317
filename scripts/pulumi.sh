#!/usr/bin/env bash
# The pinned Pulumi CLI with the project's embedded defaults (scripts/pulumi-env.sh: state
# in .pulumi-state/ unless PULUMI_BACKEND_URL is set, no update checks, no plugin
# downloads), for stacks in this folder. Set-up links it as node_modules/.bin/pulumi, so
# `npx pulumi up --stack b16t4-w2048` runs it; `npm run pulumi -- <args>` sets up first.
set -euo pipefail
self=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$self")/.." && pwd)
# Under npx, node_modules/.bin (this wrapper) comes first on PATH; the toolchain must not
# take it for an installed `pulumi` (it would call itself).
path=""
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -n "$dir" ] && [ "$(readlink -f "$dir/pulumi" 2>/dev/null)" = "$self" ] && continue
  path="${path:+$path:}$dir"
done
export PATH="$path"
. "$root/scripts/pulumi-env.sh"
case "${1:-}" in
  up|update|preview|refresh|destroy) "$root/node_modules/.bin/tsx" "$root/scripts/clear-stale-locks.ts" ;;
esac
exec pulumi "$@"
