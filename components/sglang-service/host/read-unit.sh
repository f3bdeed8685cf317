# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (unit_path, service, state, removed_marks) come from the rendered header (remote/observe.ts readLiveUnit)
# dflash-sglang: the program's first read of a node (preview and up alike; reads only).
# A user that is not root (and sudo that refuses) stops the run here, before anything has
# changed: "@@notroot USER", exit 5. An installed unit: the unit file's time, whether it runs
# (or crashed) and, stopped, since when (each read bounded: no answer is no state, read as running), the
# generations its `current` and `known-good` links name (host/generations.sh; empty where
# there is none), then the unit's text. No unit: the time of its last removal by the transaction (mark_removed),
# where a mark is, and exit 3.
[ "$(id -u)" = 0 ] || { echo "@@notroot $(id -un)"; exit 5; }
if stat -c %Y "$unit_path" 2>/dev/null; then
  # A line each, even when the read fails or is killed (an empty state: unknown).
  active=$(timeout -k 2 10 systemctl is-active "$service")
  # SGLang's crash ends with its main process SIGKILLing itself (a scheduler's exception, then
  # SIGQUIT to the main process and kill_process_tree), which the unit counts as a clean exit
  # (SuccessExitStatus=SIGKILL: how v0.5.19 and older end every drain): "inactive". Its last
  # run's journal tells the crash (a scheduler's exception, or the SIGQUIT line of a run that
  # was never sent SIGTERM) from a stop: "failed".
  if [ "$active" = inactive ] && inv=$(timeout -k 2 10 systemctl show -p InvocationID --value "$service") && [ -n "$inv" ]; then
    journal=$(timeout -k 2 10 journalctl -u "$service" "_SYSTEMD_INVOCATION_ID=$inv" -o cat --no-pager -n 2000 2>/dev/null)
    if grep -q 'Scheduler hit an exception' <<< "$journal" ||
      { grep -qE 'It usually means (one child|the child) failed' <<< "$journal" && ! grep -q 'SIGTERM received' <<< "$journal"; }; then
      active=failed
    fi
  fi
  echo "$active"
  # shellcheck disable=SC2005
  echo "$(timeout -k 2 10 systemctl show -p InactiveEnterTimestamp --value "$service")"
  c=$(readlink "$state/current" 2>/dev/null) k=$(readlink "$state/known-good" 2>/dev/null)
  echo "${c##*/} ${k##*/}"
  cat "$unit_path" && exit 0
fi
for mark in "${removed_marks[@]}"; do cat "$mark" 2>/dev/null && break; done
exit 3
