# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (action, backend, server, min_healthy, wait_seconds, ...) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: one step of the fleet's rollout on the balancer (host/balancer-api.sh and balancer-servers.sh):
#   show   the backend's servers, a line each (`servers`), or "@@absent" where HAProxy does
#          not answer (not configured yet). Reads only.
#   leave  takes $server out: refused (exit 6, nothing changed) where that would leave fewer
#          than $min_healthy replicas serving, as HAProxy sees them and as each answers a
#          generation itself (/health_generate from here); then `state drain` (no new request
#          goes there) and waits until HAProxy holds no session or queued request for it, at
#          most $wait_seconds (past it, it says so: the server's own drain decides then).
#   rejoin puts $server back (`state ready`) and waits until its health check, a generation,
#          passes (at most $wait_seconds; exit 8 past it: HAProxy sends nothing to a server
#          whose check fails, so it is in the balancer but serves no request).
# Every state change is saved for HAProxy's reload and restart (save_server_state).
line_of() { servers "$backend" | awk -v s="$server" '$1 == s'; }
field() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

case "$action" in
show)
  if ! out=$(servers "$backend"); then echo "@@absent"; exit 0; fi
  printf '%s\n' "$out"
  ;;
leave)
  # One leave at a time on this balancer (maxUnavailable > 1 runs several): the count of the
  # others and the drain are one step, so two replicas cannot each count the other as serving.
  exec 9>"$lock_file" || { echo "FAILED: cannot open $lock_file on $balancer"; exit 1; }
  flock -w "$command_seconds" 9 || { echo "FAILED: another replica's leave held the balancer's lock ($lock_file) for $command_seconds s; nothing was changed"; exit 1; }
  all=$(servers "$backend") || { echo "FAILED: HAProxy on $balancer does not answer on its runtime API ($socket)"; exit 1; }
  mine=$(awk -v s="$server" '$1 == s' <<<"$all")
  [ -n "$mine" ] || { echo "FAILED: HAProxy on $balancer has no server $server in backend $backend"; exit 1; }
  if serving "$mine"; then
    # Leaving costs a serving replica: count the others that serve, both views.
    count=0 names=()
    while read -r name addr _; do
      [ "$name" = "$server" ] && continue
      serving "$(awk -v s="$name" '$1 == s' <<<"$all")" || continue
      if timeout -k 2 "$command_seconds" curl -fsS -o /dev/null -m "$command_seconds" "http://$addr/health_generate"; then
        count=$((count + 1)) names+=("$name")
      fi
    done <<<"$all"
    if [ "$count" -lt "$min_healthy" ]; then
      echo "FAILED: taking $server out of the balancer would leave $count replica(s) serving (${names[*]:-none}), fewer than fleet.minHealthy ($min_healthy); nothing was changed. The servers, as HAProxy on $balancer sees them:"
      printf '%s\n' "$all"
      exit 6
    fi
    echo "@@others serving $count: ${names[*]}"
  fi
  set_state drain || { echo "FAILED: HAProxy on $balancer did not take 'set server $backend/$server state drain'"; exit 1; }
  save_server_state || true
  flock -u 9
  start=$SECONDS
  while :; do
    mine=$(line_of)
    scur=$(field scur "$mine") qcur=$(field qcur "$mine")
    if [ "${scur:-x}" = 0 ] && [ "${qcur:-x}" = 0 ]; then echo "@@left $server $((SECONDS - start))"; exit 0; fi
    if [ $((SECONDS - start)) -ge "$wait_seconds" ]; then
      echo "@@left $server $((SECONDS - start)) open=${scur:-?}+${qcur:-?}"
      exit 0
    fi
    sleep "$poll"
  done
  ;;
rejoin)
  set_state ready || { echo "FAILED: HAProxy on $balancer did not take 'set server $backend/$server state ready'"; exit 1; }
  save_server_state || true
  start=$SECONDS
  while :; do
    mine=$(line_of)
    if serving "$mine"; then echo "@@joined $server $((SECONDS - start))"; exit 0; fi
    if [ $((SECONDS - start)) -ge "$wait_seconds" ]; then
      echo "FAILED: $server is back in the balancer, but its health check (a generation) has not passed in $wait_seconds s: HAProxy sends it nothing. As HAProxy sees it: ${mine:-no such server}"
      exit 8
    fi
    sleep "$poll"
  done
  ;;
*)
  echo "FAILED: unknown balancer step '$action'"; exit 2
  ;;
esac
