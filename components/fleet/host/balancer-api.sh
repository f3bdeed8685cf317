# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (socket, state_file, state_dir, command_seconds) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: HAProxy's runtime API (the admin socket of this stack's own HAProxy), as the
# fleet's steps use it. Every call is bounded (command_seconds): a wedged HAProxy answers "no
# answer", never hangs.

# api_at SOCKET COMMAND: one runtime API command on SOCKET; its answer on stdout; status 1 when
# HAProxy did not answer.
api_at() {
  [ -S "$1" ] || return 1
  printf '%s\n' "$2" | timeout -k 2 "$command_seconds" socat -t "$command_seconds" - "UNIX-CONNECT:$1"
}

# api COMMAND: one runtime API command on this stack's HAProxy.
api() { api_at "$socket" "$1"; }

# save_server_state: the servers' runtime states (drain, ready) in HAProxy's server-state-file,
# which a reload or a restart (a reboot of the balancer host) reads back
# (load-server-state-from-file): a replica drained or put back by a step stays so.
save_server_state() {
  local out
  out=$(api "show servers state") || return 1
  mkdir -p "$state_dir" && printf '%s\n' "$out" >"$state_file.tmp.$$" && mv -f "$state_file.tmp.$$" "$state_file"
}

# running_hash: the hash in the `description` of the configuration the running worker loaded
# (components/fleet/render.ts balancerDescription); status 1 when HAProxy did not answer.
running_hash() {
  local out
  out=$(api "show info") || return 1
  sed -n 's/^description: dflash-sglang config sha256:\([0-9a-f]*\)$/\1/p' <<<"$out"
}

# not_gone UNIT: whether UNIT's process still runs. A soft-stopped HAProxy tells systemd it is
# stopping (sd_notify STOPPING=1): "deactivating", is-active's non-zero answer, while its worker
# finishes its requests.
not_gone() {
  case "$(timeout -k 2 "$command_seconds" systemctl is-active "$1" 2>/dev/null)" in
  active | reloading | deactivating) return 0 ;;
  *) return 1 ;;
  esac
}

# soft_stop UNIT SECONDS: stops UNIT's HAProxy the gentle way: SIGUSR1 to its master (it closes
# its listeners and exits once its requests are done), at most SECONDS, then `systemctl stop`
# (what is still open is cut). Restart=always is held off meanwhile by a runtime drop-in.
# Prints how many seconds it took, and "cut" where it had to stop it.
soft_stop() {
  local unit=$1 seconds=$2 dropin="/run/systemd/system/$1.d" start=$SECONDS how=""
  timeout -k 2 "$command_seconds" systemctl is-active -q "$unit" || return 0
  mkdir -p "$dropin" && printf '[Service]\nRestart=no\n' >"$dropin/dflash-sglang-stop.conf"
  timeout -k 2 "$command_seconds" systemctl daemon-reload
  timeout -k 2 "$command_seconds" systemctl kill -s SIGUSR1 --kill-whom=main "$unit"
  while not_gone "$unit"; do
    if [ $((SECONDS - start)) -ge "$seconds" ]; then
      timeout -k 2 "$command_seconds" systemctl stop "$unit"
      how=" cut"
      break
    fi
    sleep 0.2
  done
  rm -f "$dropin/dflash-sglang-stop.conf"
  rmdir "$dropin" 2>/dev/null
  timeout -k 2 "$command_seconds" systemctl daemon-reload
  echo "$((SECONDS - start))$how"
}
