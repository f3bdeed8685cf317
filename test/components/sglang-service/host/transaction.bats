#!/usr/bin/env bats
# The transaction's functions (components/sglang-service/host/transaction.sh), in bash against
# fake host commands: the drain's accounting, the GPU wait, the lock, the rollback's choice.

bats_require_minimum_version 1.5.0

setup() {
  load common
  load_transaction
}

# --- the drain's accounting (stop_server) ------------------------------------------------
# A test whose fake server exits by its states sets drain_deadline=60: common.bash's 1 s is for
# the tests that need the deadline to pass, and a loaded machine could reach it before the states end.

@test "drain: a server that drains to 0 and exits cuts nothing and is not killed" {
  drain_deadline=60 # it ends by its states
  drain "active active active inactive" "Gracefully exiting... Remaining number of requests 2." "Gracefully exiting... Remaining number of requests 0."
  [ "$killed" = 0 ]
  [ "$cut" = 0 ]
  ! grep -q '^kill' "$BATS_TEST_TMPDIR/fake/calls" || false
  grep -qx "stop --no-block u.service" "$BATS_TEST_TMPDIR/fake/calls"
}

@test "drain: past its deadline with requests in flight the server is killed and they are cut" {
  drain active "Gracefully exiting... Remaining number of requests 3."
  [[ "$drained" == *"the drain did not end within 1 s (timeouts.drainSeconds); killing the old server, cutting 3 requests still in flight"* ]]
  [ "$killed" = 1 ]
  [ "$cut" = 3 ]
  grep -qx "kill --signal=SIGKILL u.service" "$BATS_TEST_TMPDIR/fake/calls"
}

# --tokenizer-worker-num 2 (srt/managers/multi_tokenizer_mixin.py): each worker drains and counts
# its own requests (ids prefixed by its pid); the last line can be a worker that is done.
@test "drain: two tokenizer workers, one done (0) while the other still has 2: killed at the deadline, 2 cut" {
  mkdir -p "$BATS_TEST_TMPDIR/fake"
  echo "{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --tokenizer-worker-num 2 --port 30000 ; }" > "$BATS_TEST_TMPDIR/fake/execstart"
  drain active "Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=['101_a', '101_b', '101_c']." \
    "Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['102_a']." \
    "Gracefully exiting... Remaining number of requests 2. Remaining requests remaining_rids=['101_a', '101_b']." \
    "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]."
  [ "$killed" = 1 ]
  [ "$cut" = 2 ]
  [[ "$drained" == *"cutting 2 requests still in flight"* ]]
}

@test "drain: a server that logged no count and outlived its deadline is cut by an unknown number (null)" {
  drain active
  [ "$killed" = 1 ]
  [ "$cut" = null ]
}

@test "drain: SGLang's forced exit after a failed health check cuts what its last count held" {
  drain_deadline=60 # it ends by its states
  drain "active active inactive" "Gracefully exiting... Remaining number of requests 2." "Signal SIGTERM received while health check failed. Force exiting."
  [[ "$drained" == *"SGLang gave up its drain (its health check had failed: a stuck scheduler) and exited, cutting 2 requests still in flight"* ]]
  [ "$killed" = 1 ]
  [ "$cut" = 2 ]
}

@test "drain: SGL_FORCE_SHUTDOWN's exit before any count cuts an unknown number" {
  drain_deadline=60 # it ends by its states
  drain "active inactive" "Signal SIGTERM received while force shutdown flag set. Force exiting."
  [[ "$drained" == *"SGLang skipped its drain (SGL_FORCE_SHUTDOWN is set in its environment) and exited, cutting what was still in flight (SGLang logged no count)"* ]]
  [ "$killed" = 1 ]
  [ "$cut" = null ]
}

@test "drain: in a group, a server ended by a peer's abort with requests in flight counts them as cut; on one host it does not" {
  drain_deadline=60 # it ends by its states
  group_size=2
  drain "active active inactive" "Gracefully exiting... Remaining number of requests 4." "NCCL communicator was aborted on rank 0"
  [ "$killed" = 1 ]
  [ "$cut" = 4 ]
  group_size=1
  drain "active active inactive" "Gracefully exiting... Remaining number of requests 4." "NCCL communicator was aborted on rank 0"
  [ "$killed" = 0 ]
  [ "$cut" = 0 ]
}

@test "drain: systemd's stop timeout after a drain to 0 cuts nothing; before it, it cuts the last count" {
  drain_deadline=60 # it ends by its states
  fake_result=timeout drain "active active inactive" "Gracefully exiting... Remaining number of requests 0."
  [[ "$drained" == *"SGLang had drained every request; systemd's stop timeout (TimeoutStopSec) ended its own exit, which cut nothing"* ]]
  [ "$killed" = 0 ]
  fake_result=timeout drain "active active inactive" "Gracefully exiting... Remaining number of requests 5."
  [ "$killed" = 1 ]
  [ "$cut" = 5 ]
}

@test "drain: a unit that is not running is not stopped" {
  drain inactive
  [ "$killed" = 0 ]
  [ "$drain_seconds" = 0 ]
  ! grep -q '^stop' "$BATS_TEST_TMPDIR/fake/calls" || false
}

@test "drain: a state systemctl cannot read counts as running, never as gone" {
  systemctl() { return 124; }
  running
}

# Issue 60: the wall clock steps (an NTP correction, a resumed VM) while the old server drains.
# The drain's deadline counts the time since boot: the drain ends by itself, nothing is cut, and
# no "did not exit" is reported of a server that exited.
@test "drain: the wall clock stepping 2 h ahead mid-drain kills nothing: the drain ends by itself, nothing cut, no false \"did not exit\"" {
  drain_deadline=60 # it ends by its states
  step_clock_at_stop 7200
  drain "active active active active inactive" "Gracefully exiting... Remaining number of requests 2." "Gracefully exiting... Remaining number of requests 0."
  [ "$drain_rc" = 0 ]
  [ "$killed" = 0 ]
  [ "$cut" = 0 ]
  ! grep -q '^kill' "$BATS_TEST_TMPDIR/fake/calls" || false
  [[ "$drained" != *"did not end within"* ]]
  [[ "$drained" != *"did not exit within"* ]]
  # Its times are a moment's, not two hours'.
  awk -v d="$drain_seconds" -v s="$stop_seconds" 'BEGIN { exit !(d >= 0 && d < 60 && s >= 0 && s < 60) }'
}

@test "drain: the wall clock stepping 2 h back mid-drain still kills a drain that outlives its deadline, at that deadline" {
  step_clock_at_stop -7200
  # The server would end by itself after 300 reads of its state (seconds past the 1 s deadline).
  drain "$(printf 'active %.0s' {1..300}) inactive" "Gracefully exiting... Remaining number of requests 3."
  [ "$drain_rc" = 0 ]
  [[ "$drained" == *"the drain did not end within 1 s (timeouts.drainSeconds); killing the old server, cutting 3 requests still in flight"* ]]
  [ "$killed" = 1 ]
  [ "$cut" = 3 ]
}

# drain_seconds: the line at which SGLang said 0, on the journal's monotonic clock (short-monotonic),
# against t0 (seconds since boot); the rest until the process had gone is stop_seconds.
@test "drain: the drain's end is read from the journal's monotonic time, the clock of its start: drained at once, then a slow exit" {
  # No deadline in the way however loaded the machine: the exit takes 10 reads of the state.
  stop_s=600
  drain "$(printf 'active %.0s' {1..10}) inactive" "Gracefully exiting... Remaining number of requests 0."
  [ "$killed" = 0 ]
  # Drained when the stop was sent: its few reads before it take less than the 10 reads (and
  # polls) of the exit after it, however loaded the machine. (Read on another clock than t0's,
  # the drain would take the whole stop, or none of it.)
  awk -v d="$drain_seconds" -v s="$stop_seconds" 'BEGIN { exit !(d < s && s > 0) }'
  grep -q -- "-o short-monotonic" "$BATS_TEST_TMPDIR/fake/journal-calls"
}

# The drain is read from the journal's cursor before the stop, never from a wall-clock --since
# (which the same step would move), and always within the server's own invocation.
@test "drain: what the server logged before its stop is not read as its drain (the journal after its cursor, this invocation's alone)" {
  fake_unit active
  fake_journal "Gracefully exiting... Remaining number of requests 0."
  drain_rc=0
  stop_server drain > "$BATS_TEST_TMPDIR/drained" 2>&1 || drain_rc=$?
  [ "$drain_rc" = 0 ]
  [ "$killed" = 1 ]
  [ "$cut" = null ]
  grep -qx -- "-u u.service _SYSTEMD_INVOCATION_ID=inv1 -n 0 --show-cursor -q --no-pager" "$BATS_TEST_TMPDIR/fake/journal-calls"
  grep -q -- "--after-cursor c2 -o cat" "$BATS_TEST_TMPDIR/fake/journal-calls"
  ! grep -q -- "--since" "$BATS_TEST_TMPDIR/fake/journal-calls" || false
  ! grep -v -- "_SYSTEMD_INVOCATION_ID=inv1" "$BATS_TEST_TMPDIR/fake/journal-calls" || false
}

@test "drain: without a cursor (journalctl gave none) the invocation's lines are read whole" {
  drain_deadline=60 # it ends by its states
  fake_unit active active active inactive
  touch "$BATS_TEST_TMPDIR/fake/no-cursor"
  printf '%s\n' "Gracefully exiting... Remaining number of requests 1." "Gracefully exiting... Remaining number of requests 0." > "$BATS_TEST_TMPDIR/fake/at-stop"
  stop_server drain
  [ "$killed" = 0 ]
  [ "$cut" = 0 ]
  ! grep -q -- "--after-cursor" "$BATS_TEST_TMPDIR/fake/journal-calls" || false
  grep -q -- "_SYSTEMD_INVOCATION_ID=inv1 -o cat" "$BATS_TEST_TMPDIR/fake/journal-calls"
}

# --- the GPU wait ------------------------------------------------------------------------

@test "GPU wait: free when each of this node's GPUs uses at most gpu_free_mib; other GPUs do not count" {
  fake_nvidia_smi $'0, 3\n1, 1024\n2, 81000'
  wait_gpus
}

@test "GPU wait: a busy, unknown or unlisted GPU fails at the deadline, named" {
  fake_nvidia_smi $'0, 81004\n1, [N/A]'
  run wait_gpus
  [ "$status" = 1 ]
  [[ "$output" == *"FAILED: GPU memory on 127.0.0.10 was not released within 1 s after the old server exited (GPU 0: 81004 MiB used, GPU 1: [N/A] MiB used; timeouts.gpuReleaseSeconds)"* ]]
  fake_nvidia_smi '0, 0'
  run wait_gpus
  [[ "$output" == *"GPU 1: not listed by nvidia-smi"* ]]
}

@test "GPU wait: a failing or hung nvidia-smi reads as busy, and the wait still ends at its deadline" {
  fake_nvidia_smi "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." 9
  run wait_gpus
  [ "$status" = 1 ]
  cmd_s=1
  fake_nvidia_smi "" hang
  SECONDS=0
  run wait_gpus
  [ "$status" = 1 ]
  [ "$SECONDS" -lt 10 ]
}

# Issue 60: the GPU wait's deadline counts the time since boot, not the wall clock.
@test "GPU wait: the wall clock stepping 2 h ahead does not end the wait early; 2 h back does not hold it past its deadline" {
  stepping_nvidia_smi 3 7200
  # Free at its 4th read: a deadline of 30 s (not common.bash's 1) that no load reaches, and a
  # 2 h step of the wall clock would still pass.
  gpu_s=30 wait_gpus
  [ "$(cat "$BATS_TEST_TMPDIR/fake/smi.calls")" = 4 ]
  rm -f "$BATS_TEST_TMPDIR/fake/smi.calls"
  # Busy for 300 reads (seconds past its 1 s deadline), the clock 2 h back: it fails at its deadline.
  stepping_nvidia_smi 300 -7200
  run wait_gpus
  [ "$status" = 1 ]
  [[ "$output" == *"FAILED: GPU memory on 127.0.0.10 was not released within 1 s after the old server exited"* ]]
}

@test "GPU wait: without its GPU reading (a header that could not be read) nothing is free" {
  fake_nvidia_smi $'0, 0\n1, 0'
  unset gpu_busy_awk
  run wait_gpus
  [ "$status" = 1 ]
  [[ "$output" == *"GPU reading (gpu_busy_awk) is missing"* ]]
}

# --- the lock ----------------------------------------------------------------------------

@test "lock: its folder is made root's alone, and an older version's open rights are put right" {
  rmdir "$run"
  run_dir
  [ "$(stat -c %a "$run")" = 700 ]
  chmod 0755 "$run" && touch "$run/host.lock" && chmod 0644 "$run/host.lock"
  run_dir
  [ "$(stat -c %a "$run")" = 700 ]
  [ "$(stat -c %a "$run/host.lock")" = 600 ]
}

@test "lock: a holder that is not ours is named by pid, user and command; ours by its note" {
  run_dir
  touch "$run/host.lock"
  # Its output away from bats (which waits for whatever holds its output open).
  flock "$run/host.lock" sleep 30 >/dev/null 2>&1 &
  local holder=$!
  until [ -n "$(lock_holders)" ]; do sleep 0.05; done
  run lock_holder
  # The holder and its command, by pid.
  kill "$holder" $(cat "/proc/$holder/task/$holder/children")
  [ "$status" = 1 ]
  [[ "$output" == *"of user $(id -un) ("*"sleep 30), which is not a dflash-sglang deployment" ]]
  # Our own holder: the note's pid holds the lock.
  exec 7>>"$run/host.lock"
  flock 7
  printf '%s\npid %s\n' 'stack "t" (unit u, from tests)' "$BASHPID" > "$run/host.lock.note"
  run lock_holder
  exec 7>&-
  [ "$status" = 0 ]
  [ "$output" = 'stack "t" (unit u, from tests)' ]
}

@test "lock: another stack's rollout note keeps this stack off while its claim lasts, not after" {
  echo "other u.service $(( $(date +%s) + 60 )) stack \"other\" (unit u, from x)" > "$run/rollout"
  echo "$(( $(date +%s) + 60 )) other u.service" > "$run/rollout.due"
  run rollout_holder
  [ "$output" = 'stack "other" (unit u, from x; proving its restart)' ]
  echo "$(( $(date +%s) - 1 )) other u.service" > "$run/rollout.due"
  run --separate-stderr rollout_holder
  [ -z "$output" ]
  [[ "$stderr" == *"has had no one proving it since"* ]]
  # This stack's own note never keeps it off.
  echo "s u.service $(( $(date +%s) + 60 )) x" > "$run/rollout"
  run rollout_holder
  [ -z "$output" ]
}

# Issue 60: the claims in /run are seconds since boot (up_s), which other processes of the host
# compare; a wall clock 2 h off changes nothing. A person reads the time in wall-clock UTC.
@test "lock: a rollout claim counts seconds since boot, whatever the wall clock says; an older script's epoch claim counts until it expires" {
  step_clock 7200
  echo "other u.service $(( $(boot_s) + 60 )) stack \"other\" (unit u, from x)" > "$run/rollout"
  echo "$(( $(boot_s) + 60 )) other u.service" > "$run/rollout.due"
  run rollout_holder
  [ "$output" = 'stack "other" (unit u, from x; proving its restart)' ]
  step_clock -7200
  run rollout_holder
  [ "$output" = 'stack "other" (unit u, from x; proving its restart)' ]
  echo "$(( $(boot_s) - 1 )) other u.service" > "$run/rollout.due"
  run --separate-stderr rollout_holder
  [ -z "$output" ]
  [[ "$stderr" == *"has had no one proving it since $("$REAL_DATE" -u -d "@$(( $("$REAL_DATE" +%s) - 7200 ))" +%FT%H)"* ]]
  # A note without its claim (an older script's): its own expiry, seconds since boot or epoch.
  rm -f "$run/rollout.due"
  echo "other u.service $(( $(boot_s) + 60 )) stack \"other\" (unit u, from x)" > "$run/rollout"
  [ -n "$(rollout_holder)" ]
  # An epoch is the wall clock's, read as it stands.
  step_clock 0
  echo "other u.service $(( $("$REAL_DATE" +%s) + 60 )) stack \"other\" (unit u, from x)" > "$run/rollout"
  [ -n "$(rollout_holder)" ]
  echo "other u.service $(( $("$REAL_DATE" +%s) - 60 )) stack \"other\" (unit u, from x)" > "$run/rollout"
  [ -z "$(rollout_holder)" ]
  # begin_rollout claims the handover in seconds since boot.
  begin_rollout
  read -r due _ < "$run/rollout.due"
  read -r _ _ until _ < "$run/rollout"
  [ $(( due - $(boot_s) )) -ge $(( handover_s - 1 )) ] && [ $(( due - $(boot_s) )) -le "$handover_s" ]
  [ $(( until - $(boot_s) )) -ge $(( prove_s - 1 )) ] && [ $(( until - $(boot_s) )) -le "$prove_s" ]
}

# --- the rollback's choice ---------------------------------------------------------------

# A known-good generation (host/generations.sh), number 1, and a newer one (2) that failed,
# current: a rollback must choose the known-good, not the newest.
known_good_of() { # UNIT-TEXT KEY
  local g=$state/generations/1 f=$state/generations/2
  mkdir -p "$g/secrets" "$g/helpers" "$f/secrets" "$f/helpers"
  printf '%s\n' "$1" > "$g/unit.service"
  echo '{"stack":"s"}' > "$g/proved.json"
  printf '%s\n' "$2" > "$g/secrets/u.secrets.yaml"
  printf '[Service] failed\n' > "$f/unit.service"
  printf 'api-key: failed\n' > "$f/secrets/u.secrets.yaml"
  ln -sfn generations/1 "$state/known-good"
  ln -sfn generations/2 "$state/current"
}

@test "rollback: goes back to the known-good unit with its own secrets; a secret it did not have goes" {
  known_good_of "[Service] good" "api-key: good"
  echo "api-key: rotated" > "$secrets_dir/u.secrets.yaml"
  echo "HF_TOKEN=new" > "$secrets_dir/u.env"
  fake_unit inactive
  fake_nvidia_smi $'0, 0\n1, 0'
  install_start() { echo "install_start $1" >> "$BATS_TEST_TMPDIR/fake/calls"; }
  run restore_known_good "$(printf 'failed\n' | sha256sum | cut -c1-64)"
  [ "$status" = 0 ]
  grep -qx "install_start $state/generations/1" "$BATS_TEST_TMPDIR/fake/calls"
  [ "$(cat "$secrets_dir/u.secrets.yaml")" = "api-key: good" ]
  [ ! -e "$secrets_dir/u.env" ]
}

@test "rollback: nothing to roll back to, the failed unit itself, or rollback off: HOST DOWN or left as it is, nothing installed" {
  fake_unit inactive
  install_start() { echo "install_start $1" >> "$BATS_TEST_TMPDIR/fake/calls"; }
  run restore_known_good deadbeef
  [ "$status" = 2 ]
  [[ "$output" == "HOST DOWN: 127.0.0.10 has no earlier configuration of u that passed readiness"* ]]
  known_good_of "[Service] good" "k"
  # What failed is the known-good itself (current), unit and secrets.
  ln -sfn generations/1 "$state/current"
  run restore_known_good "$(hash_of "$state/generations/1/unit.service")"
  [ "$status" = 2 ]
  [[ "$output" == "HOST DOWN: the failed configuration is the last known-good one of u on 127.0.0.10 (generation 1)"* ]]
  rollback_on=no
  run restore_known_good deadbeef
  [ "$status" = 2 ]
  [[ "$output" == "Rollback is off (safety.rollback=false)"* ]]
  ! grep -q install_start "$BATS_TEST_TMPDIR/fake/calls" || false
}

@test "rollback: a change of a secret alone, or a restart that failed before its install, rolls back to the known-good" {
  known_good_of "[Service] good" "k"
  # Generation 2 differs from the known-good by its key only.
  cp "$state/generations/1/unit.service" "$state/generations/2/unit.service"
  fake_unit inactive
  fake_nvidia_smi $'0, 0\n1, 0'
  install_start() { echo "install_start $1" >> "$BATS_TEST_TMPDIR/fake/calls"; }
  run restore_known_good "$(hash_of "$state/generations/1/unit.service")"
  [ "$status" = 0 ]
  grep -qx "install_start $state/generations/1" "$BATS_TEST_TMPDIR/fake/calls"
  [ "$(cat "$secrets_dir/u.secrets.yaml")" = "k" ]
  # Readiness's rollback of a unit this node never installed (a group's node whose GPUs stayed
  # busy): the known-good, current, is started again; so too when its mark says the group's
  # restart failed here before its install, even for the known-good's own unit (a secret changed).
  : > "$BATS_TEST_TMPDIR/fake/calls"
  ln -sfn generations/1 "$state/current"
  run restore_known_good deadbeef
  [ "$status" = 0 ]
  grep -qx "install_start $state/generations/1" "$BATS_TEST_TMPDIR/fake/calls"
  failed_before_install=yes
  run restore_known_good "$(hash_of "$state/generations/1/unit.service")"
  [ "$status" = 0 ]
  failed_before_install=no
  # A restart whose new generation (3) was never installed: the known-good, current, is started again.
  : > "$BATS_TEST_TMPDIR/fake/calls"
  ln -sfn generations/1 "$state/current"
  mkdir -p "$state/generations/3"
  new_gen=3
  run restore_known_good "$(hash_of "$state/generations/1/unit.service")"
  [ "$status" = 0 ]
  grep -qx "install_start $state/generations/1" "$BATS_TEST_TMPDIR/fake/calls"
}

@test "rollback: GPUs still busy: the known-good waits for them in a recovery, nothing is started now" {
  known_good_of "[Service] good" "k"
  fake_unit inactive
  fake_nvidia_smi $'0, 80000\n1, 0'
  install_start() { echo "install_start $1" >> "$BATS_TEST_TMPDIR/fake/calls"; }
  recover_when_free() { echo recover >> "$BATS_TEST_TMPDIR/fake/calls"; }
  run restore_known_good deadbeef
  [ "$status" = 3 ]
  grep -qx recover "$BATS_TEST_TMPDIR/fake/calls"
  ! grep -q install_start "$BATS_TEST_TMPDIR/fake/calls" || false
}

@test "rollback: a failed install of the known-good says ROLLBACK FAILED, HOST DOWN" {
  known_good_of "[Service] good" "k"
  fake_unit inactive
  fake_nvidia_smi $'0, 0\n1, 0'
  install_start() { return 1; }
  run restore_known_good deadbeef
  [ "$status" = 2 ]
  [[ "$output" == *"ROLLBACK FAILED, HOST DOWN: could not install and start the previous configuration of u on 127.0.0.10"* ]]
}

# --- secrets -----------------------------------------------------------------------------

@test "secrets: read from stdin beside the live ones, installed only when changed; those the stack no longer has go" {
  printf '%s\n' "$(echo -n 'api-key: a' | base64)" "$(echo -n 'Authorization: Bearer a' | base64)" | read_secrets
  [ "$(cat "$secrets_dir/u.secrets.yaml.dflash-new")" = "api-key: a" ]
  [ "$(stat -c %a "$secrets_dir/u.secrets.yaml.dflash-new")" = 600 ]
  secrets_changed
  echo "HF_TOKEN=x" > "$secrets_dir/u.env"
  install_secrets
  [ "$(cat "$secrets_dir/u.curl-headers")" = "Authorization: Bearer a" ]
  [ ! -e "$secrets_dir/u.env" ]
  printf '%s\n' "$(echo -n 'api-key: a' | base64)" "$(echo -n 'Authorization: Bearer a' | base64)" | read_secrets
  ! secrets_changed || false
  drop_new_secrets
  [ -z "$(find "$secrets_dir" -name '*.dflash-new')" ]
}

@test "secrets: a removal's check names what it could not remove, and takes every copy" {
  touch "$secrets_dir/u.env" "$secrets_dir/u.curl-headers.dflash-new" "$secrets_dir/u.x.env"
  mkdir -p "$state/last-good.secrets" "$state/generations/1/secrets"
  touch "$state/generations/1/secrets/u.env"
  no_secrets_left u
  [ ! -e "$secrets_dir/u.env" ]
  [ ! -e "$state/last-good.secrets" ]
  [ ! -e "$state/generations" ]
  [ -e "$secrets_dir/u.x.env" ]
}
