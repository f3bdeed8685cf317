# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (action, backend, server, min_healthy, wait_seconds, ...) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: one step of the fleet's rollout on this stack's HAProxy (host/balancer-api.sh,
# balancer-servers.sh and balancer-listen.sh come first):
#   show   reads only: how this stack's HAProxy stands ("@@instance", "@@config", "@@running",
#          "@@listening", "@@states" (saved), "@@conflict", "@@legacy" lines), which replicas this stack put in
#          ("@@joined NAME") or a rollout took out ("@@left NAME"), then the backend's servers, a
#          line each (`servers`), or "@@absent" where no HAProxy of this stack answers (not
#          configured yet; an earlier version's Debian HAProxy answers for it until `up` migrates).
#   leave  takes $server out: refused (exit 6, nothing changed) where that would leave fewer
#          than $min_healthy replicas serving, as HAProxy sees them and as each answers a
#          generation itself (`generates`: its agent, else /health_generate from here); then
#          marks it as taken out by a rollout (left/NAME), `state drain` (no new request goes
#          there), and waits, at most
#          $wait_seconds, as fleet.drainPolicy says ($halt_on_open): "cut" until HAProxy queues
#          nothing for it ("draining=N": the N requests it still runs end in the server's own
#          drain, which the restart bounds by timeouts.drainSeconds, then cuts and counts);
#          "halt" until HAProxy holds no session or queued request for it. Past the wait "cut"
#          moves on, saying how many are open (the restart cuts them); "halt" puts the replica
#          back as it was (`state ready` where it served before this step), says "@@halted" and
#          exits 9. A replica an operator holds out (`held`) is left as it is ("@@held",
#          operator_states keep).
#   rejoin puts $server back (`state ready`), marks it as put in by this stack (joined/NAME, which
#          holds the unit hash it runs, $unit_hash, or "unknown" after a failed restart, and the time),
#          and waits until its health check, a generation, passes (at most $wait_seconds; exit 8
#          past it: HAProxy sends nothing to a server whose check fails, so it is in the balancer
#          but serves no request). A replica an operator holds out stays out ("@@held").
# Every state change is saved for HAProxy's reload and restart (save_server_state).
line_of() { servers "$backend" | awk -v s="$server" '$1 == s'; }
field() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
# kept_out LINE: whether this step leaves the replica as an operator set it.
kept_out() { [ "$operator_states" = keep ] && held "$1"; }
mark() { mkdir -p "$state_dir/$1" && : >"$state_dir/$1/$server"; }
# generates ADDR: whether the replica at ADDR (HOST:PORT as HAProxy has it, an IPv6 HOST in
# brackets, as socat takes it) generates now. Its agent (host/agent.sh on $agent_port) is asked
# first: "up #answered" is a chat completion with text, in the time of a few tokens; "down" is
# a broken answer. Where the agent says nothing
# definite (none there yet: a replica not rolled since agents came; a 503, a timeout: a plain
# "up"), SGLang's own /health_generate decides (at least 1 s: it sleeps 1 s before it looks).
generates() {
  local host=${1%:*} reply
  reply=$(timeout -k 2 "$command_seconds" socat -t "$command_seconds" -T "$command_seconds" - "TCP:$host:$agent_port" </dev/null 2>/dev/null | head -n 1)
  case "$reply" in
  "up #answered"*) return 0 ;;
  down*) return 1 ;;
  esac
  timeout -k 2 "$command_seconds" curl -fsS -o /dev/null -m "$command_seconds" "http://$1/health_generate"
}

case "$action" in
show)
  echo "@@instance $(timeout -k 2 "$command_seconds" systemctl is-active "$unit_name" 2>/dev/null || true)"
  if [ -f "$config_path" ]; then
    # The hash the file names, where the rest of the file still hashes to it (else: edited by hand).
    named=$(sed -n 's/^    description dflash-sglang config sha256:\([0-9a-f]*\)$/\1/p' "$config_path" | head -n1)
    actual=$(sed 's/^    description dflash-sglang config sha256:[0-9a-f]*$/    description -/' "$config_path" | sha256sum | awk '{ print $1 }')
    if [ -n "$named" ] && [ "$named" = "$actual" ]; then echo "@@config $named"; else echo "@@config edited"; fi
  else
    echo "@@config absent"
  fi
  echo "@@running $(running_hash || echo none)"
  if we_listen; then echo "@@listening yes"; else echo "@@listening no"; fi
  if [ -s "$state_file" ]; then echo "@@states yes"; else echo "@@states no"; fi
  conflicts | sed 's/^/@@conflict /'
  if legacy_ours; then echo "@@legacy $(timeout -k 2 "$command_seconds" systemctl is-active "$legacy_unit" 2>/dev/null || true)"; fi
  # A joined mark holds what the replica ran when this stack last put it in, and when.
  for f in "$state_dir"/joined/* "$state_dir"/left/*; do
    [ -e "$f" ] && echo "@@$(basename "$(dirname "$f")") $(basename "$f")$(head -n1 "$f" | tr -cd '0-9a-zA-Z:. -' | sed 's/^./ &/')"
  done
  if out=$(servers "$backend"); then
    printf '%s\n' "$out"
  elif legacy_ours && out=$(socket=$legacy_socket servers "$backend"); then
    printf '%s\n' "$out"
  else
    echo "@@absent"
  fi
  ;;
leave)
  # One leave at a time on this balancer (maxUnavailable > 1 runs several): the count of the
  # others and the drain are one step, so two replicas cannot each count the other as serving.
  exec 9>"$lock_file" || { echo "FAILED: cannot open $lock_file on $balancer"; exit 1; }
  flock -w "$command_seconds" 9 || { echo "FAILED: another replica's leave held the balancer's lock ($lock_file) for $command_seconds s; nothing was changed"; exit 1; }
  all=$(servers "$backend") || { echo "FAILED: HAProxy on $balancer does not answer on its runtime API ($socket)"; exit 1; }
  mine=$(awk -v s="$server" '$1 == s' <<<"$all")
  [ -n "$mine" ] || { echo "FAILED: HAProxy on $balancer has no server $server in backend $backend"; exit 1; }
  was_serving=0
  if kept_out "$mine"; then
    echo "@@held $server $(field status "$mine")"
  else
    if serving "$mine"; then
      was_serving=1
      # Leaving costs a serving replica: count the others that serve, both views (each asked
      # for a generation, all at once: the leave waits for the slowest, not for their sum).
      count=0 names=() asked=() pids=()
      while read -r name addr _; do
        [ "$name" = "$server" ] && continue
        serving "$(awk -v s="$name" '$1 == s' <<<"$all")" || continue
        generates "$addr" &
        pids+=("$!") asked+=("$name")
      done <<<"$all"
      for k in "${!pids[@]}"; do
        if wait "${pids[$k]}"; then count=$((count + 1)) names+=("${asked[$k]}"); fi
      done
      if [ "$count" -lt "$min_healthy" ]; then
        echo "FAILED: taking $server out of the balancer would leave $count replica(s) serving (${names[*]:-none}), fewer than fleet.minHealthy ($min_healthy); nothing was changed. The servers, as HAProxy on $balancer sees them:"
        printf '%s\n' "$all"
        exit 6
      fi
      echo "@@others serving $count: ${names[*]}"
    fi
    mark left || { echo "FAILED: cannot write $state_dir/left/$server on $balancer"; exit 1; }
    set_state drain || { echo "FAILED: HAProxy on $balancer did not take 'set server $backend/$server state drain'"; exit 1; }
    save_server_state || true
  fi
  flock -u 9
  start=$SECONDS
  while :; do
    mine=$(line_of)
    scur=$(field scur "$mine") qcur=$(field qcur "$mine")
    if [ "${scur:-x}" = 0 ] && [ "${qcur:-x}" = 0 ]; then echo "@@left $server $((SECONDS - start))"; exit 0; fi
    # "cut": once HAProxy queues nothing for it, the requests it still runs are handed to the
    # server's own drain (SGLang's SIGTERM finishes them; the transaction bounds that by
    # timeouts.drainSeconds, then cuts and counts): one wait for them, not two in a row.
    if [ "$halt_on_open" = no ] && [ "${qcur:-x}" = 0 ] && [ -n "$scur" ]; then echo "@@left $server $((SECONDS - start)) draining=$scur"; exit 0; fi
    if [ $((SECONDS - start)) -ge "$wait_seconds" ]; then
      if [ "$halt_on_open" = yes ]; then
        # Back as it was: a replica that served serves again; nothing of it changed.
        if [ "$was_serving" = 1 ]; then
          set_state ready || { echo "FAILED: $server still had ${scur:-?}+${qcur:-?} request(s) open after $wait_seconds s, and HAProxy on $balancer did not take 'set server $backend/$server state ready': it stays drained"; exit 1; }
          rm -f "$state_dir/left/$server"
          save_server_state || true
        fi
        echo "@@halted $server $((SECONDS - start)) open=${scur:-?}+${qcur:-?}"
        exit 9
      fi
      echo "@@left $server $((SECONDS - start)) open=${scur:-?}+${qcur:-?}"
      exit 0
    fi
    sleep "$poll"
  done
  ;;
rejoin)
  mine=$(line_of)
  if [ -n "$mine" ] && kept_out "$mine"; then
    echo "@@held $server $(field status "$mine")"
    exit 0
  fi
  set_state ready || { echo "FAILED: HAProxy on $balancer did not take 'set server $backend/$server state ready'"; exit 1; }
  mark joined && printf '%s %s\n' "${unit_hash:-unknown}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$state_dir/joined/$server" && rm -f "$state_dir/left/$server"
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
