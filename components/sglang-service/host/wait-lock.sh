# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (lock, finish_s) come from the rendered header (remote/handlers.ts applyReady)
# dflash-sglang: waits, bounded, until no host step holds the host's lock: a node whose SSH
# session dropped during a group's restart may still run that restart (its host step goes on
# under the lock); the readiness step reads the node once it has let go, never mid-drain.
# A shared flock is granted once the holder's exclusive one is gone. No lock file: no holder.
[ -e "$lock" ] || exit 0
timeout -k 5 "$finish_s" flock -s "$lock" true
