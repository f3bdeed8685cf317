# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (socket_unit, socket_path, service_path, agent_dir, command_seconds) come from the rendered header (components/fleet/render.ts renderAgentRemoval)
# dflash-sglang: removes HAProxy's agent check of this stack from the replica (its socket, its
# service and its script), and nothing else. Prints "@@agent removed".
[ "$(id -u)" = 0 ] || { echo "FAILED: the agent's removal runs as root; it runs as $(id -un)"; exit 5; }
timeout -k 2 "$command_seconds" systemctl disable -q --now "$socket_unit" 2>/dev/null
rm -f "$socket_path" "$service_path"
rm -rf "$agent_dir"
timeout -k 2 "$command_seconds" systemctl daemon-reload
timeout -k 2 "$command_seconds" systemctl reset-failed "$socket_unit" 2>/dev/null
echo "@@agent removed"
