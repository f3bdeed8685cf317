# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (run, note, wait_s, hold_s) come from the rendered header (components/benchmark/handler.ts holdHost)
# dflash-sglang: hold the host's deployment lock (the one every stack's restart takes) while a
# benchmark runs, so that no stack restarts the server under it. Says HELD once held, or
# "BUSY <holder>" and exits 3 after wait_s; the hold ends when stdin closes (the benchmark's
# connection) or after hold_s. Follows host/lock.sh, whose functions it uses.
umask 077
run_dir && exec 9>>"$run/host.lock" || exit 4
if ! flock -w "$wait_s" 9; then echo "BUSY $(lock_holder)"; exit 3; fi
# Its second line names the process that holds the lock, as the transaction's does.
printf '%s (since %s)\npid %s\n' "$note" "$(date -u +%FT%TZ)" "$BASHPID" > "$run/host.lock.note"
echo HELD
timeout "$hold_s" cat >/dev/null
rm -f "$run/host.lock.note"
