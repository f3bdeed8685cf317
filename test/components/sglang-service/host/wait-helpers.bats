#!/usr/bin/env bats
# The unit's helpers (components/sglang-service/host/wait-gpus-free.sh, its ExecStartPre, and
# wait-ready.sh, its ExecStartPost), run as systemd runs them, against a wall clock that steps
# (issue 60: an NTP correction, a resumed VM): their deadlines count the time since boot, so a
# step ahead does not end a wait early and a step back does not hold it past its deadline.

bats_require_minimum_version 1.5.0

setup() {
  load common
  mkdir -p "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/fake"
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
  gpu_busy_awk=$(cat "$HOST_DIR/gpu-busy.awk")
}

# The GPU helper with its one value (gpu_busy_awk, which its rendered header sets: script.ts
# helperScripts), bounded: a wait that never ends fails the test.
gpus_free() { # ARG...
  timeout 20 env gpu_busy_awk="$gpu_busy_awk" bash "$HOST_DIR/wait-gpus-free.sh" "$@"
}

# curl on PATH that answers CODE for its first N calls, then 200; its first call steps the wall
# clock by STEP seconds.
stepping_curl() { # N CODE STEP
  cat > "$BATS_TEST_TMPDIR/bin/curl" <<EOF
#!/bin/bash
n=\$(( \$(cat "$BATS_TEST_TMPDIR/fake/curl.calls" 2>/dev/null || echo 0) + 1 ))
echo "\$n" > "$BATS_TEST_TMPDIR/fake/curl.calls"
[ "\$n" != 1 ] || echo "$3" > "$BATS_TEST_TMPDIR/fake/clock.step"
if [ "\$n" -le "$1" ]; then printf '%s' "$2"; else printf 200; fi
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/curl"
  fake_date
}

@test "wait-gpus-free: the wall clock stepping 2 h ahead does not end the wait early" {
  stepping_nvidia_smi 3 7200
  run gpus_free 0,1 1024 10 5
  [ "$status" = 0 ]
  [ "$(cat "$BATS_TEST_TMPDIR/fake/smi.calls")" = 4 ]
}

@test "wait-gpus-free: the wall clock stepping 2 h back does not hold the wait past its deadline" {
  stepping_nvidia_smi 1000 -7200
  run --separate-stderr gpus_free 0,1 1024 1 5
  [ "$status" = 1 ]
  [[ "$stderr" == *"GPU memory still in use after 1s: GPU 0: 81000 MiB used"* ]]
}

@test "wait-ready: the wall clock stepping 2 h ahead does not end the wait early" {
  stepping_curl 3 503 7200
  run timeout 20 bash "$HOST_DIR/wait-ready.sh" http://127.0.0.1:9/health_generate 5 "$$"
  [ "$status" = 0 ]
  [ "$(cat "$BATS_TEST_TMPDIR/fake/curl.calls")" = 4 ]
}

@test "wait-ready: the wall clock stepping 2 h back does not hold the wait past its deadline" {
  stepping_curl 100000 503 -7200
  run --separate-stderr timeout 20 bash "$HOST_DIR/wait-ready.sh" http://127.0.0.1:9/health_generate 1 "$$"
  [ "$status" = 1 ]
  [[ "$stderr" == *"http://127.0.0.1:9/health_generate not ready after 1s (last status 503)"* ]]
}
