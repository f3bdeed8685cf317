#!/bin/bash
# dflash-sglang host-side transaction: sglang-k26, stack b16t4-w2048, node 0; staged by `pulumi up`.
#   restart HASH [force] | rollback HASH | good HASH | release | prove | remove [UNIT [MACHINE-ID]]
# Rendered by components/sglang-service/script.ts: the values below, then host/lock.sh, host/generations.sh, host/transaction.sh verbatim. Do not edit.
set -uo pipefail
export LC_ALL=C.UTF-8

# --- values ---
label='sglang-k26 (stack b16t4-w2048)'
host=127.0.0.10
unit=sglang-k26.service
stack=b16t4-w2048
rank=0
group_size=1
stage=/var/lib/dflash-sglang/sglang-k26/stacks/b16t4-w2048
state_root=/var/lib/dflash-sglang
state=/var/lib/dflash-sglang/sglang-k26
secrets_dir=/etc/dflash-sglang
secret_files=(/etc/dflash-sglang/sglang-k26.secrets.yaml /etc/dflash-sglang/sglang-k26.curl-headers)
absent_secrets=(/etc/dflash-sglang/sglang-k26.env)
every_secret=(/etc/dflash-sglang/sglang-k26.secrets.yaml /etc/dflash-sglang/sglang-k26.curl-headers /etc/dflash-sglang/sglang-k26.env)
secret_suffixes=(.secrets.yaml .curl-headers .env)
helper_dir=/usr/local/lib/dflash-sglang
live=/etc/systemd/system/sglang-k26.service
run=/run/dflash-sglang
removed_dir=/var/lib/dflash-sglang-removed
drain_deadline=315
drain_s=300
drain_policy=fail
stop_s=120
gpu_s=300
gpu_free_mib=1024
gpus=0,1,2,3,4,5,6,7
cmd_s=30
start_s=2190
step_max_s=6060
poll=0.250
lock_wait=600
prove_s=2230
rollback_on=yes
recover_s=3600
keeper_beat=5
keeper_grace=60
handover_s=60
barrier_s=690
start_wait_s=900
hold_root=/run/systemd/system
hold_drop_in=50-dflash-hold.conf
port=30001
keep_gens=3
IFS= read -r -d '' gpu_busy_awk <<'DFLASH_EOF'
# dflash-sglang: the GPU reading, one place for every reader (the transaction's wait_gpus and its
# recovery, the unit's ExecStartPre wait-gpus-free). Input: `nvidia-smi --query-gpu=index,memory.used
# --format=csv,noheader,nounits` (awk -F', *'); variables gpus (a comma list) and max (MiB). Prints,
# comma-separated, each GPU of gpus that is not free; nothing when all are. A GPU is free only
# when nvidia-smi lists it with a number of MiB at most max: an empty or [N/A] cell, a GPU not
# listed, an error message or no output at all (a failed or hung nvidia-smi) read as busy.
BEGIN { n = split(gpus, g, ","); for (i = 1; i <= n; i++) want[g[i]] = 1 }
($1 in want) { seen[$1] = 1; if ($2 !~ /^[0-9]+$/ || $2 + 0 > max + 0) { printf "%sGPU %s: %s MiB used", sep, $1, $2; sep = ", " } }
END { for (i = 1; i <= n; i++) if (!(g[i] in seen)) { printf "%sGPU %s: not listed by nvidia-smi", sep, g[i]; sep = ", " } }
DFLASH_EOF
IFS= read -r -d '' drain_count_awk <<'DFLASH_EOF'
# dflash-sglang: SGLang's drain counts, one reading for the transaction's stop (host/transaction.sh
# stop_server). Input: the old server's journal lines; each tokenizer worker's watchdog
# (srt/managers/tokenizer_manager.py sigterm_watchdog) logs every 5 s
#   Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=[...].
# and stops after its line that says 0. Variables: workers (the server's --tokenizer-worker-num,
# 1 when unset) and what: "count" prints the requests still in flight across every worker, or
# nothing while that is unknown (a worker not heard from yet); "drained" prints the time of the
# line at which every worker had said 0: `journalctl -o short-monotonic`'s "[ 1234.567890]"
# (seconds since boot, the transaction's clock: never the wall clock, which can step during a
# drain, issue 60) as 1234.567890, or the first field of any other output (short-unix's).
# With several workers (srt/managers/multi_tokenizer_mixin.py) a request id starts with its
# worker's id (`<pid>_...`), so a line with requests names its worker; a line that says 0 names
# none: it is the last line of the worker not heard from the longest that still had requests
# (each logs on its own 5 s beat), or of a worker that never had any.
function stamp(  t) {
  if ($0 !~ /^\[ *[0-9]+(\.[0-9]+)?\]/) return $1
  t = $0
  sub(/^\[ */, "", t)
  sub(/\].*/, "", t)
  return t
}
{
  line = tolower($0)
  if (!match(line, /remaining number of requests [0-9]+/)) next
  n = substr(line, RSTART + 29, RLENGTH - 29) + 0
  i++
  last = n
  if (workers <= 1) { if (n == 0 && drained == "") drained = stamp(); next }
  if (n > 0) {
    w = "?"
    if (match($0, /remaining_rids=\[['"]?[0-9]+_/)) { w = substr($0, RSTART, RLENGTH); sub(/^remaining_rids=\[['"]?/, "", w); sub(/_$/, "", w) }
    count[w] = n; pos[w] = i; live[w] = 1
    next
  }
  best = ""
  for (k in live) if (live[k] && pos[k] < i && (best == "" || pos[k] < pos[best])) best = k
  if (best != "") { live[best] = 0; count[best] = 0 }
  zeros++
  if (zeros >= workers && drained == "") drained = stamp()
}
END {
  if (i == 0) exit
  if (what == "drained") { if (drained != "") print drained; exit }
  if (workers <= 1) { print last; exit }
  if (zeros >= workers) { print 0; exit }
  s = 0
  for (k in live) if (live[k]) s += count[k]
  if (s > 0) print s
}
DFLASH_EOF

# --- components/sglang-service/host/lock.sh ---
# shellcheck shell=bash
# shellcheck disable=SC2154 # $run comes from the rendered header of the script that includes this file
# dflash-sglang: the host lock's functions, shared by the transaction (host/transaction.sh) and
# the benchmark's hold (components/benchmark/handler.ts); included verbatim after their values.
# The lock, its note and the rollout's note and claim are root's alone, a 0700 folder of 0600
# files: anyone who can open the lock can take it, and so keep every deployment off the host or
# hold up a rollback. Created so (umask 077); an older version's 0755 folder and 0644 files
# (and any file in it another hand made) are put right here.
run_dir() {
  (umask 077; mkdir -p "$run") || return 1
  if [ "$(stat -c %u "$run")" != 0 ] || [ -n "$(find "$run" -maxdepth 1 \( ! -user 0 -o -perm /077 \) -print -quit)" ]; then
    chown -R 0:0 "$run" && chmod -R go= "$run"
  fi
}
# The processes that hold $run/host.lock, lowest pid first: those with an open file of it
# that has the flock (/proc/PID/fdinfo/FD lists a lock of the file description, which the
# process that took it shares with the children it passed it to; /proc/locks names only the
# flock(1) that took it, long gone).
lock_holders() {
  local ino f p
  ino=$(stat -c %i "$run/host.lock" 2>/dev/null) || return 0
  grep -lsE "^lock:[[:space:]]+[0-9]+: FLOCK .*:$ino " /proc/[0-9]*/fdinfo/* 2>/dev/null | while read -r f; do
    p=${f#/proc/} p=${p%%/*}
    [ "$(readlink "/proc/$p/fd/${f##*/}" 2>/dev/null)" = "$run/host.lock" ] && echo "$p"
  done | sort -nu
}
# Who holds the host lock, for one that has to wait: the holder's own note (what it deploys)
# when the process that wrote it holds the lock. Otherwise the lock is held by a process that
# is not ours (or whose note is gone): named by its pid, user and command, and the function
# fails. A note of an older version, which names no process, is taken when root holds the lock.
lock_holder() {
  local text="" pid="" holders p cmd
  { IFS= read -r text; read -r _ pid; } 2>/dev/null < "$run/host.lock.note"
  holders=$(lock_holders)
  if [ -z "$holders" ]; then echo "${text:-another deployment}"; return 0; fi
  if [ -n "$pid" ] && grep -qxF -- "$pid" <<< "$holders"; then echo "$text"; return 0; fi
  # The first of them whose parent is not one of them: the one that took it (flock(1), not its command).
  for p in $holders; do grep -qxF -- "$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)" <<< "$holders" || break; done
  if [ -z "$pid" ] && [ -n "$text" ] && [ "$(stat -c %u "/proc/$p")" = 0 ]; then echo "$text"; return 0; fi
  # Its command as text a message can carry: printable characters only, at most 200.
  cmd=$(tr '\0\n' '  ' < "/proc/$p/cmdline" 2>/dev/null | tr -cd '[:print:]' | cut -c1-200)
  echo "pid $p of user $(stat -c %U "/proc/$p" 2>/dev/null || echo unknown) (${cmd% }), which is not a dflash-sglang deployment"
  return 1
}

# --- components/sglang-service/host/generations.sh ---
# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (state, stack, unit, port, every_secret, keep_gens...) come from the rendered header (script.ts renderTransaction)
# dflash-sglang: generations. Every configuration a restart installs on a host is a
# generation, a folder made whole before anything uses it and never changed after (NixOS's
# system-N-link, for one unit):
#   <state>/generations/N/unit.service      the unit as installed
#   <state>/generations/N/helpers/          the unit's helpers (ExecStartPre, ExecStartPost)
#   <state>/generations/N/secrets/          its secret files (0600; the folder 0700): its
#                                           server config, API key headers, token
#   <state>/generations/N/generation.json   number, stack, unit name, port, unit hash, when
#   <state>/generations/N/proved.json       added once, when readiness proves it: what it
#                                           must serve (stack, arguments, model name)
#   <state>/current -> generations/N        what is installed
#   <state>/known-good -> generations/M     the last one readiness proved: a rollback
#                                           installs it whole and makes it current again
# Old ones are pruned: the known-good, the current and the newest $keep_gens stay
# (safety.keepGenerations). `remove` (destroy) removes them all with the unit.
# Part of the transaction (script.ts renderTransaction); the bash tests source it.

# The generation a link (current, known-good) of unit folder $2 (default: $state) points to,
# as its number; fails when there is none.
gen_of() {
  local t s=${2:-$state}
  t=$(readlink "$s/$1" 2>/dev/null) || return 1
  t=${t##*/}
  [[ "$t" =~ ^[0-9]+$ ]] && [ -d "$s/generations/$t" ] && echo "$t"
}
# The folder of the generation a link points to; fails when there is none.
gen_dir() { local n; n=$(gen_of "$1") && echo "$state/generations/$n"; }
# The generations of unit folder $1 (default: $state), newest first.
gen_list() {
  local d
  for d in "${1:-$state}"/generations/*; do
    d=${d##*/}
    [[ "$d" =~ ^[0-9]+$ ]] && echo "$d"
  done | sort -rn
}
# Points link $1 (current, known-good) of unit folder $3 (default: $state) at generation $2,
# whole (a rename over the old link).
set_link() {
  local s=${3:-$state}
  ln -sfn "generations/$2" "$s/$1.dflash-tmp" && mv -Tf "$s/$1.dflash-tmp" "$s/$1"
}

# Makes the next generation from unit file $1, the helpers in folder $2 and the secret files
# named in every_secret, read from $3: a suffix of their live paths ("" for the live files,
# ".dflash-new" for those a restart read from stdin), or a folder (a path) holding them by
# name; a file that is not there is not part of it. JSON fields beyond the header's come as
# "key":value text in $4. Sets made_gen; links nothing.
make_generation() {
  local n d f
  n=$(gen_list | head -n 1)
  n=$(( ${n:-0} + 1 ))
  d="$state/generations/$n"
  rm -rf "$d.dflash-tmp" && (umask 077; mkdir -p "$d.dflash-tmp/secrets" "$d.dflash-tmp/helpers") || return 1
  install -m 0644 "$1" "$d.dflash-tmp/unit.service" || return 1
  for f in "$2"/*; do
    [ -f "$f" ] || continue
    install -m 0755 "$f" "$d.dflash-tmp/helpers/${f##*/}" || return 1
  done
  local src
  for f in "${every_secret[@]}"; do
    case "$3" in /*) src="$3/${f##*/}" ;; *) src="$f$3" ;; esac
    [ -f "$src" ] || continue
    (umask 077; cp -f "$src" "$d.dflash-tmp/secrets/${f##*/}") || return 1
  done
  printf '{"generation":%s,"stack":"%s","unit":"%s","port":%s,"unitHash":"%s","createdAt":"%s"%s}\n' \
    "$n" "$stack" "${unit%.service}" "$port" "$(hash_of "$1")" "$(date -u +%FT%TZ)" "${4:+,$4}" > "$d.dflash-tmp/generation.json" || return 1
  # On disk before it counts (a power cut after the rename must not leave empty files behind
  # a name that says "whole"), and its name with it.
  sync -f "$d.dflash-tmp" && mv "$d.dflash-tmp" "$d" && sync -f "$d" || return 1
  made_gen=$n
}

# Whether generation folders $1 and $2 hold the same configuration: unit and secret files.
gen_same() {
  local f
  [ "$(hash_of "$1/unit.service")" = "$(hash_of "$2/unit.service")" ] || return 1
  for f in "$1"/secrets/* "$2"/secrets/*; do
    [ -e "$f" ] || continue
    cmp -s "$1/secrets/${f##*/}" "$2/secrets/${f##*/}" || return 1
  done
}

# Whether generation folder $1 holds exactly the live unit and secret files.
gen_is_live() {
  local f
  [ -f "$1/unit.service" ] && [ "$(hash_of "$1/unit.service")" = "$(hash_of "$live")" ] || return 1
  for f in "${every_secret[@]}"; do
    if [ -f "$f" ]; then cmp -s "$f" "$1/secrets/${f##*/}" || return 1
    elif [ -e "$1/secrets/${f##*/}" ]; then return 1; fi
  done
}

# Puts generation folder $1's secret files in place (those it lacks are removed): a rollback
# brings the configuration back with its own secrets, not with whatever the failed one left.
install_gen_secrets() {
  local f
  mkdir -p "$secrets_dir" && chmod 0700 "$secrets_dir" || return 1
  for f in "${every_secret[@]}"; do
    if [ -f "$1/secrets/${f##*/}" ]; then (umask 077; cp -f "$1/secrets/${f##*/}" "$f.dflash-tmp") && mv -f "$f.dflash-tmp" "$f" || return 1
    else rm -f "$f"; fi
  done
}

# Removes the generations that are neither the known-good, the current, nor among the newest
# $keep_gens; and any that a step which died left half-made (*.dflash-tmp: they may hold secrets).
prune_generations() {
  local good cur n count=0 d
  good=$(gen_of known-good) cur=$(gen_of current)
  for d in "$state"/generations/*.dflash-tmp; do [ ! -e "$d" ] || rm -rf "$d"; done
  for n in $(gen_list); do
    count=$(( count + 1 ))
    if [ "$count" -gt "$keep_gens" ] && [ "$n" != "${good:-}" ] && [ "$n" != "${cur:-}" ]; then rm -rf "${state:?}/generations/$n"; fi
  done
}

# A known-good record an earlier version of this tool kept (<state>/last-good.service, .json,
# .secrets/) becomes a generation, the known-good, so that an upgraded host rolls back to it;
# the old files go. Nothing when there is none or a known-good generation exists.
adopt_last_good() {
  [ -f "$state/last-good.service" ] || return 0
  if ! gen_of known-good >/dev/null; then
    # Its port is its record's (the configuration it proved), not this restart's.
    local port=$port p
    p=$(sed -nE 's/.*"port":([0-9]+).*/\1/p' "$state/last-good.json" 2>/dev/null) && [ -n "$p" ] && port=$p
    # Its secret files: those kept with it, or, by a version that kept none, the live ones
    # (what it ran with: this runs before a restart installs anything).
    local from=""
    [ ! -d "$state/last-good.secrets" ] || from="$state/last-good.secrets"
    make_generation "$state/last-good.service" "$helper_dir" "$from" '"adoptedFrom":"last-good"' || return 1
    [ ! -f "$state/last-good.json" ] || cp -f "$state/last-good.json" "$state/generations/$made_gen/proved.json" || return 1
    set_link known-good "$made_gen" || return 1
  fi
  rm -rf "$state/last-good.service" "$state/last-good.json" "$state/last-good.secrets"
}

# The unit is renamed $1 on this node (service.unitName changed): the known-good generation
# is carried to the new name's folder as a generation of its own there, its known-good, with
# the lines that name the unit (description, journal identifier, secret files) renamed, so that
# a new configuration that fails rolls back to it rather than leaving the host down. Port,
# arguments and secrets stay its own. A name that already has a known-good keeps its own.
carry_generation() {
  local from to="$state_root/$1" re f n
  from=$(gen_dir known-good) || return 0
  [ -f "$from/proved.json" ] || return 0
  if gen_of known-good "$to" >/dev/null; then return 0; fi
  # The old name as a sed pattern: unit names hold letters, digits, '_', '@', '-' and '.'.
  re=${unit%.service}; re=${re//./[.]}
  n=$(gen_list "$to" | head -n 1)
  n=$(( ${n:-0} + 1 ))
  local d="$to/generations/$n"
  mkdir -p "$to/generations" && rm -rf "$d.dflash-tmp" && (umask 077; mkdir -p "$d.dflash-tmp/secrets") || return 1
  sed -e "s#^Description=SGLang $re (#Description=SGLang $1 (#" -e "s#^SyslogIdentifier=$re\$#SyslogIdentifier=$1#" -e "s#$secrets_dir/${re}[.]#$secrets_dir/$1.#g" "$from/unit.service" > "$d.dflash-tmp/unit.service" &&
    sed -e "s#$secrets_dir/${re}[.]#$secrets_dir/$1.#g" "$from/proved.json" > "$d.dflash-tmp/proved.json" &&
    cp -a "$from/helpers" "$d.dflash-tmp/helpers" || return 1
  for f in "$from/secrets"/*; do
    [ -e "$f" ] || continue
    f=${f##*/}
    (umask 077; cp -f "$from/secrets/$f" "$d.dflash-tmp/secrets/$1.${f#"${unit%.service}".}") || return 1
  done
  # Its record: the new name, the number it had under the old one.
  sed -e "s#^{\"generation\":[0-9]*,#{\"generation\":$n,#" -e "s#\"unit\":\"[^\"]*\"#\"unit\":\"$1\"#" -e "s#}\$#,\"renamedFrom\":\"${unit%.service}\",\"renamedFromGeneration\":$(gen_of known-good)}#" "$from/generation.json" > "$d.dflash-tmp/generation.json" &&
    sed -i "s#\"unitHash\":\"[0-9a-f]*\"#\"unitHash\":\"$(hash_of "$d.dflash-tmp/unit.service")\"#" "$d.dflash-tmp/generation.json" &&
    sync -f "$d.dflash-tmp" && mv "$d.dflash-tmp" "$d" && set_link known-good "$n" "$to" && sync -f "$d" || return 1
  echo "kept the previous configuration ($(known_good)) as the known-good of $1, the unit's new name (its generation $n there): a new configuration that fails rolls back to it"
}

# Removes every generation of the unit folder $1 and its links (a removal: destroy, a rename's end).
remove_generations() { rm -rf "$1/generations" "$1/current" "$1/known-good" "$1/current.dflash-tmp" "$1/known-good.dflash-tmp" "$1/last-good.service" "$1/last-good.json" "$1/last-good.secrets"; }

# A restart's new generation that was never installed (the restart failed before it could be)
# goes when the step ends: every generation on a host is one that was installed.
drop_unused_generation() {
  [ -n "${new_gen:-}" ] && [ "$(gen_of current)" != "$new_gen" ] && rm -rf "${state:?}/generations/$new_gen"
  true
}

# A destroy that finds the unit now another stack's: this stack's generations (by their
# record's stack), secrets included, go, except what runs (current) and the known-good.
drop_stack_generations() {
  local n good cur
  good=$(gen_of known-good) cur=$(gen_of current)
  for n in $(gen_list); do
    if [ "$n" = "${good:-}" ] || [ "$n" = "${cur:-}" ]; then continue; fi
    grep -q "^{\"generation\":$n,\"stack\":\"$stack\"," "$state/generations/$n/generation.json" 2>/dev/null && rm -rf "${state:?}/generations/$n"
  done
  true
}

# --- components/sglang-service/host/transaction.sh ---
# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (label, host, unit, stack, timeouts...) come from the rendered header (script.ts renderTransaction)
# dflash-sglang: the host-side transaction, one per stack and node, staged as
#   <state>/<unit>/stacks/<stack>/transaction.sh
# and run by `pulumi up`, `destroy` and the readiness step:
#   restart HASH [force] | rollback HASH | good HASH | release | prove [TOKEN]
#   | start-when-free HASH | remove [UNIT [MACHINE-ID]]
# The rendered script is a header of values (quoted once, by script.ts hostValues), then
# host/lock.sh, then this file, both copied verbatim. Sourced (the bash tests in
# test/components/sglang-service/host/), it only defines its functions.

# State of one run (not values: the functions below change them).
node0_idle=0
gpus_busy=0
replaced=""

# Every call of systemctl, journalctl and systemd-run here is bounded (timeouts.commandSeconds):
# a wedged systemd or journald fails the step, naming the command, instead of holding `up`
# forever. Functions of the programs' own names, so that no call below can miss its bound;
# `timeout` runs the program itself (it cannot run a function). A call past its bound says so
# on stderr and fails: its answer counts as unknown (running(): still running). The one call
# that waits longer, a rollback's blocking start, has its own bound (start_s). The message goes
# to fd 8, the step's own stderr, even where a caller silences the call's (2>/dev/null).
exec 8>&2
bounded_cmd() {
  timeout -k 5 "$cmd_s" "$@"
  local rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "$label: \`$*\` did not answer within $cmd_s s on $host (timeouts.commandSeconds) and was killed: is systemd wedged there?" >&8; fi
  return "$rc"
}
systemctl() { bounded_cmd systemctl "$@"; }
journalctl() { bounded_cmd journalctl "$@"; }
systemd-run() { bounded_cmd systemd-run "$@"; }

# Every deadline and duration here reads the time since boot (/proc/uptime's first field:
# CLOCK_BOOTTIME, to a hundredth of a second), never the wall clock: an NTP correction or a
# resumed VM steps that by hours (issue 60), which ended a drain at once (an open stream cut, then
# a false "did not exit") or would hold it for hours. The wall clock is only for what a person reads.
now() { local up _; read -r up _ < /proc/uptime && echo "$up"; }
# The same in whole seconds: the claims in $run (rollout, rollout.due), which other processes of
# this host compare. /run is emptied at a reboot, so no claim outlives the boot whose clock it counts.
up_s() { local up; up=$(now) && echo "${up%.*}"; }
# A claim's time T for a person (UTC): seconds since boot, converted at print time; 10 digits and
# more is an older script's epoch seconds (uptime reaches 10^9 s only after 31 years).
claim_time() {
  if [ "${#1}" -ge 10 ]; then date -u -d "@$1" +%FT%TZ
  else date -u -d "@$(( $(date +%s) - ($(up_s) - $1) ))" +%FT%TZ; fi
}
# Whether a claim's time T (as claim_time reads it) is still to come. Not a number: it is not.
claim_lasts() { awk -v t="$1" -v up="$(up_s)" -v wall="$(date +%s)" 'BEGIN { exit !(t + 0 > (t + 0 >= 1e9 ? wall : up)) }'; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
past() { awk -v a="$1" -v b="$(now)" -v s="$2" 'BEGIN { exit !(b - a > s) }'; }
say() { echo "$label: $*"; }
show() { systemctl show "$unit" -p "$1" --value 2>/dev/null; }
# A state that could not be read (systemctl failed or hung) counts as running: never as gone.
running() { local state; state=$(show ActiveState) || return 0; case "$state" in active|activating|reloading|deactivating) return 0 ;; esac; return 1; }
hash_of() { sha256sum "$1" 2>/dev/null | cut -c1-64; }
# "N requests still in flight", from SGLang's own count (null: it logged none).
in_flight() { case "$1" in null|"") echo "what was still in flight (SGLang logged no count)" ;; 1) echo "1 request still in flight" ;; *) echo "$1 requests still in flight" ;; esac; }

# One writer per host: flock(1) on a file in /run, dropped by the kernel if this script
# dies. A stack whose restart is still being proven (the note in $run/rollout) keeps the
# others off the host until it is done or the note expires.
lock() {
  run_dir || { echo "FAILED: could not make $run root's alone (0700) on $host; nothing was changed." >&2; exit 1; }
  # Under umask 077: a lock file that anyone could open, anyone could take.
  local mask started shown=0 holder foreign
  mask=$(umask) && umask 077 && exec 9>>"$run/host.lock" && umask "$mask"
  started=$(now)
  while :; do
    foreign=0
    if flock -n 9; then
      holder=$(rollout_holder)
      [ -z "$holder" ] && break
      flock -u 9
    else
      holder=$(lock_holder) || foreign=1
    fi
    if past "$started" "$lock_wait"; then
      if [ "$foreign" = 1 ]; then echo "FAILED: the deployment lock of $host is held by $holder; waited $lock_wait s for it (safety.lockWaitSeconds). Nothing was changed. It is not a deployment of this tool: end it (or ask whoever started it), then re-run." >&2
      else echo "FAILED: $host is being reconfigured by $holder; waited $lock_wait s for it (safety.lockWaitSeconds). Nothing was changed. Re-run when it is done." >&2; fi
      exit 3
    fi
    if past "$started" "$shown"; then
      say "waiting for $holder to finish with this host ($(since "$started") s of at most $lock_wait s)"
      shown=$(awk -v s="$shown" 'BEGIN { print s + 5 }')
    fi
    sleep 1
  done
  # The note's second line names the process that holds the lock (this script), so that a
  # waiter tells our holder from a process that is not ours (lock_holder).
  umask 077 && printf '%s\npid %s\n' "$(whoami_note)" "$BASHPID" > "$run/host.lock.note"; umask "$mask"
  # The note names the holder while the lock is held; gone with it (a SIGKILLed holder's note
  # stays, but is read only while someone holds the lock, and the next holder replaces it).
  at_exit release_note
  sweep_secret_copies
}
release_note() { rm -f "$run/host.lock.note"; }
# EXIT hooks, run in order (one trap: a second `trap ... EXIT` would replace the first).
exit_hooks=()
at_exit() { exit_hooks+=("$1"); trap 'for h in "${exit_hooks[@]}"; do "$h"; done' EXIT; }
# Says who we are to a stack that has to wait: stack, unit, the operator's address (and SSH
# user, when it came through sudo), since when.
whoami_note() { echo "stack \"$stack\" (unit ${unit%.service}, from ${SSH_CLIENT%% *}${SUDO_USER:+ as $SUDO_USER}, since $(date -u +%FT%TZ))"; }
# Prints who holds the host while their restart is proven (nothing if nobody else does).
# A note counts while its claim ($run/rollout.due: until when) lasts: the restart sets it to
# cover the moments until the readiness step starts, and that step (`prove`, in its own SSH
# session) renews it every few seconds while it proves or rolls back. A note whose claim ran out
# has nobody proving it (its engine was killed): it holds no one off. A note without a claim
# (written by an older version of this script) counts until it expires. Both times are seconds
# since boot (up_s), or an older script's epoch seconds (claim_lasts tells them apart).
rollout_holder() {
  local s u until who due ds du
  [ -f "$run/rollout" ] && read -r s u until who < "$run/rollout" || return 0
  if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then return 0; fi
  # The claim decides when it is this note's (it names the note's stack and unit); a note
  # without one (an older script's, or a claim left by another note) counts until it expires.
  read -r due ds du 2>/dev/null < "$run/rollout.due" || due=""
  if [[ "$due" =~ ^[0-9]+$ ]] && [ "$ds" = "$s" ] && [ "$du" = "$u" ]; then
    if ! claim_lasts "$due"; then
      echo "the restart of stack $s (${u%.service}) on $host has had no one proving it since $(claim_time "$due") (its engine is gone): not waiting for it" >&2
      return 0
    fi
  elif ! claim_lasts "$until"; then
    return 0
  fi
  echo "${who%)}; proving its restart)"
}
# Writes a claim on this stack's note until $1 (seconds since boot: up_s), whole (rename).
claim_until() {
  (umask 077; echo "$1 $stack $unit" > "$run/rollout.due.$$") && mv -f "$run/rollout.due.$$" "$run/rollout.due"
}
# The note that keeps other stacks off while readiness proves this restart, and its first
# claim (written first, each file whole).
begin_rollout() {
  # A restart nobody has proven yet: whatever readiness step proved an earlier one is done with it.
  rm -f "$run/rollout.proved"
  claim_until "$(( $(up_s) + handover_s ))"
  (umask 077; echo "$stack $unit $(( $(up_s) + prove_s )) $(whoami_note)" > "$run/rollout.$$") && mv -f "$run/rollout.$$" "$run/rollout"
}
end_rollout() {
  local s u until
  [ -f "$run/rollout" ] && read -r s u until < "$run/rollout" || return 0
  if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then rm -f "$run/rollout" "$run/rollout.due" "$run/rollout.proved"; fi
}

# SGLang's drain lines (tokenizer_manager.py sigterm_watchdog, every 5 s while it drains, one per
# tokenizer worker), read by host/drain-count.awk:
#   Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=[...].
# tokenizer_workers: the running server's --tokenizer-worker-num (its unit's ExecStart), else 1.
tokenizer_workers() { local n; n=$(show ExecStart | sed -nE 's/.*--tokenizer-worker-num[= ]+([0-9]+).*/\1/p' | head -n 1); echo "${n:-1}"; }
# drain_remaining WORKERS: the requests still in flight by the journal text on stdin, across every
# worker (nothing while unknown).
drain_remaining() { awk -v workers="$1" -v what=count "$drain_count_awk"; }
# drained_time WORKERS: when every worker's count had read 0, from `journalctl -o short-monotonic` text
# on stdin (seconds since boot, the clock of stop_server's t0).
drained_time() { awk -v workers="$1" -v what=drained "$drain_count_awk"; }

# Stops the server the way SGLang expects: SIGTERM is its drain (requests in flight finish;
# then it SIGKILLs itself). Bounded by the drain deadline, after which it is killed.
# Once SGLang has logged a count of 0, its drain is over and nothing can be cut: what
# follows is its own exit (SGLang, v0.5.17 on, waits up to 15 s for its schedulers, its HTTP
# frozen meanwhile, after a poll of up to 5 s), which is not killed at the drain deadline, and
# a kill by systemd's TimeoutStopSec then is no cut (killed stays 0).
# Its deadlines and durations count from t0, seconds since boot (now): a step of the wall clock
# during the drain kills nothing (issue 60). The journal is read from where it stood just before
# `systemctl stop` (its cursor), not from a wall-clock --since, which the same step would move.
# Sets drain_seconds, stop_seconds, killed and cut.
stop_server() {
  drain_seconds=0 stop_seconds=0 killed=0 cut=0
  running || return 0
  local pid inv t0 remaining="" last="" shown=0 line drained_at="" workers cursor sel
  pid=$(show MainPID) inv=$(show InvocationID) t0=$(now) workers=$(tokenizer_workers)
  if [ "$rank" != 0 ] && [ "$1" = drain ] && [ "$node0_idle" = 0 ]; then
    # A further node ends with node 0's old server (its collectives abort); wait for that
    # so node 0 can finish what is in flight, then stop it anyway. Past node 0's own drain
    # deadline and its kill's exit: in a group every node starts here at once (the barrier),
    # so node 0 ends its server (and counts what it cuts) before this node would. When node 0
    # serves nothing (its go says `go idle`), this rank serves nothing either: stopped at once.
    while running && ! past "$t0" "$(( drain_deadline + ${stop_s%.*} ))"; do sleep "$poll"; done
    t0=$(now)
  fi
  # This server's lines (its invocation), after the last one it logged before the stop. The
  # cursor is read with the same matches as the reads: journalctl before v255 skips the first
  # matching line after a cursor whose own line does not match (systemd issue 30288). No cursor
  # (nothing logged yet, or journalctl failed): the invocation's lines whole; SGLang logs its
  # drain counts only after its SIGTERM.
  sel=(-u "$unit" "_SYSTEMD_INVOCATION_ID=$inv")
  cursor=$(journalctl "${sel[@]}" -n 0 --show-cursor -q --no-pager 2>/dev/null | sed -n 's/^-- cursor: //p' | tail -n 1)
  [ -n "$cursor" ] && sel+=(--after-cursor "$cursor")
  systemctl stop --no-block "$unit"
  while running || { [ "$pid" -gt 0 ] && kill -0 "$pid" 2>/dev/null; }; do
    line=$(journalctl "${sel[@]}" -o cat --no-pager 2>/dev/null | drain_remaining "$workers")
    [ -n "$line" ] && remaining=$line
    if [ "$killed" = 0 ] && [ "$remaining" != 0 ] && past "$t0" "$drain_deadline"; then
      killed=1 cut=${remaining:-null}
      say "the drain did not end within $drain_s s (timeouts.drainSeconds); killing the old server, cutting $(in_flight "$remaining")"
      systemctl kill --signal=SIGKILL "$unit"
    fi
    if past "$t0" "$(( drain_deadline + ${stop_s%.*} ))"; then
      echo "FAILED: the server of $label (pid $pid) did not exit within $(( drain_deadline + ${stop_s%.*} )) s of \`systemctl stop\`, even after being killed (timeouts.drainSeconds + timeouts.stopSeconds); check \`systemctl status $unit\`" >&2
      return 1
    fi
    local status="SGLang is draining (SIGTERM sent; it checks every 5 s)"
    [ -n "$remaining" ] && status="SGLang is draining ($(in_flight "$remaining"))"
    [ "$remaining" = 0 ] && status="SGLang is draining (0 requests still in flight): the drain is over, SGLang is ending its processes"
    if [ "$status" != "$last" ] || past "$t0" "$shown"; then
      say "stopping: $status ($(since "$t0") s, deadline $drain_deadline s)"
      last=$status shown=$(awk -v s="$(since "$t0")" 'BEGIN { print s + 5 }')
    fi
    sleep "$poll"
  done
  # In a group, a server that ended during its drain with requests in flight, because another
  # node's rank went away (its collectives aborted), cut them: counted like a kill, so that
  # requestsCut says so and drainPolicy "fail" holds.
  if [ "$killed" = 0 ] && [ "$group_size" -gt 1 ] && [ "$remaining" != 0 ] &&
    journalctl "${sel[@]}" -o cat --no-pager 2>/dev/null | grep -qE 'communicator was aborted|lost node [0-9]|Connection reset by peer'; then
    killed=1 cut=${remaining:-null}
    say "the old server was ended by another node's abort during its drain (its collectives aborted), cutting $(in_flight "$remaining")"
  fi
  # SGLang gave up its own drain (tokenizer_manager.py sigterm_watchdog: "Signal SIGTERM received
  # while health check failed. Force exiting." or "... while force shutdown flag set. ...", lines
  # without a count, often before any count): what its last count held is cut, an unknown
  # number where it logged none.
  local forced
  if [ "$killed" = 0 ] && [ "$remaining" != 0 ] &&
    forced=$(journalctl "${sel[@]}" -o cat --no-pager 2>/dev/null | grep -oE 'Signal SIGTERM received while .* Force exiting\.' | tail -n 1) && [ -n "$forced" ]; then
    killed=1 cut=${remaining:-null}
    case "$forced" in
      *"health check failed"*) say "SGLang gave up its drain (its health check had failed: a stuck scheduler) and exited, cutting $(in_flight "$remaining")" ;;
      *"force shutdown"*) say "SGLang skipped its drain (SGL_FORCE_SHUTDOWN is set in its environment) and exited, cutting $(in_flight "$remaining")" ;;
      *) say "SGLang gave up its drain and exited, cutting $(in_flight "$remaining")" ;;
    esac
  fi
  if [ "$(show Result)" = timeout ] && [ "$killed" = 0 ]; then
    if [ "$remaining" = 0 ]; then
      say "SGLang had drained every request; systemd's stop timeout (TimeoutStopSec) ended its own exit, which cut nothing"
    else
      killed=1 cut=${remaining:-null}
    fi
  fi
  local total
  total=$(since "$t0")
  # The line's time on the kernel's monotonic clock (short-monotonic), against t0 from /proc/uptime
  # (CLOCK_BOOTTIME): the two differ only by the time the host spent suspended since boot, which
  # a GPU server does not; a drain time outside 0..total (such a difference) is clamped.
  drained_at=$(journalctl "${sel[@]}" -o short-monotonic --no-pager 2>/dev/null | drained_time "$workers")
  if [ "$killed" = 0 ] && [ -n "$drained_at" ]; then
    drain_seconds=$(awk -v d="$drained_at" -v a="$t0" -v t="$total" 'BEGIN { x = d - a; if (x < 0) x = 0; if (x > t) x = t; printf "%.1f", x }')
  else
    drain_seconds=$total
  fi
  stop_seconds=$(awk -v t="$total" -v d="$drain_seconds" 'BEGIN { printf "%.1f", t - d }')
}

# Waits until this node's GPUs each use at most gpu_free_mib MiB. Sets gpu_seconds.
wait_gpus() {
  local t0 busy="" last="" shown=0
  # Without its reading (a header that could not be read), nothing is free: busy, never free.
  if [ -z "${gpu_busy_awk:-}" ]; then
    gpus_busy=1
    echo "FAILED: the transaction's GPU reading (gpu_busy_awk) is missing on $host, so no GPU counts as free; run pulumi up again (it stages the transaction anew)." >&2
    return 1
  fi
  t0=$(now)
  while :; do
    # A GPU counts as free only when nvidia-smi lists it with a number at most the limit:
    # an empty or [N/A] cell, a missing GPU or a failing (or hung: killed at cmd_s) nvidia-smi
    # all read as busy (host/gpu-busy.awk).
    busy=$(timeout -k 5 "$cmd_s" nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2>&1 |
      awk -F', *' -v gpus="$gpus" -v max="$gpu_free_mib" "$gpu_busy_awk")
    [ -z "$busy" ] && break
    if past "$t0" "$gpu_s"; then
      gpus_busy=1
      echo "FAILED: GPU memory on $host was not released within $gpu_s s after the old server exited ($busy; timeouts.gpuReleaseSeconds). Find the holder with \`nvidia-smi --query-compute-apps=pid,used_memory --format=csv\`" >&2
      return 1
    fi
    if [ "$busy" != "$last" ] || past "$t0" "$shown"; then
      say "waiting for GPU memory to be released: $busy ($(since "$t0") s, deadline $gpu_s s)"
      last=$busy shown=$(awk -v s="$(since "$t0")" 'BEGIN { print s + 5 }')
    fi
    sleep "$poll"
  done
  gpu_seconds=$(since "$t0")
}

# A group's ranks are started again by systemd when they end by themselves (render.ts,
# Restart=always), and every rank ends when another node's does. While this step stops them (a
# restart after its go, a rollback, a removal), systemd would start an old rank again, to join
# the group's new ones: a runtime drop-in (in /run: a reboot forgets it) holds those restarts
# off from before the barrier until the new unit is installed (install_unit) or the step ends.
hold_dir() { echo "$hold_root/$1.d"; }
hold_restarts() {
  [ "$group_size" -gt 1 ] || return 0
  local u
  at_exit release_holds
  for u in "$@"; do
    [ -n "$u" ] || continue
    mkdir -p "$(hold_dir "$u")" && printf '[Service]
Restart=no
' > "$(hold_dir "$u")/$hold_drop_in" || return 1
  done
  systemctl daemon-reload
}
# Drops the holds of $unit and of the unit a rename replaces; with "reload", reloads systemd when one was there.
drop_holds() {
  local u dropped=1
  for u in "$unit" "${replaced:+$replaced.service}"; do
    if [ -n "$u" ] && [ -e "$(hold_dir "$u")/$hold_drop_in" ]; then
      rm -f "$(hold_dir "$u")/$hold_drop_in"
      rmdir "$(hold_dir "$u")" 2>/dev/null
      dropped=0
    fi
  done
  [ "$dropped" = 0 ] && [ "${1:-}" = reload ] && systemctl daemon-reload
  true
}
release_holds() { drop_holds reload; }

# Installs generation folder $1 (host/generations.sh): its helpers (the unit's ExecStartPre
# and ExecStartPost) and its unit as the live one, and makes it current; without starting it
# (and without a hold on its restarts: hold_restarts). Its secret files are installed apart.
install_unit() {
  drop_holds
  mkdir -p "$helper_dir" && for h in "$1"/helpers/*; do [ ! -f "$h" ] || install -m 0755 "$h" "$helper_dir/${h##*/}" || return 1; done &&
    install -m 0644 "$1/unit.service" "$live.dflash-tmp" && mv -f "$live.dflash-tmp" "$live" &&
    { if ! set_link current "${1##*/}"; then say "could not point $state/current at generation ${1##*/} (the unit is installed; the next proof records what runs)" >&2; fi; } &&
    systemctl daemon-reload && { systemctl enable "$unit" 2>/dev/null; systemctl reset-failed "$unit" 2>/dev/null; true; }
}
# The same, then starts it without waiting (readiness watches it).
install_start() { install_unit "$1" && systemctl start --no-block "$unit"; }

# When the GPUs stay busy past timeouts.gpuReleaseSeconds: the known-good unit is installed
# now and started by a transient systemd service as soon as the GPUs are free (waiting up to
# recover_s), so the host comes back by itself, and never with an out-of-memory start.
recover_when_free() {
  local recover="dflash-recover-${unit%.service}"
  install_unit "$(gen_dir known-good)" || return 1
  systemctl reset-failed "$recover.service" 2>/dev/null
  systemd-run --unit "$recover" --collect --quiet --no-block --description "dflash-sglang: start ${unit%.service} once its GPUs are free" bash "$stage/transaction.sh" start-when-free "$(hash_of "$live")" ||
    return 1
  echo "RECOVERING: the GPUs of $host are still busy, so the previous configuration ($(known_good)) is installed and will start by itself as soon as they are free (waiting up to $recover_s s in $recover.service; follow it with \`journalctl -fu $recover\`). The new configuration was not started." >&2
}

# This stack's secrets, one base64 line per file on stdin (never on a command line), read
# into new files beside the live ones; the live ones change only when installed.
read_secrets() {
  mkdir -p "$secrets_dir" && chmod 0700 "$secrets_dir" || return 1
  local line f
  for f in ${secret_files[@]+"${secret_files[@]}"}; do
    IFS= read -r line && (umask 077; printf '%s' "$line" | base64 -d > "$f.dflash-new") || return 1
  done
}
secrets_changed() {
  local f
  for f in ${secret_files[@]+"${secret_files[@]}"}; do cmp -s "$f.dflash-new" "$f" || return 0; done
  for f in ${absent_secrets[@]+"${absent_secrets[@]}"}; do [ ! -e "$f" ] || return 0; done
  return 1
}
install_secrets() {
  local f
  for f in ${secret_files[@]+"${secret_files[@]}"}; do mv -f "$f.dflash-new" "$f" || return 1; done
  [ "${#absent_secrets[@]}" = 0 ] || rm -f "${absent_secrets[@]}"
}
# What read_secrets left that was not installed (a restart that failed or changed nothing):
# no copy of a secret stays behind.
drop_new_secrets() { local f; for f in "${every_secret[@]}"; do rm -f "$f.dflash-new"; done; }
# Copies of secrets that only a holder of the lock writes (read_secrets, the known-good's
# save and restore), of any unit and any stack: whatever is there when the lock is taken, a
# step that died without its EXIT hook left (SIGKILL, a power cut); this run wrote none yet.
sweep_secret_copies() {
  local f
  for f in "$secrets_dir"/*.dflash-new "$secrets_dir"/*.dflash-tmp "$state_root"/*/last-good.secrets.dflash-tmp "$state_root"/*/generations/*.dflash-tmp; do
    [ -e "$f" ] || continue
    rm -rf "$f" && say "removed $f, a copy of a secret that an interrupted step left" >&2
  done
}
# The secret files of unit NAME that exist, the live ones and any copy of them, one a line.
secret_files_of() {
  local f c
  for f in "${secret_suffixes[@]/#/$secrets_dir/$1}"; do
    for c in "$f" "$f.dflash-new" "$f.dflash-tmp"; do [ ! -e "$c" ] || echo "$c"; done
  done
  [ ! -e "$state_root/$1/last-good.secrets" ] || echo "$state_root/$1/last-good.secrets"
  [ ! -e "$state_root/$1/generations" ] || echo "$state_root/$1/generations"
}
# A removal's last check: no secret file of unit NAME is left (removed now if one is), or it fails naming them.
no_secrets_left() {
  local left f
  left=$(secret_files_of "$1")
  [ -z "$left" ] && return 0
  while IFS= read -r f; do rm -rf "$f"; done <<< "$left"
  # Links to generations that are gone go with them.
  [ -e "$state_root/$1/generations" ] || rm -f "$state_root/$1/current" "$state_root/$1/known-good"
  left=$(secret_files_of "$1")
  [ -z "$left" ] && return 0
  echo "FAILED: could not remove the secret files of $1 on $host: $(paste -sd' ' <<< "$left"); remove them by hand." >&2
  return 1
}

# Removes the secret files of unit NAME (render.ts secretPaths): named, never globbed (a
# unit's name may be another's with a dot and more after it).
rm_secret_files() { rm -f "${secret_suffixes[@]/#/$secrets_dir/$1}"; }

# When $unit was removed, on disk (it must outlive a reboot; REMOVED_DIR in script.ts): a stack
# whose unit this was reads "removed at T" (observe.ts), not the "no unit" of its first install,
# so its next `up` puts its unit back. An older version's mark in /run goes: this one is newer.
mark_removed() {
  mkdir -p "$removed_dir" && date +%s > "$removed_dir/${unit%.service}.dflash-tmp" && mv -f "$removed_dir/${unit%.service}.dflash-tmp" "$removed_dir/${unit%.service}"
  rm -f "$run/removed/${unit%.service}"
}

# The unit a rename of this stack's unit on this machine left serving for this restart to
# replace (remove's marker in $state/replaces), if it is still installed and this stack's.
replaced_unit() {
  local r f
  [ -f "$state/replaces" ] || return 1
  r=$(cat "$state/replaces") f="${live%/*}/$(cat "$state/replaces").service"
  if [ -n "$r" ] && [ "$r.service" != "$unit" ] && [ -f "$f" ] && [ "$(sed -n 's/^X-DFlash-Stack=//p' "$f")" = "$stack" ]; then echo "$r"; return 0; fi
  # The folder is the unit name's, which stacks may share: another stack's marker stays for
  # that stack; only a marker whose unit is gone is dropped.
  if [ -z "$r" ] || [ ! -f "$f" ]; then rm -f "$state/replaces" "$state/replaced.transaction.sh"; fi
  return 1
}

# Drains and stops the server this restart replaces: this unit's, or the one a rename left
# serving, which is then removed (its configuration is this unit's known-good now). Sets what
# stop_server sets.
stop_old() {
  # This unit first, if it runs (another stack's under the same name, or a recovery's).
  stop_server drain || return 1
  [ -n "$replaced" ] || return 0
  local u=$unit l=$label r=0 k=$killed c=$cut
  unit=$replaced.service label="$replaced (stack $stack)"
  stop_server drain || r=1
  # What either drain cut counts.
  [ "$k" = 1 ] && [ "$killed" = 0 ] && killed=1 cut=$c
  if ! running; then
    systemctl disable "$unit" 2>/dev/null
    # Its secrets and generations before its unit file: a cut in between leaves the unit file,
    # by which the next restart still finds this one to remove (replaced_unit).
    rm_secret_files "$replaced"
    remove_generations "$state_root/$replaced"
    rm -rf "$state_root/$replaced/rollbacks" "$state_root/$replaced/group-failed"
    rm -f "${live%/*}/$unit"
    rmdir "$state_root/$replaced" 2>/dev/null
    mark_removed
    systemctl daemon-reload
    systemctl reset-failed "$unit" 2>/dev/null
    rm -f "$state/replaces" "$state/replaced.transaction.sh"
    say "removed $replaced, which ${u%.service} replaces"
  fi
  unit=$u label=$l
  return $r
}

# "NAME (stack S)" of a server of ours other than $unit that is active or starting on this
# node (a unit file that names its stack); fails when there is none.
other_server() {
  local f n
  for f in "${live%/*}"/*.service; do
    n=${f##*/}
    if [ "$n" = "$unit" ] || [ "$n" = "$replaced.service" ] || [ ! -f "$f" ] || ! grep -q '^X-DFlash-Stack=' "$f"; then continue; fi
    case "$(systemctl is-active "$n" 2>/dev/null)" in
    active|activating|reloading) echo "${n%.service} (stack $(sed -n 's/^X-DFlash-Stack=//p' "$f"))"; return 0 ;;
    esac
    # Not running yet, but its recovery waits for the GPUs to start it (recover_when_free).
    case "$(systemctl is-active "dflash-recover-$n" 2>/dev/null)" in
    active|activating) echo "${n%.service} (stack $(sed -n 's/^X-DFlash-Stack=//p' "$f"))"; return 0 ;;
    esac
  done
  return 1
}
other_stack() { local s=${1##*(stack }; echo "${s%)}"; }

# "stack S, unit H" of the last configuration that passed readiness (the known-good generation).
known_good() { local g; g=$(gen_dir known-good); echo "stack $(sed -nE 's/.*"stack":"([^"]*)".*/\1/p' "$g/proved.json" 2>/dev/null), unit $(hash_of "$g/unit.service" | cut -c1-12)"; }

# Back to the last configuration that passed readiness, started without waiting.
restore_known_good() {
  mkdir -p "$state/rollbacks" && echo "$(date -u +%FT%TZ) $1" >> "$state/rollbacks/$1"
  if [ "$rollback_on" != yes ]; then echo "Rollback is off (safety.rollback=false): $label is left as it is; check it now."; return 2; fi
  local good
  if ! good=$(gen_dir known-good); then
    echo "HOST DOWN: $host has no earlier configuration of ${unit%.service} that passed readiness, so there is nothing to roll back to. The failed unit is left as it is (\`systemctl status ${unit%.service}\`); fix the configuration and run \`pulumi up\` again."
    return 2
  fi
  # The configuration that failed: the restart's new generation if it was installed (one that
  # failed before its install never ran: the known-good is started again), or, for readiness's
  # rollback, what is current if it is the unit that failed ($1) and the group's restart did
  # not fail on this node before its install (failed_before_install, from its mark). Refused
  # only when it is the known-good whole, unit and secrets: a change of a secret alone rolls
  # back to the known-good's.
  local failed=""
  if [ -n "${new_gen:-}" ]; then [ "$(gen_of current)" != "$new_gen" ] || failed="$state/generations/$new_gen"
  elif [ "${failed_before_install:-}" != yes ] && failed=$(gen_dir current) && [ "$(hash_of "$failed/unit.service")" = "$1" ]; then :
  else failed=""; fi
  if [ -n "$failed" ] && gen_same "$failed" "$good"; then echo "HOST DOWN: the failed configuration is the last known-good one of ${unit%.service} on $host (generation ${good##*/}); nothing older to restore."; return 2; fi
  say "restoring the previous configuration (generation ${good##*/})"
  systemctl kill --signal=SIGKILL "$unit" 2>/dev/null
  systemctl stop "$unit" 2>/dev/null
  install_gen_secrets "$good" || { echo "ROLLBACK FAILED, HOST DOWN: could not put back the secret files of the previous configuration of ${unit%.service} on $host (in $good/secrets)."; return 2; }
  # GPUs found busy past their deadline already: do not wait for them a second time.
  if [ "$gpus_busy" = 1 ] || ! wait_gpus; then
    recover_when_free || echo "ROLLBACK FAILED, HOST DOWN: the GPUs of $host stayed busy and the previous configuration of ${unit%.service} could not be installed for a start once they are free (disk full? systemd?); nothing serves. Check \`df\` and \`systemctl status\` there, then run \`pulumi up\` again."
    return 3
  fi
  # The old server is stopped by now: a failure to put the previous configuration back (a
  # full disk, a wedged systemd) leaves nothing serving, and says so.
  install_start "$good" || {
    echo "ROLLBACK FAILED, HOST DOWN: could not install and start the previous configuration of ${unit%.service} on $host (disk full? systemd?); nothing serves. Check \`df\` and \`systemctl status ${unit%.service}\` there, then run \`pulumi up\` again."
    return 2
  }
}

# A group's barrier (script.ts GROUP_PREPARE_MARGIN_SECONDS): this node holds its lock and has
# passed its checks; it stops nothing until the provider, which has heard the same from every
# node of the group, node 0 included, sends `go` on stdin. Anything else (`abort`, the end of
# stdin, nothing within barrier_s) ends this restart with nothing stopped, and the lock with it.
# group_phase: where a node of a group is, for the provider to name a node that stalls.
group_phase() { [ "$group_size" -gt 1 ] && echo "@@phase $*"; true; }
# Node 0 says whether it serves (`@@prepared idle` when no old server runs there): the
# further nodes' go then says so (`go idle`), and they do not wait for their ranks to end with
# a server node 0 does not have.
await_go() {
  local word="" rc
  if [ "$rank" = 0 ] && [ "$before_pid" = 0 ]; then echo "@@prepared idle"; else echo "@@prepared"; fi
  say "ready to stop the old server: waiting for every node of the group to be too (at most $barrier_s s)"
  IFS= read -r -t "$barrier_s" word
  rc=$?
  [ "$rc" = 0 ] && [ "$word" = "go idle" ] && node0_idle=1 && return 0
  [ "$rc" = 0 ] && [ "$word" = go ] && return 0
  if [ "$rc" = 0 ]; then echo "FAILED: the group's restart was called off before anything stopped (another node failed or stalled before it was ready to stop; the provider names it); nothing was stopped on $host." >&2
  elif [ "$rc" -gt 128 ]; then echo "FAILED: $label waited $barrier_s s for the group's go and got none (safety.lockWaitSeconds + margins); nothing was stopped on $host. Run \`pulumi up\` again." >&2
  else echo "FAILED: the session that drives the group's restart ended before its go (the engine stopped, or the connection dropped); nothing was stopped on $host. Run \`pulumi up\` again." >&2; fi
  return 1
}

# The group's second barrier (script.ts groupStartWaitSeconds): this node's old rank is
# stopped; its new one starts only once every node's is, when the provider sends `start`.
# Without a word within start_wait_s, or when the provider's session ends, it starts anyway,
# and says so.
await_start() {
  local word="" rc
  echo "@@stopped"
  say "old server stopped: waiting for every node of the group to stop theirs before starting the new one (at most $start_wait_s s)"
  IFS= read -r -t "$start_wait_s" word
  rc=$?
  [ "$rc" = 0 ] && [ "$word" = start ] && return 0
  if [ "$rc" -gt 128 ]; then say "no word from the provider within $start_wait_s s that every node has stopped; starting the new configuration anyway (readiness proves the group)"
  else say "the session that drives the group's restart ended before every node had stopped; starting the new configuration anyway (readiness, or the next \`pulumi up\`, proves the group)"; fi
}

main() {
# Once started, every step finishes even if `pulumi` (and so our SSH session) goes away: no
# step dies on its next line of output, or on the hang-up, half-way (a rollback that has
# stopped the new server, a remove that has stopped the old one). The next `up` or
# `refresh` reads what it left.
trap '' PIPE HUP
case "${1:-}" in
restart)
  want=${2:?usage: restart HASH}
  [ "$(hash_of "$stage/unit.service")" = "$want" ] || { echo "FAILED: the unit staged for stack $stack is not $want (restaged by another run of this stack?); nothing was changed. Run \`pulumi up\` again." >&2; exit 1; }
  group_phase "taking the host lock (safety.lockWaitSeconds = $lock_wait s)"
  lock
  group_phase "checking the node (holding its lock)"
  say "holding $host's lock (on the host, as ${DFLASH_HOST_STEP:-this session}: if this connection drops, the restart goes on here under the lock, and the next \`pulumi up\` proves what it left)"
  replaced=$(replaced_unit) || replaced=""
  before_pid=$(show MainPID)
  # A unit installed but stopped (by hand, or failed) is no first install: said so below.
  had_unit=$(hash_of "$live")
  if [ -n "$replaced" ] && [ "$before_pid" = 0 ]; then
    before_pid=$(systemctl show "$replaced.service" -p MainPID --value 2>/dev/null)
    say "$replaced, which this unit replaces (a rename), still serves: it is this restart's old server"
  fi
  # In a group, the readiness step reads why a node failed from this command's output.
  [ "$group_size" -gt 1 ] && exec 2>&1 8>&1
  rm -f "$state/group-failed"
  at_exit drop_new_secrets
  # Check before you stop: another server of ours on this node holds the GPUs this unit needs
  # (every unit of ours uses the node's GPUs from GPU 0), and it is not the unit this restart
  # replaces. Started beside it, the new unit would wait for GPUs that are never freed.
  if other=$(other_server); then
    echo "FAILED: $other runs on $host and holds the GPUs that ${unit%.service} (stack $stack) needs; nothing was stopped. Remove it first (\`npx pulumi destroy --stack $(other_stack "$other")\`), or give stack $stack the same service.unitName so that \`up\` replaces it." >&2
    # In a group too: it is found before the barrier, so no node has stopped anything.
    exit 1
  fi
  group_phase "reading the secrets from stdin"
  read_secrets || { echo "FAILED: could not read the secret files of $unit from stdin; nothing was stopped." >&2; exit 1; }
  adopt_last_good || { echo "FAILED: could not keep the known-good record of an earlier version of this tool as a generation in $state on $host (disk full?); nothing was stopped." >&2; exit 1; }
  if [ "${3:-}" != force ] && [ "$(hash_of "$live")" = "$want" ] && running && ! secrets_changed; then
    # Already live with these secrets (e.g. a retry, or an upgrade of this tool): nothing to
    # restart; readiness proves it again. (Installing identical secret files changes nothing.)
    install_secrets
    begin_rollout
    echo "@@result {\"applied\":false,\"drainSeconds\":0,\"stopSeconds\":0,\"requestsCut\":0,\"gpuReleaseSeconds\":0,\"previousMainPid\":$before_pid,\"at\":$(now)}"
    say "$host already runs this unit with these secrets (pid $before_pid); nothing to restart"
    exit 0
  fi
  # The new generation, made whole before anything stops (a full disk fails here, not half-way).
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new" || { rm -rf "$state/generations/"*.dflash-tmp; echo "FAILED: could not make the new configuration's generation in $state/generations on $host (disk full?); nothing was stopped." >&2; exit 1; }
  new_gen=$made_gen
  at_exit drop_unused_generation
  if [ "$group_size" -gt 1 ]; then
    hold_restarts "$unit" "${replaced:+$replaced.service}" || { echo "FAILED: could not hold off systemd's restarts of $unit on $host (a runtime drop-in under /run/systemd/system); nothing was stopped." >&2; exit 1; }
    await_go || exit 1
  fi
  if stop_old; then
    if [ "$killed" = 1 ] && [ "$drain_policy" = fail ] && [ "$rank" = 0 ]; then
      echo "FAILED: the drain deadline (timeouts.drainSeconds = $drain_s s) ended the old server, cutting $(in_flight "$cut"); timeouts.drainPolicy is \"fail\", so the new configuration is not started. Retry when traffic is lower, raise timeouts.drainSeconds, or set timeouts.drainPolicy to \"proceed\"." >&2
      failed=1
    else
      [ "$killed" = 1 ] && say "the drain deadline (timeouts.drainSeconds = $drain_s s) ended the old server, cutting $(in_flight "$cut"); timeouts.drainPolicy is \"proceed\": starting the new configuration"
      if [ "$group_size" -gt 1 ]; then await_start; fi
      wait_gpus && install_secrets && install_start "$state/generations/$new_gen" && failed=0 || failed=1
    fi
  else
    failed=1
  fi
  if [ "$failed" = 1 ] && [ "$group_size" -gt 1 ]; then
    # A group restarts as one: this node does not roll back alone (its old rank could not
    # join the others' new ones). It leaves a mark and says @@failed; the readiness step,
    # which runs after every node's restart, puts the whole group back (rollback clears it).
    # Its third word: whether this node installed the new configuration before it failed (the
    # group's rollback then refuses a known-good that is the same configuration, and starts it
    # again otherwise).
    if [ "$(gen_of current)" = "$new_gen" ]; then echo "$want $(date +%s) installed" > "$state/group-failed"
    else echo "$want $(date +%s) before-install" > "$state/group-failed"; fi
    say "FAILED; the group rolls back as one"
    echo "@@failed"
    exit 0
  fi
  if [ "$failed" = 1 ]; then
    if [ "$rollback_on" = yes ]; then say "FAILED; rolling back"; else say "FAILED"; fi
    if restore_known_good "$want"; then
      prune_generations
      # "active" is serving: the unit's ExecStartPost waits for a generation (render.ts).
      if timeout -k 5 "$start_s" systemctl start "$unit"; then echo "Rolled back: the previous configuration ($(known_good)) is back and serving on $host as generation $(gen_of known-good) (\`systemctl status ${unit%.service}\`)." >&2
      else echo "ROLLBACK FAILED, HOST DOWN: the previous configuration of ${unit%.service} on $host did not start again: $(systemctl show "$unit" -p Result --value)." >&2; fi
    fi
    exit 1
  fi
  prune_generations
  # Other stacks stay off this host until readiness has proven (or rolled back) this restart.
  begin_rollout
  # The result for the engine, then the last line, for people (the step's row in `up` shows it).
  # Its "at" is seconds since boot (now), as ready-probe.sh's clock, which readiness compares it
  # with (handlers.ts loadToReady: the main process started by this restart?), so that a step of
  # the wall clock between the two cannot change the answer.
  echo "@@result {\"applied\":true,\"drainSeconds\":$drain_seconds,\"stopSeconds\":$stop_seconds,\"requestsCut\":$cut,\"gpuReleaseSeconds\":$gpu_seconds,\"previousMainPid\":$before_pid,\"at\":$(now)}"
  if [ "$before_pid" = 0 ] && [ -n "$had_unit" ]; then say "no server ran before (${unit%.service} was installed but stopped); GPUs free in $gpu_seconds s; started the new unit"
  elif [ "$before_pid" = 0 ]; then say "no server ran before (a first install); GPUs free in $gpu_seconds s; started the new unit"
  else say "old server (pid $before_pid) drained in $drain_seconds s and gone $stop_seconds s later, GPUs free in $gpu_seconds s; started the new unit"; fi
  ;;
rollback)
  lock
  failed_before_install=no
  # (2>/dev/null first: a redirection applies in order, and a missing mark is the usual case.)
  if read -r _ _ how 2>/dev/null < "$state/group-failed" && [ "$how" = before-install ]; then failed_before_install=yes; fi
  rm -f "$state/group-failed"
  adopt_last_good || echo "$label: could not keep the known-good record of an earlier version of this tool as a generation in $state (disk full?)" >&2
  hold_restarts "$unit" || echo "$label: could not hold off systemd's restarts of $unit (a runtime drop-in under /run/systemd/system); rolling back anyway" >&2
  restore_known_good "${2:?usage: rollback HASH}"
  r=$?
  [ "$r" != 0 ] || prune_generations
  exit "$r"
  ;;
good)
  # The live unit is proven: its generation (the current one, or one made now from what is
  # installed, when an earlier version or a hand installed it) gets its proof record (the
  # note on stdin) and becomes the known-good; old generations are pruned.
  lock
  adopt_last_good || exit 1
  if ! g=$(gen_dir current) || ! gen_is_live "$g"; then
    # No current one that is live (an earlier version installed it, or a hand): the known-good
    # if it is what runs (an adopted record), else one made now from what is installed.
    if g=$(gen_dir known-good) && gen_is_live "$g"; then set_link current "${g##*/}" || exit 1
    else make_generation "$live" "$helper_dir" "" '"madeFrom":"live"' && g="$state/generations/$made_gen" && set_link current "$made_gen" || exit 1; fi
  fi
  (umask 077; cat > "$g/proved.json.dflash-tmp") && mv -f "$g/proved.json.dflash-tmp" "$g/proved.json" &&
    set_link known-good "${g##*/}" || exit 1
  prune_generations
  echo "@@generation ${g##*/}"
  end_rollout
  ;;
release)
  lock
  end_rollout
  ;;
prove)
  # Run in the readiness step's own SSH session (not as a host step): renews this stack's
  # claim on its rollout note every $keeper_beat s while that step proves (or rolls back) the
  # restart, including a note a second restart of this stack writes meanwhile. Ends when the
  # session does (its stdin closes: the engine ended, was killed, or the session dropped), or
  # when the note has gone (ended by `good`, `release` or `remove`) after it was this
  # stack's. Takes no lock; writes nothing but the claim.
  # TOKEN names the readiness step: the first to prove a restart marks the note as taken up
  # ($run/rollout.proved, kept until the next restart or the note's end), so that a later
  # readiness step (TOKEN of its own) of this stack tells a restart its own `up` just made,
  # still to be proven, from one an earlier, killed `up` left, whose unit may have died since
  # (handlers.ts parseNodeState): that one is restarted, not waited for.
  token=${2:-}
  seen=0 told=0
  echo "@@keeping"
  while :; do
    s="" u=""
    if [ -f "$run/rollout" ]; then
      read -r s u _ < "$run/rollout"
      if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then
        seen=1
        claim_until "$(( $(up_s) + keeper_grace ))"
        if [ -n "$token" ] && [ ! -e "$run/rollout.proved" ]; then
          (umask 077; echo "$stack $unit $token" > "$run/rollout.proved.$$") && mv -f "$run/rollout.proved.$$" "$run/rollout.proved"
        fi
      fi
    elif [ "$seen" = 1 ]; then
      break
    fi
    # Once: the note (if any) is taken up and claimed; the readiness step looks only after this.
    if [ "$told" = 0 ]; then echo "@@taken"; told=1; fi
    read -r -t "$keeper_beat" _
    rc=$?
    # A line, or a timeout (over 128): the session is there. The end of its input: it is gone.
    if [ "$rc" != 0 ] && [ "$rc" -le 128 ]; then break; fi
  done
  ;;
start-when-free)
  # Run by recover_when_free as a transient systemd service, not over SSH.
  gpu_s=$recover_s
  wait_gpus || exit 1
  # Under the host's lock: another stack's install cannot land between the check of what is
  # installed and the start.
  lock
  if [ "$(hash_of "$live")" != "${2:?usage: start-when-free HASH}" ]; then echo "$live changed meanwhile; not starting it"; exit 0; fi
  systemctl start --no-block "$unit"
  echo "the GPUs of $host are free: started ${unit%.service} ($(known_good))"
  ;;
remove)
  lock
  # Half of a replacement on this same machine: the known-good record stays the stack's.
  carry=${2:-}
  if [ -n "$carry" ] && [ -n "${3:-}" ] && [ "$3" != "$(cat /etc/machine-id 2>/dev/null)" ]; then carry=""; fi
  installed=$(hash_of "$live")
  marker="" new_state=$state
  if [ -z "$installed" ] && replaced=$(replaced_unit); then
    # A rename whose restart never ran (its engine killed between the two): the unit it
    # replaces still serves, and is this stack's; that is what there is to remove.
    marker="$state/replaces"
    unit=$replaced.service live="${live%/*}/$replaced.service" state="$state_root/$replaced" label="$replaced (stack $stack)"
    installed=$(hash_of "$live")
  fi
  if [ -z "$installed" ]; then
    # Secret files without a unit: a first install cut between its secrets and its unit.
    no_secrets_left "${unit%.service}" || exit 1
    echo "${unit%.service} is not installed on $host; nothing to remove"
    exit 0
  fi
  # Owned by the stack its unit names (after a rollback that may be another stack's).
  owner=$(sed -n 's/^X-DFlash-Stack=//p' "$live")
  if [ "$owner" != "$stack" ]; then
    # This stack's own generations (its secrets with them) go, unless one is what runs or the known-good.
    drop_stack_generations
    echo "${unit%.service} on $host now runs another configuration (stack ${owner:-none}, unit ${installed:0:12}), not this stack's; left the host alone, and removed this stack's other generations"
    exit 0
  fi
  # The same unit on this same machine, now reached by another address or port: nothing
  # moves, so nothing stops here. The restart that follows (under this lock) replaces it, or
  # finds it already running, and a failure rolls back to its known-good; an engine killed
  # between the two leaves it serving, never stopped with nothing started.
  if [ "$carry" = "${unit%.service}" ]; then
    if gen_of known-good >/dev/null; then echo "kept the previous configuration ($(known_good)) as the known-good of ${unit%.service}, now reached by another address or port, and left it running: the restart that follows replaces it"
    else echo "${unit%.service} on $host is now reached by another address or port: left running; the restart that follows replaces it"; fi
    exit 0
  fi
  # Half of a rename on this machine: the known-good record goes to the new unit name, and
  # the old unit goes on serving; the restart of the new name that follows (under this lock)
  # drains, stops and removes it, in the same host step that starts the new one. An engine
  # killed between the two leaves it serving, never nothing.
  if [ -n "$carry" ]; then
    # This script, kept beside the marker: the stage folder it lives in goes with the old
    # presence, and a destroy before the new restart runs it (`remove`) from there. Written
    # before the carried generation, so that whatever a cut leaves there has a marker that
    # leads a destroy to it (host/remove-renames.sh).
    mkdir -p "$state_root/$carry" && cp -f "$0" "$state_root/$carry/replaced.transaction.sh" && echo "${unit%.service}" > "$state_root/$carry/replaces" || exit 1
    if ! adopt_last_good || ! carry_generation "$carry"; then echo "FAILED: could not keep the known-good generation of ${unit%.service} for $carry on $host; nothing was stopped." >&2; exit 1; fi
    end_rollout
    echo "left ${unit%.service} serving on $host: the restart of $carry that follows drains, stops and removes it, in the host step that starts $carry"
    exit 0
  fi
  hold_restarts "$unit" || { echo "FAILED: could not hold off systemd's restarts of $unit on $host (a runtime drop-in under /run/systemd/system); nothing was stopped." >&2; exit 1; }
  stop_server drain || exit 1
  systemctl disable "$unit" 2>/dev/null
  rm -f "$live" "${every_secret[@]}"
  rm_secret_files "${unit%.service}"
  # After an interrupted rename: the new name's copy of the known-good record (its secrets too).
  [ -n "$marker" ] && rm -rf "$marker" "${marker%/*}/replaced.transaction.sh" && remove_generations "$new_state"
  drop_new_secrets
  rm -f "$state/group-failed"
  remove_generations "$state"
  rm -rf "$state/rollbacks"
  no_secrets_left "${unit%.service}" || exit 1
  mark_removed
  rmdir "$secrets_dir" 2>/dev/null
  systemctl daemon-reload
  systemctl reset-failed "$unit" 2>/dev/null
  end_rollout
  echo "${unit%.service} drained, stopped and removed from $host, with its secret files and generations"
  ;;
*)
  echo "usage: $0 restart HASH | rollback HASH | good HASH | release | prove | remove [UNIT [MACHINE-ID]]" >&2
  exit 2
  ;;
esac
}

# Run, unless sourced (the tests source it to check single functions). A step started over
# SSH runs as a transient systemd service (a host step, not part of the login session): its
# stdin, output and exit status are the SSH command's (--pipe --wait), and when the session
# drops (a second Ctrl-C, a CI timeout, a killed engine) the step goes on to its end on the
# host, under the host's lock; the next `pulumi up` or `refresh` reads what it left.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  restart|rollback|good|release|remove)
    if [ -z "${DFLASH_HOST_STEP:-}" ] && type -P systemd-run >/dev/null 2>&1; then
      step_unit="dflash-step-${unit%.service}-$1-$(date +%s%N)"
      # RuntimeMaxSec: a backstop over the step's own bounds (transactionBoundSeconds).
      exec systemd-run --unit "$step_unit" --description "dflash-sglang: $1 of ${unit%.service} for stack $stack" \
        --property=RuntimeMaxSec="$step_max_s" --pipe --wait --collect --quiet --setenv=DFLASH_HOST_STEP="$step_unit" --setenv=SSH_CLIENT="${SSH_CLIENT:-}" --setenv=SUDO_USER="${SUDO_USER:-}" \
        bash "$0" "$@"
    fi
    ;;
  esac
  main "$@"
fi
