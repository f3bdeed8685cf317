#!/usr/bin/env bash
# `npm run pulumi -- <args>`: the pinned Pulumi CLI with the project's embedded defaults.
set -euo pipefail
bash "$(dirname "${BASH_SOURCE[0]}")/setup.sh" --no-hosts
. "$(dirname "${BASH_SOURCE[0]}")/pulumi-env.sh"
case "${1:-}" in
  up|update|preview|refresh|destroy) npx tsx "$(dirname "${BASH_SOURCE[0]}")/clear-stale-locks.ts" ;;
esac
exec pulumi "$@"
