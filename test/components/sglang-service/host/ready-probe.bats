#!/usr/bin/env bats
# The readiness probe's clock (components/sglang-service/host/ready-probe.sh), in bash: the
# main process's age to a hundredth of a second, where `ps -o etimes` counts whole seconds (the
# restart timings' load-to-ready is that age when the server first serves).

bats_require_minimum_version 1.5.0

setup() {
  load common
  # shellcheck source=../../../../components/sglang-service/host/ready-probe.sh
  source "$HOST_DIR/ready-probe.sh"
}

teardown() {
  if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null || true; fi
}

@test "main_age: a process's age to a hundredth of a second, within the second ps counts; a name with spaces and ') ' parsed" {
  cp "$(command -v sleep)" "$BATS_TEST_TMPDIR/a) b c"
  "$BATS_TEST_TMPDIR/a) b c" 120 &
  pid=$!
  local age etimes
  age=$(main_age "$pid")
  etimes=$(ps -o etimes= -p "$pid")
  [[ "$age" =~ ^[0-9]+\.[0-9]{2}$ ]]
  # ps read it a moment later and rounds down: the age lies in etimes' second (or a moment before it).
  awk -v a="$age" -v e="$etimes" 'BEGIN { exit !(a > e - 0.5 && a < e + 1) }'
}

@test "main_age: nothing where there is no process (MainPID 0, empty, not a number, gone)" {
  [ -z "$(main_age 0)" ]
  [ -z "$(main_age "")" ]
  [ -z "$(main_age "12; rm -rf /")" ]
  true &
  local gone=$!
  wait "$gone"
  [ -z "$(main_age "$gone")" ]
}
