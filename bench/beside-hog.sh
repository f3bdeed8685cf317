#!/usr/bin/env bash
# usage: bash bench/beside-hog.sh RUNS TEST_FILE NAME_PATTERN [OUT.md]
# Runs the tests of TEST_FILE whose names match NAME_PATTERN (node --test --test-name-pattern)
# RUNS times in a row beside a CPU hog (`stress-ng --cpu 2`, as many workers as this machine's
# two cores), each run whole (its file's set-up included), and writes a table of the runs: pass
# or fail, and how long each took. A test that fails under load is a race to find, not a
# timeout to lengthen. The hog is this script's own child, stopped by its PID when it ends.
# Needs stress-ng (Debian: apt-get install stress-ng).
set -euo pipefail
if [ "$#" -lt 3 ]; then
  echo "usage: bash bench/beside-hog.sh RUNS TEST_FILE NAME_PATTERN [OUT.md]" >&2
  exit 2
fi
runs=$1 file=$2 pattern=$3 out=${4:-}
command -v stress-ng >/dev/null || { echo "beside-hog: stress-ng not found: install it (Debian: apt-get install stress-ng)" >&2; exit 2; }
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091 # the project's Node environment
. scripts/node-env.sh
dflash_node_env
stress-ng --cpu 2 --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT
rows=() passed=0
for i in $(seq 1 "$runs"); do
  t0=$(date +%s)
  log=$(mktemp /tmp/dflash-hog.XXXXXX)
  if node --import tsx --test --test-name-pattern "$pattern" "$file" > "$log" 2>&1 && grep -q '^# pass [1-9]' "$log" && grep -q '^# fail 0' "$log"; then
    result=pass passed=$((passed + 1))
  else
    result="FAIL: $(grep -m1 -E '^not ok|Error' "$log" | cut -c1-160 || true) (log $log)"
  fi
  rows+=("| $i | $result | $(( $(date +%s) - t0 )) |")
  echo "run $i: $result" >&2
  [ "$result" = pass ] && rm -f "$log"
done
table=$(printf '%s\n' "Command: \`bash bench/beside-hog.sh $runs $file \"$pattern\"\` ($(date -u +%FT%TZ), $(nproc) cores, commit $(git rev-parse --short HEAD)), beside \`stress-ng --cpu 2\`." "" "$passed of $runs passed." "" "| run | result | seconds |" "|---:|---|---:|" "${rows[@]}")
echo "$table"
[ -z "$out" ] || printf '%s\n' "# Beside a CPU hog: $pattern" "" "$table" > "$out"
[ "$passed" = "$runs" ]
