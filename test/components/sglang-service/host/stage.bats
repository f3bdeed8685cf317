#!/usr/bin/env bats
# Staging and its removal (components/sglang-service/host/stage.sh, stage-removal.sh), in bash:
# staging writes only this stack's folder, each file whole and exact; the removal keeps what
# another stack or a unit still uses.

bats_require_minimum_version 1.5.0

setup() {
  load common
  transaction_values
  # shellcheck source=../../../../components/sglang-service/host/stage.sh
  source "$HOST_DIR/stage.sh"
  # shellcheck source=../../../../components/sglang-service/host/stage-removal.sh
  source "$HOST_DIR/stage-removal.sh"
  unit_name=u units_dir=${live%/*}
  helper_names=(wait-gpus-free wait-ready)
  helper_texts=($'#!/bin/bash\necho gpus\n' $'#!/bin/bash\necho ready\n')
  unit_text=$'[Service]\nExecStartPre='"$helper_dir"$'/wait-gpus-free 0,1 1024 300\nExecStart=/bin/true\n'
  transaction_text=$'#!/bin/bash\necho transaction\n'
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
  # A systemd-analyze that accepts the unit (a test that needs another answer writes its own).
  printf '#!/bin/bash\nexit 0\n' > "$BATS_TEST_TMPDIR/bin/systemd-analyze"
  chmod +x "$BATS_TEST_TMPDIR/bin/systemd-analyze"
}

@test "stage: every file is written whole, exact and with its mode, in this stack's folder only" {
  local before
  before=$(cd "$BATS_TEST_TMPDIR" && find . -path ./state/u/stacks/s -prune -o -print | sort)
  stage_files
  [ "$(cat "$stage/unit.service")" = "$(printf '%s' "$unit_text")" ]
  cmp -s <(printf '%s' "$transaction_text") "$stage/transaction.sh"
  cmp -s <(printf '%s' "${helper_texts[1]}") "$stage/helpers/wait-ready"
  [ "$(stat -c %a "$stage/transaction.sh")" = 755 ]
  [ "$(stat -c %a "$stage/unit.service")" = 644 ]
  [ "$(stat -c %a "$stage/helpers/wait-gpus-free")" = 755 ]
  [ "$(cd "$BATS_TEST_TMPDIR" && find . -path ./state/u/stacks/s -prune -o -print | sort)" = "$before" ]
  [ -z "$(find "$stage" -name '*.dflash-tmp')" ]
  [ ! -e "$stage/verify" ]
}

@test "stage: systemd-analyze checks a copy that points at the staged helpers; a unit it refuses fails the staging" {
  printf '#!/bin/bash\ncp "$2" "%s/verified"\nexit 1\n' "$BATS_TEST_TMPDIR" > "$BATS_TEST_TMPDIR/bin/systemd-analyze"
  chmod +x "$BATS_TEST_TMPDIR/bin/systemd-analyze"
  run stage_files
  [ "$status" = 1 ]
  grep -qx "ExecStartPre=$stage/helpers/wait-gpus-free 0,1 1024 300" "$BATS_TEST_TMPDIR/verified"
}

@test "stage: a systemd-analyze that hangs is killed at cmd_s and named" {
  cmd_s=1
  printf '#!/bin/bash\nexec sleep 60\n' > "$BATS_TEST_TMPDIR/bin/systemd-analyze"
  chmod +x "$BATS_TEST_TMPDIR/bin/systemd-analyze"
  run --separate-stderr stage_files
  [ "$status" = 124 ]
  [[ "$stderr" == *"FAILED: systemd-analyze verify did not answer within 1 s (timeouts.commandSeconds) on 127.0.0.10; nothing was changed."* ]]
}

@test "stage removal: other stacks' folders and the shared helpers stay while any stack remains or any unit names them" {
  rm -rf "$stage"
  mkdir -p "$state_root/u/stacks/a" "$state_root/u/stacks/b" "$helper_dir"
  stage=$state_root/u/stacks/a remove_stage
  [ ! -e "$state_root/u/stacks/a" ]
  [ -e "$state_root/u/stacks/b" ]
  [ -e "$helper_dir" ]
  # A rename's first half: the old unit serves on until the new name's restart removes it.
  printf '[Service]\nExecStartPre=%s/wait-gpus-free 0 1024 300\n' "$helper_dir" > "$live"
  stage=$state_root/u/stacks/b remove_stage
  [ -e "$helper_dir" ]
  rm "$live"
  stage=$state_root/u/stacks/b remove_stage
  [ ! -e "$helper_dir" ]
  [ ! -e "$state_root" ]
}
