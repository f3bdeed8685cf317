# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (socket, state_file, command_seconds) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: HAProxy's runtime API (the admin socket), as the fleet's steps use it.
# Every call is bounded (command_seconds): a wedged HAProxy answers "no answer", never hangs.

# api COMMAND: one runtime API command; its answer on stdout; status 1 when HAProxy did not answer.
api() {
  [ -S "$socket" ] || return 1
  printf '%s\n' "$1" | timeout -k 2 "$command_seconds" socat -t "$command_seconds" - "UNIX-CONNECT:$socket"
}

# save_server_state: the servers' runtime states (drain, ready) in HAProxy's server-state-file,
# which a reload or a restart (a reboot of the balancer host) reads back
# (load-server-state-from-file): a replica drained or put back by a step stays so.
save_server_state() {
  local out
  out=$(api "show servers state") || return 1
  printf '%s\n' "$out" >"$state_file.tmp.$$" && mv -f "$state_file.tmp.$$" "$state_file"
}

