# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (config_text, config_path, state_file, socket, ...) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: the fleet's HAProxy on its balancer host: checks that HAProxy (2.6 or later)
# and socat are there, checks the rendered configuration with `haproxy -c` before it replaces
# the one in place, saves the servers' runtime states (a drained replica stays drained), then
# starts HAProxy or reloads it (its running requests finish on the old process), and waits for
# its runtime API. Prints "@@balancer unchanged|reloaded|started VERSION". Refuses (exit 4) a
# host without HAProxy or socat, naming the apt command: it installs nothing.
[ "$(id -u)" = 0 ] || { echo "FAILED: the balancer step runs as root; it runs as $(id -un)"; exit 5; }
for tool in haproxy socat; do
  command -v "$tool" >/dev/null || { echo "FAILED: balancer host $balancer has no $tool: install it (apt-get install haproxy socat) and run up again"; exit 4; }
done
version=$(timeout -k 2 "$command_seconds" haproxy -v 2>/dev/null | sed -n 's/^HAProxy version \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' | head -n1)
read -r major minor <<<"$version"
if [ -z "$version" ] || [ "$major" -lt 2 ] || { [ "$major" = 2 ] && [ "$minor" -lt 6 ]; }; then
  echo "FAILED: balancer host $balancer runs HAProxy ${major:-?}.${minor:-?}; the fleet needs 2.6 or later (Debian bookworm's)"; exit 4
fi
fail() { echo "FAILED: $* on $balancer"; exit 1; }
install -d -m 0755 "$(dirname "$state_file")" || fail "cannot make $(dirname "$state_file")"
tmp=$(mktemp "$config_path.dflash.XXXXXX") || fail "cannot write beside $config_path"
trap 'rm -f "$tmp"' EXIT
{ printf '%s' "$config_text" >"$tmp" && chmod 0644 "$tmp"; } || fail "cannot write $tmp"
if ! check=$(timeout -k 2 "$command_seconds" haproxy -c -q -f "$tmp" 2>&1); then
  echo "FAILED: HAProxy refuses the rendered configuration (nothing was changed on $balancer):"
  printf '%s\n' "$check"
  exit 1
fi
if cmp -s "$tmp" "$config_path" && timeout -k 2 "$command_seconds" systemctl is-active -q haproxy; then
  how=unchanged
else
  save_server_state || true
  mv -f "$tmp" "$config_path" || fail "cannot replace $config_path"
  timeout -k 2 "$command_seconds" systemctl enable -q haproxy || fail "systemctl enable haproxy"
  if timeout -k 2 "$command_seconds" systemctl is-active -q haproxy; then how=reloaded verb=reload; else how=started verb=restart; fi
  if ! timeout -k 2 "$command_seconds" systemctl "$verb" haproxy; then
    echo "FAILED: systemctl $verb haproxy on $balancer:"
    timeout -k 2 "$command_seconds" journalctl -u haproxy -n 15 --no-pager
    exit 1
  fi
fi
# The runtime API answers once the (new) process serves; bounded (each try by command_seconds too).
start=$SECONDS
while [ $((SECONDS - start)) -lt "$command_seconds" ]; do
  api "show info" >/dev/null 2>&1 && { echo "@@balancer $how $major.$minor"; exit 0; }
  sleep 0.25
done
echo "FAILED: HAProxy on $balancer does not answer on its runtime API ($socket) $command_seconds s after its $how"
exit 1
