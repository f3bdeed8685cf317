# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (unit_name, unit_path, config_path, state_dir, lock_file, drain_seconds) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: removes this stack's HAProxy from the balancer host (the fleet left the stack,
# or the stack is destroyed): its requests finish first (soft_stop, at most drain_seconds), then
# its unit, configuration and states go. Nothing else on the host is touched. Prints
# "@@balancer removed SECONDS[ cut]".
[ "$(id -u)" = 0 ] || { echo "FAILED: the balancer step runs as root; it runs as $(id -un)"; exit 5; }
took=$(soft_stop "$unit_name" "$drain_seconds")
timeout -k 2 "$command_seconds" systemctl disable -q "$unit_name" 2>/dev/null
rm -f "$unit_path" "$config_path" "$lock_file"
rm -rf "$state_dir"
timeout -k 2 "$command_seconds" systemctl daemon-reload
timeout -k 2 "$command_seconds" systemctl reset-failed "$unit_name" 2>/dev/null
echo "@@balancer removed ${took:-0}"
