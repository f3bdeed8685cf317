# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (socket_unit, socket_path, service_path, agent_dir, agent_script, socket_text, service_text, listen_host, listen_port, command_seconds) come from the rendered header (components/fleet/render.ts renderAgentInstall)
# dflash-sglang: installs (or updates) HAProxy's agent check on this replica: the agent script,
# a socket unit listening on the replica's address and the agent port, and the service each
# connection runs (host/agent.sh). Then asks it once, from here, and prints "@@agent LINE" (its
# answer: "down #..." is normal while the server loads). Nothing else on the host is touched.
[ "$(id -u)" = 0 ] || { echo "FAILED: the agent's installation runs as root; it runs as $(id -un)"; exit 5; }
mkdir -p "$agent_dir" || { echo "FAILED: cannot create $agent_dir"; exit 1; }
changed=0
put() { # put PATH TEXT: writes the file where it differs
  if [ "$(cat "$1" 2>/dev/null)" != "$2" ]; then
    if ! { printf '%s\n' "$2" >"$1.new" && mv -f "$1.new" "$1"; }; then echo "FAILED: cannot write $1"; exit 1; fi
    changed=1
  fi
}
put "$agent_dir/agent.sh" "$agent_script"
put "$service_path" "$service_text"
put "$socket_path" "$socket_text"
timeout -k 2 "$command_seconds" systemctl daemon-reload
if [ "$changed" = 1 ]; then
  timeout -k 2 "$command_seconds" systemctl enable -q "$socket_unit" && timeout -k 2 "$command_seconds" systemctl restart "$socket_unit"
else
  timeout -k 2 "$command_seconds" systemctl enable -q --now "$socket_unit"
fi || {
  echo "FAILED: the agent's socket $socket_unit did not start on $listen_host:$listen_port. What listens there now (choose a free fleet.loadBalancer.agentPort, or free the port):"
  timeout -k 2 "$command_seconds" ss -ltnpH "sport = :$listen_port" 2>&1 | sed 's/^/  /'
  timeout -k 2 "$command_seconds" systemctl status --no-pager -n 3 "$socket_unit" 2>&1 | tail -n 4
  exit 1
}
# shellcheck disable=SC2016 # the inner script's $0 and $1 are its own arguments
line=$(timeout -k 2 "$command_seconds" bash -c 'exec 3<>"/dev/tcp/$0/$1" && head -n1 <&3' "$listen_host" "$listen_port" 2>&1) || {
  echo "FAILED: the agent on $listen_host:$listen_port did not answer: $line"
  exit 1
}
echo "@@agent $line"
