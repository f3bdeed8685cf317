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
# journal (-o cat), which starts with the line of a server that serves; journal.unix and
# journal.mono: the same with times (-o short-unix; -o short-monotonic, seconds since boot).
# at-stop: the lines it logs once told to stop (`stop --no-block`). result: its Result
# ($fake_result, or success).
# calls: every systemctl call, one a line; journal-calls: every journalctl call.
fake_unit() { # STATE...
  local f=$BATS_TEST_TMPDIR/fake
  mkdir -p "$f"
  printf '%s\n' "$@" > "$f/states"
  : > "$f/journal"
  : > "$f/journal.unix"
  : > "$f/journal.mono"
  : > "$f/at-stop"
  : > "$f/journal-calls"
  rm -f "$f/no-cursor"
  echo "${fake_result:-success}" > "$f/result"
  : > "$f/calls"
  fake_journal "The server is fired up and ready to roll!"
}
fake_journal() { # LINE... (logged now)
  local l up _
  for l in "$@"; do
    read -r up _ < /proc/uptime
    echo "$l" >> "$BATS_TEST_TMPDIR/fake/journal"
    echo "$("$REAL_DATE" +%s.%N) host sglang[1]: $l" >> "$BATS_TEST_TMPDIR/fake/journal.unix"
    printf '[%12.6f] host sglang[1]: %s\n' "$up" "$l" >> "$BATS_TEST_TMPDIR/fake/journal.mono"
  done
}
# Stops a scripted unit the transaction's way (stop_server drain): STATES (its ActiveState
# answers, space-separated) and the journal LINES it logs once told to stop (SGLang logs its
# drain after its SIGTERM). Its output is in $drained, its exit status in $drain_rc; killed,
# cut, drain_seconds and stop_seconds are stop_server's own.
drain() { # "STATE..." [LINE...]
  local states=$1
  shift
  # shellcheck disable=SC2086 # one word a state
  fake_unit $states
  [ $# = 0 ] || printf '%s\n' "$@" > "$BATS_TEST_TMPDIR/fake/at-stop"
  drain_rc=0
  stop_server drain > "$BATS_TEST_TMPDIR/drained" 2>&1 || drain_rc=$?
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
        "stop --no-block $unit")
          # The clock steps now, where the test said so (step_clock_at_stop); then the drain's lines.
          if [ -f "$f/clock.step.at-stop" ]; then mv -f "$f/clock.step.at-stop" "$f/clock.step"; fi
          local l
          while IFS= read -r l; do fake_journal "$l"; done < "$f/at-stop"
          ;;
      esac
      ;;
  esac
}
# The unit's journal: -o cat, short-unix or short-monotonic. `--show-cursor` prints the cursor of
# its last line ("c<N>", N its lines), or fails printing none where it has none (as journalctl
# does) or the test made it fail ($BATS_TEST_TMPDIR/fake/no-cursor); `--after-cursor c<N>` shows
# the lines after the N-th.
fake_journalctl() {
  local f=$BATS_TEST_TMPDIR/fake file=journal after="" a prev=""
  echo "$*" >> "$f/journal-calls"
  for a in "$@"; do
    [ "$prev" = --after-cursor ] && after=$a
    case "$a" in
      short-unix) file=journal.unix ;;
      short-monotonic) file=journal.mono ;;
      --after-cursor=*) after=${a#*=} ;;
    esac
    prev=$a
  done
  if [[ " $* " == *" --show-cursor "* ]]; then
    [ -s "$f/journal" ] && [ ! -e "$f/no-cursor" ] || return 1
    echo "-- cursor: c$(wc -l < "$f/journal")"
    return 0
  fi
  if [ -n "$after" ]; then tail -n "+$(( ${after#c} + 1 ))" "$f/$file"; else cat "$f/$file"; fi
}

# --- a wall clock that steps (an NTP correction, a resumed VM: issue 60) -----------------
# `date` on PATH that answers the real time plus the seconds in $BATS_TEST_TMPDIR/fake/clock.step
# (once that file exists); a call that names its own time (-d, -r) gets the real date's answer.
REAL_DATE=$(type -P date)
fake_date() {
  mkdir -p "$BATS_TEST_TMPDIR/fake" "$BATS_TEST_TMPDIR/bin"
  cat > "$BATS_TEST_TMPDIR/bin/date" <<EOF
#!/bin/bash
for a in "\$@"; do case "\$a" in -d*|--date*|-r*|--reference*) exec "$REAL_DATE" "\$@" ;; esac; done
step=\$(cat "$BATS_TEST_TMPDIR/fake/clock.step" 2>/dev/null || echo 0)
exec "$REAL_DATE" -d "@\$("$REAL_DATE" +%s.%N | awk -v s="\$step" '{ printf "%.9f", \$1 + s }')" "\$@"
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/date"
}
# nvidia-smi on PATH whose GPUs 0 and 1 are busy for its first BUSY reads, then free; its first
# read steps the wall clock by STEP seconds.
stepping_nvidia_smi() { # BUSY STEP
  fake_date
  cat > "$BATS_TEST_TMPDIR/bin/nvidia-smi" <<EOF
#!/bin/bash
n=\$(( \$(cat "$BATS_TEST_TMPDIR/fake/smi.calls" 2>/dev/null || echo 0) + 1 ))
echo "\$n" > "$BATS_TEST_TMPDIR/fake/smi.calls"
[ "\$n" != 1 ] || echo "$2" > "$BATS_TEST_TMPDIR/fake/clock.step"
if [ "\$n" -le "$1" ]; then printf '0, 81000\n1, 0\n'; else printf '0, 0\n1, 0\n'; fi
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/nvidia-smi"
}
# Whole seconds since boot, as the host scripts count their deadlines and claims.
boot_s() { local up _; read -r up _ < /proc/uptime && echo "${up%.*}"; }
step_clock() { fake_date; echo "$1" > "$BATS_TEST_TMPDIR/fake/clock.step"; } # SECONDS: from now on
step_clock_at_stop() { fake_date; echo "$1" > "$BATS_TEST_TMPDIR/fake/clock.step.at-stop"; } # SECONDS: from `systemctl stop --no-block`

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
