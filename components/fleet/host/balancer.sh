# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (config_text, unit_text, config_path, unit_path, unit_name, ...) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: this stack's own HAProxy on the balancer host, a unit of its own
# ($unit_name); nothing else on the host is written. In order:
#   1. checks that HAProxy (2.6 or later), socat and ss are there, and the rendered configuration
#      with `haproxy -c`;
#   2. refuses (exit 7, nothing changed) where anything else listens on the stack's address and
#      port, or another stack's HAProxy is configured to (HAProxy binds with SO_REUSEPORT: a
#      second one would take a share of the clients, not fail);
#   3. keeps the servers' runtime states (drained, ready) across the change, dropping those of
#      servers that moved or left (HAProxy would restore a saved address over the new one);
#   4. starts or reloads the unit (a reload lets the old worker finish its requests), then
#      waits until the running worker says it loaded this configuration and listens where the
#      stack says; else it puts the previous files back and fails (the previous worker, where
#      there was one, keeps serving);
#   5. where Debian's haproxy.service ran the configuration an earlier version of this tool
#      wrote for this stack, takes over from it: its states and the replicas it had in, then
#      stops it gently once ours listens beside it (SO_REUSEPORT), and disables it.
# Prints "@@balancer unchanged|reloaded|started VERSION" (and "@@migrated ..."). Refuses
# (exit 4) a host without HAProxy, socat or ss, naming the apt command: it installs nothing.
[ "$(id -u)" = 0 ] || { echo "FAILED: the balancer step runs as root; it runs as $(id -un)"; exit 5; }
for tool in socat ss; do
  command -v "$tool" >/dev/null || { echo "FAILED: balancer host $balancer has no $tool: install it (apt-get install haproxy socat iproute2) and run up again"; exit 4; }
done
[ -x /usr/sbin/haproxy ] || { echo "FAILED: balancer host $balancer has no /usr/sbin/haproxy: install it (apt-get install haproxy socat) and run up again"; exit 4; }
version=$(timeout -k 2 "$command_seconds" /usr/sbin/haproxy -v 2>/dev/null | sed -n 's/^HAProxy version \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' | head -n1)
read -r major minor <<<"$version"
if [ -z "$version" ] || [ "$major" -lt 2 ] || { [ "$major" = 2 ] && [ "$minor" -lt 6 ]; }; then
  echo "FAILED: balancer host $balancer runs HAProxy ${major:-?}.${minor:-?}; the fleet needs 2.6 or later (Debian bookworm's)"; exit 4
fi
fail() { echo "FAILED: $* on $balancer"; exit 1; }
sc() { timeout -k 2 "$command_seconds" systemctl "$@"; }
install -d -m 0755 "$config_dir" "$state_dir" "$state_dir/joined" "$state_dir/left" || fail "cannot make $config_dir and $state_dir"
tmp=$(mktemp "$config_path.new.XXXXXX") || fail "cannot write beside $config_path"
unit_tmp=$(mktemp "$unit_path.new.XXXXXX") || { rm -f "$tmp"; fail "cannot write beside $unit_path"; }
trap 'rm -f "$tmp" "$unit_tmp" "$config_path.prev.$$" "$unit_path.prev.$$"' EXIT
{ printf '%s' "$config_text" >"$tmp" && printf '%s' "$unit_text" >"$unit_tmp" && chmod 0644 "$tmp" "$unit_tmp"; } || fail "cannot write $tmp"
if ! check=$(timeout -k 2 "$command_seconds" /usr/sbin/haproxy -c -q -f "$tmp" 2>&1); then
  echo "FAILED: HAProxy refuses the rendered configuration (nothing was changed on $balancer):"
  printf '%s\n' "$check"
  exit 1
fi
taken=$(conflicts)
if [ -n "$taken" ]; then
  echo "FAILED: stack $stack's balancer cannot listen on $listen_address:$listen_port on $balancer, nothing was changed there:"
  printf '  %s\n' "$taken"
  echo "Choose another fleet.loadBalancer.port (or listenAddress) for stack $stack, or free that port, then run up again."
  exit 7
fi
migrate=no
if legacy_ours && sc is-active -q "$legacy_unit"; then migrate=yes; fi

# keep_states FILE: FILE (a `show servers state` dump) with only the servers the new
# configuration has, on the same port (a server's name is its host's address: render.ts), each marked as configured `disabled` (admin
# bit 4), as the new configuration has them all: HAProxy then restores what was set at run time.
keep_states() {
  awk -v be="$backend" '
    FNR == 1 { file++ }
    file == 1 && $1 == "server" { p = $3; sub(/.*:/, "", p); port[$2] = p; next }
    file == 1 { next }
    FNR <= 2 { print; next }
    $2 == be && ($4 in port) && $19 == port[$4] { if (int($7 / 4) % 2 == 0) $7 += 4; print }
  ' "$tmp" "$1"
}

if cmp -s "$tmp" "$config_path" && cmp -s "$unit_tmp" "$unit_path" && sc is-active -q "$unit_name" && [ "$(running_hash)" = "$config_hash" ] && we_listen && [ "$migrate" = no ]; then
  echo "@@balancer unchanged $major.$minor"
  exit 0
fi

# The servers' states, for the new configuration: this HAProxy's own, or the one it takes over from.
if sc is-active -q "$unit_name"; then
  save_server_state || true
elif [ "$migrate" = yes ]; then
  if legacy=$(api_at "$legacy_socket" "show servers state $backend"); then
    printf '%s\n' "$legacy" >"$state_file"
    # The replicas Debian's HAProxy had in were put there by this stack: in, or out where a
    # rollout left them draining (a replica in maintenance there was held by hand).
    while read -r _ be _ name _ _ admin _; do
      [ "$be" = "$backend" ] || continue
      : >"$state_dir/joined/$name"
      [ $((admin & 24)) = 0 ] || : >"$state_dir/left/$name"
    done < <(grep -v '^#' <<<"$legacy" | awk 'NF >= 19')
  fi
fi
if [ -f "$state_file" ]; then
  keep_states "$state_file" >"$state_file.kept" && mv -f "$state_file.kept" "$state_file"
fi
# The marks of replicas the new configuration no longer has: one added back later is new again
# (it waits to join), not an operator's hold.
servers_now=" $(awk '$1 == "server" { printf "%s ", $2 }' "$tmp")"
for mark in "$state_dir"/joined/* "$state_dir"/left/*; do
  [ -e "$mark" ] || continue
  [[ "$servers_now" == *" $(basename "$mark") "* ]] || rm -f "$mark"
done

had_config=no had_unit=no
[ -f "$config_path" ] && cp -p "$config_path" "$config_path.prev.$$" && had_config=yes
[ -f "$unit_path" ] && cp -p "$unit_path" "$unit_path.prev.$$" && had_unit=yes
mv -f "$tmp" "$config_path" || fail "cannot replace $config_path"
unit_changed=no
if ! cmp -s "$unit_tmp" "$unit_path"; then
  mv -f "$unit_tmp" "$unit_path" || fail "cannot replace $unit_path"
  unit_changed=yes
fi
[ "$unit_changed" = no ] || sc daemon-reload || fail "systemctl daemon-reload"
sc enable -q "$unit_name" || fail "systemctl enable $unit_name"
if sc is-active -q "$unit_name"; then how=reloaded verb=reload; else how=started verb=restart; fi
sc "$verb" "$unit_name"
# Loaded and listening: the running worker's description names this configuration, and a
# process of this unit listens on the stack's address and port. Bounded (each call too).
start=$SECONDS
ok=no
while [ $((SECONDS - start)) -lt "$command_seconds" ]; do
  if [ "$(running_hash)" = "$config_hash" ] && we_listen; then ok=yes; break; fi
  sleep 0.2
done
if [ "$ok" = no ]; then
  listens=no
  if we_listen; then listens=yes; fi
  echo "FAILED: $unit_name on $balancer did not take the new configuration within $command_seconds s (systemctl $verb; the running worker's configuration: $(running_hash || echo none), this one's $config_hash; listening on $listen_address:$listen_port: $listens)."
  # The previous files back: what runs (the previous worker, where a reload failed) and what a restart loads agree.
  if [ "$had_config" = yes ]; then mv -f "$config_path.prev.$$" "$config_path"; else rm -f "$config_path"; fi
  if [ "$had_unit" = yes ]; then mv -f "$unit_path.prev.$$" "$unit_path"; else sc disable -q "$unit_name"; rm -f "$unit_path"; fi
  sc daemon-reload
  if [ "$how" = reloaded ]; then
    echo "The previous configuration keeps serving."
  else
    sc stop "$unit_name"
    echo "It was not running before and is stopped."
  fi
  echo "Its journal:"
  timeout -k 2 "$command_seconds" journalctl -u "$unit_name" -n 15 --no-pager
  exit 1
fi
if [ "$migrate" = yes ]; then
  took=$(soft_stop "$legacy_unit" "$drain_seconds")
  sc disable -q "$legacy_unit"
  mv -f "$legacy_config" "$legacy_config.dflash-sglang-$stack" || true
  echo "@@migrated $legacy_unit ${took:-0}"
fi
echo "@@balancer $how $major.$minor"
