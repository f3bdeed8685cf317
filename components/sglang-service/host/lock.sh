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
