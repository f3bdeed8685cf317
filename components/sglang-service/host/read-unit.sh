# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (unit_path, service, state, removed_marks) come from the rendered header (remote/observe.ts readLiveUnit)
# dflash-sglang: the program's first read of a node (preview and up alike; reads only).
# A user that is not root (and sudo that refuses) stops the run here, before anything has
# changed: "@@notroot USER", exit 5. An installed unit: the unit file's time, whether it runs
# and, stopped, since when (each read bounded: no answer is no state, read as running), the
# generations its `current` and `known-good` links name (host/generations.sh; empty where
# there is none), then the unit's text. No unit: the time of its last removal by the transaction (mark_removed),
# where a mark is, and exit 3.
[ "$(id -u)" = 0 ] || { echo "@@notroot $(id -un)"; exit 5; }
if stat -c %Y "$unit_path" 2>/dev/null; then
  # A line each, even when the read fails or is killed (an empty state: unknown).
  # shellcheck disable=SC2005
  echo "$(timeout -k 2 10 systemctl is-active "$service")"
  # shellcheck disable=SC2005
  echo "$(timeout -k 2 10 systemctl show -p InactiveEnterTimestamp --value "$service")"
  c=$(readlink "$state/current" 2>/dev/null) k=$(readlink "$state/known-good" 2>/dev/null)
  echo "${c##*/} ${k##*/}"
  cat "$unit_path" && exit 0
fi
for mark in "${removed_marks[@]}"; do cat "$mark" 2>/dev/null && break; done
exit 3
