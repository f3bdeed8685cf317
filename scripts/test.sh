#!/usr/bin/env bash
# `npm test`: set-up, type check, then every test file (pure, mocks, and integration
# through the real engine against simulated hosts).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
./scripts/setup.sh --postgres
# First the hosts that killed programs left behind (a run ended by SIGKILL): their owner is gone.
node --import tsx simhost/cli.ts reclaim
echo "test: type check" >&2
npx tsc --noEmit -p tsconfig.json
mapfile -t files < <(find test -name '*.test.ts' -not -path '*/fixtures/*' | sort)
# Two files at a time: the integration tests wait on simulated loads, drains and SSH far more
# than on the 2 cores, and every timing-sensitive test waits on a condition, not a timer.
exec node --import tsx --test --test-concurrency=2 "${files[@]}"
