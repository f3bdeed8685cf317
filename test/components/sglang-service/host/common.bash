# shellcheck shell=bash
# The bash tests' harness: the host scripts' files (components/sglang-service/host/, or
# $DFLASH_HOST_DIR: the mutation test points it at a changed copy) sourced under values like
# those script.ts renders, every path under the test's own folder, and fake host commands:
# systemctl and journalctl as functions that play a script of states, nvidia-smi on PATH.

HOST_DIR=${DFLASH_HOST_DIR:-$(cd "$BATS_TEST_DIRNAME/../../../../components/sglang-service/host" && pwd)}

# Values as script.ts renderTransaction writes them, for unit u of stack s on one node.
transaction_values() {
  local root=$BATS_TEST_TMPDIR
  label="u (stack s)" host=127.0.0.10 unit=u.service stack=s rank=0 group_size=1
  state_root=$root/state state=$root/state/u stage=$root/state/u/stacks/s
  secrets_dir=$root/secrets live=$root/units/u.service run=$root/run removed_dir=$root/removed
  secret_files=("$secrets_dir/u.secrets.yaml" "$secrets_dir/u.curl-headers")
  absent_secrets=("$secrets_dir/u.env")
  every_secret=("$secrets_dir/u.secrets.yaml" "$secrets_dir/u.curl-headers" "$secrets_dir/u.env")
  secret_suffixes=(.secrets.yaml .curl-headers .env)
  helper_dir=$root/helpers hold_root=$root/hold hold_drop_in=50-dflash-hold.conf
  drain_deadline=1 drain_s=1 drain_policy=fail stop_s=5 gpu_s=1 gpu_free_mib=1024 gpus=0,1
  cmd_s=2 start_s=10 step_max_s=60 poll=0.01 lock_wait=1 prove_s=30 rollback_on=yes
  recover_s=60 keeper_beat=1 keeper_grace=5 handover_s=5 barrier_s=1 start_wait_s=5
  port=30000 keep_gens=3
  gpu_busy_awk=$(cat "$HOST_DIR/gpu-busy.awk")
  drain_count_awk=$(cat "$HOST_DIR/drain-count.awk")
  mkdir -p "$state" "$stage" "$secrets_dir" "${live%/*}" "$run" "$BATS_TEST_TMPDIR/bin"
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

load_transaction() {
  transaction_values
  # shellcheck source=../../../../components/sglang-service/host/lock.sh
  source "$HOST_DIR/lock.sh"
  # shellcheck source=../../../../components/sglang-service/host/generations.sh
  source "$HOST_DIR/generations.sh"
  # shellcheck source=../../../../components/sglang-service/host/transaction.sh
  source "$HOST_DIR/transaction.sh"
  # The fakes replace the bounded wrappers the transaction defines.
  systemctl() { fake_systemctl "$@"; }
  journalctl() { fake_journalctl "$@"; }
}

# --- a scripted unit -------------------------------------------------------------------
# $BATS_TEST_TMPDIR/fake/states: the ActiveState answers, one a line, taken in turn (the last
# one stays); a `kill` or `stop` without --no-block makes it "inactive". journal: the unit's
# journal (-o cat); journal.unix: the same with times (-o short-unix). result: its Result
# ($fake_result, or success).
# calls: every systemctl call, one a line.
fake_unit() { # STATE...
  mkdir -p "$BATS_TEST_TMPDIR/fake"
  printf '%s\n' "$@" > "$BATS_TEST_TMPDIR/fake/states"
  : > "$BATS_TEST_TMPDIR/fake/journal"
  : > "$BATS_TEST_TMPDIR/fake/journal.unix"
  echo "${fake_result:-success}" > "$BATS_TEST_TMPDIR/fake/result"
  : > "$BATS_TEST_TMPDIR/fake/calls"
}
fake_journal() { # LINE... (logged now)
  local l
  for l in "$@"; do
    echo "$l" >> "$BATS_TEST_TMPDIR/fake/journal"
    echo "$(date +%s.%N) host sglang[1]: $l" >> "$BATS_TEST_TMPDIR/fake/journal.unix"
  done
}
# Stops a scripted unit the transaction's way (stop_server drain): STATES (its ActiveState
# answers, space-separated) and the journal LINES it logged. Its output is in $drained; killed,
# cut and drain_seconds are stop_server's own.
drain() { # "STATE..." [LINE...]
  local states=$1
  shift
  # shellcheck disable=SC2086 # one word a state
  fake_unit $states
  [ $# = 0 ] || fake_journal "$@"
  stop_server drain > "$BATS_TEST_TMPDIR/drained" 2>&1
  drained=$(cat "$BATS_TEST_TMPDIR/drained")
}

fake_systemctl() {
  local f=$BATS_TEST_TMPDIR/fake
  echo "$*" >> "$f/calls"
  case "$1 ${4:-}" in
    "show ActiveState")
      head -n 1 "$f/states"
      [ "$(wc -l < "$f/states")" -le 1 ] || sed -i 1d "$f/states"
      ;;
    "show MainPID") echo 0 ;;
    "show InvocationID") echo inv1 ;;
    "show Result") cat "$f/result" ;;
    "show ExecStart") cat "$f/execstart" 2>/dev/null ;;
    *)
      case "$*" in
        kill*|"stop $unit") echo inactive > "$f/states" ;;
      esac
      ;;
  esac
}
fake_journalctl() {
  case "$*" in
    *short-unix*) cat "$BATS_TEST_TMPDIR/fake/journal.unix" ;;
    *) cat "$BATS_TEST_TMPDIR/fake/journal" ;;
  esac
}

# nvidia-smi on PATH that prints ROWS ("index, MiB" lines) and exits CODE, or hangs with "hang".
fake_nvidia_smi() { # ROWS [CODE|hang]
  printf '%s\n' "$1" > "$BATS_TEST_TMPDIR/bin/nvidia-smi.out"
  if [ "${2:-0}" = hang ]; then
    printf '#!/bin/bash\nexec sleep 60\n' > "$BATS_TEST_TMPDIR/bin/nvidia-smi"
  else
    printf '#!/bin/bash\ncat "%s"\nexit %s\n' "$BATS_TEST_TMPDIR/bin/nvidia-smi.out" "${2:-0}" > "$BATS_TEST_TMPDIR/bin/nvidia-smi"
  fi
  chmod +x "$BATS_TEST_TMPDIR/bin/nvidia-smi"
}
