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

# Issue 60: readiness subtracts the restart's @@result "at" (host/transaction.sh: seconds since
# boot) from this clock (handlers.ts loadToReady); on the wall clock, a step between the two
# would move one and not the other.
@test "the probe's age line: the host's clock is the time since boot, whatever the wall clock says; the age beside it" {
  step_clock 7200
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
  printf '#!/bin/bash\nexit 0\n' > "$BATS_TEST_TMPDIR/bin/curl"
  printf '#!/bin/bash\n[ "$2" = -p ] && [ "$3" = MainPID ] && { echo 1; exit 0; }\nexit 0\n' > "$BATS_TEST_TMPDIR/bin/systemctl"
  chmod +x "$BATS_TEST_TMPDIR/bin/curl" "$BATS_TEST_TMPDIR/bin/systemctl"
  { echo 'service=u.service show_props=(ActiveState) port=30000 curl_auth=() info_url=http://127.0.0.1:9/server_info'
    cat "$HOST_DIR/show.sh" "$HOST_DIR/ready-probe.sh"; } > "$BATS_TEST_TMPDIR/probe.sh"
  local up _ clock age
  run bash "$BATS_TEST_TMPDIR/probe.sh"
  read -r up _ < /proc/uptime
  read -r clock age <<< "$(tail -n 1 <<< "$output")"
  [[ "$clock" =~ ^[0-9]+\.[0-9]{2}$ ]]
  [[ "$age" =~ ^[0-9]+\.[0-9]{2}$ ]]
  awk -v c="$clock" -v u="$up" -v a="$age" 'BEGIN { exit !(c <= u && c > u - 5 && a <= c) }'
}
