#!/usr/bin/env bats
# The program's first read of a node (components/sglang-service/host/read-unit.sh), in bash
# against fake systemctl and journalctl on PATH: a unit whose SGLang crashed (its main process
# SIGKILLs itself: "inactive", a clean exit by SuccessExitStatus=SIGKILL) reads as failed; a
# stop (SGLang's drain ends the same way on v0.5.19) reads as stopped.

bats_require_minimum_version 1.5.0

setup() {
  load common
  unit_path=$BATS_TEST_TMPDIR/u.service service=u.service state=$BATS_TEST_TMPDIR/state removed_marks=()
  echo "[Service]" > "$unit_path"
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  printf '#!/bin/bash\ncase "$*" in is-active*) echo inactive ;; *InactiveEnterTimestamp*) echo "Sun 2026-12-06 10:00:00 UTC" ;; *InvocationID*) echo inv1 ;; esac\n' > "$BATS_TEST_TMPDIR/bin/systemctl"
  printf '#!/bin/bash\ncat "%s"\n' "$BATS_TEST_TMPDIR/journal" > "$BATS_TEST_TMPDIR/bin/journalctl"
  chmod +x "$BATS_TEST_TMPDIR/bin/systemctl" "$BATS_TEST_TMPDIR/bin/journalctl"
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

read_state() { # JOURNAL LINE...
  printf '%s\n' "$@" > "$BATS_TEST_TMPDIR/journal"
  # shellcheck source=../../../../components/sglang-service/host/read-unit.sh
  out=$(source "$HOST_DIR/read-unit.sh")
  sed -n 2p <<< "$out"
}

@test "a scheduler's exception, then SGLang's SIGQUIT and its own SIGKILL: failed" {
  [ "$(read_state "[2026-12-06 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):" "RuntimeError: CUDA error: an illegal memory access was encountered" "[2026-12-06 10:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.")" = failed ]
}

@test "the SIGQUIT line of a run never sent SIGTERM: failed" {
  [ "$(read_state "[2026-12-06 10:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.")" = failed ]
}

@test "a drain to 0 (SIGTERM, even with a SIGQUIT line at its end), or nothing logged: stopped (inactive)" {
  [ "$(read_state "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." "SIGQUIT received. signum=None, frame=None. It usually means one child failed.")" = inactive ]
  [ "$(read_state "")" = inactive ]
}
