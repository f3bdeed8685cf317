# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (listen_address, listen_port, unit_name, config_dir, config_path, legacy_*) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: who listens where this stack's HAProxy listens. HAProxy binds with
# SO_REUSEPORT, so a second HAProxy on the same address and port would not fail: it would take
# a share of the connections. Every start and reload is preceded by `conflicts` (nothing else
# may listen there, nor be configured to) and followed by `we_listen`.

# bare ADDRESS: an address as ss and HAProxy's bind lines write it, without brackets, zone or port.
bare() {
  local a=${1%:*}
  a=${a#[}
  a=${a%]}
  printf '%s\n' "${a%%%*}"
}

# overlaps A B: whether addresses A and B (bare) take connections for the same address: the
# same one, or either a wildcard.
overlaps() {
  case "$1" in 0.0.0.0 | '*' | '::' | '') return 0 ;; esac
  case "$2" in 0.0.0.0 | '*' | '::' | '') return 0 ;; esac
  [ "$1" = "$2" ] || [ "$1" = "::ffff:$2" ] || [ "$2" = "::ffff:$1" ]
}

# unit_of PID: the systemd unit PID runs in (its cgroup), or "-".
unit_of() {
  local u
  u=$(sed -n 's|^0::.*/\([^/]*\.service\)$|\1|p' "/proc/$1/cgroup" 2>/dev/null | head -n1)
  printf '%s\n' "${u:--}"
}

# holders: one line per process listening on an address that overlaps ours, on our port:
#   ADDRESS:PORT UNIT COMMAND PID   (UNIT, COMMAND and PID "-" where this host cannot name them)
holders() {
  local line local_addr users pid comm
  while read -r line; do
    [ -n "$line" ] || continue
    local_addr=$(awk '{ print $4 }' <<<"$line")
    overlaps "$(bare "$local_addr")" "$listen_address" || continue
    users=$(grep -o 'users:(.*)' <<<"$line")
    if [ -z "$users" ]; then
      echo "$local_addr - - -"
      continue
    fi
    while read -r comm pid; do
      [ -n "$pid" ] && echo "$local_addr $(unit_of "$pid") $comm $pid"
    done < <(grep -o '("[^"]*",pid=[0-9]*' <<<"$users" | sed 's/^("\([^"]*\)",pid=\([0-9]*\)$/\1 \2/' | sort -u)
  done < <(timeout -k 2 "$command_seconds" ss -ltnpH "sport = :$listen_port" 2>/dev/null)
}

# legacy_ours: whether Debian's haproxy.cfg is the one an earlier version of this tool wrote
# for this stack (`up` migrates from it: host/balancer.sh).
legacy_ours() {
  [ -f "$legacy_config" ] && [ "$(head -c ${#legacy_head} "$legacy_config")" = "$legacy_head" ]
}

# conflicts: in words, a line each, what else listens on our address and port, or is configured
# to (another stack's HAProxy configuration in $config_dir); nothing when the place is ours.
# Debian's HAProxy running the configuration an earlier version wrote for this stack is ours.
conflicts() {
  local addr unit comm pid who other file bind
  while read -r addr unit comm pid; do
    [ "$unit" = "$unit_name" ] && continue
    if [ "$unit" = "$legacy_unit" ] && legacy_ours; then continue; fi
    case "$unit" in
    dflash-balancer-*.service) other=${unit#dflash-balancer-} who="the HAProxy of the fleet of stack ${other%.service} ($unit, $comm pid $pid)" ;;
    -) if [ "$comm" = - ]; then who="a process this host does not name (another network namespace, or ss without root)"; else who="$comm pid $pid"; fi ;;
    *) who="$comm pid $pid of $unit" ;;
    esac
    echo "$addr is taken by $who"
  done < <(holders)
  for file in "$config_dir"/*.cfg; do
    if [ ! -f "$file" ] || [ "$file" = "$config_path" ]; then continue; fi
    while read -r bind; do
      [ "${bind##*:}" = "$listen_port" ] || continue
      overlaps "$(bare "$bind")" "$listen_address" || continue
      other=$(basename "$file" .cfg)
      echo "$bind is configured for the HAProxy of the fleet of stack $other ($file)"
    done < <(awk '$1 == "bind" { print $2 }' "$file")
  done
}

# we_listen: whether this stack's HAProxy (a process of $unit_name) listens on our address and port.
we_listen() {
  holders | awk -v u="$unit_name" '$2 == u { found = 1 } END { exit !found }'
}
