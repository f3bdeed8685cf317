#!/usr/bin/env bash
# `npm run pulumi -- <args>`: the pinned Pulumi CLI with the project's embedded defaults.
set -euo pipefail
bash "$(dirname "${BASH_SOURCE[0]}")/setup.sh" --no-hosts
. "$(dirname "${BASH_SOURCE[0]}")/pulumi-env.sh"
exec pulumi "$@"
