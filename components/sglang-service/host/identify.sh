# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, unit_path) come from the rendered header (components/benchmark/handler.ts identify)
# dflash-sglang: which server the benchmark is about to measure (reads only), a line each: its
# main pid, whether systemd has read the unit file as installed, its state, the unit file's
# hash (empty without one), an empty line, then the GPUs' names.
systemctl show -p MainPID --value "$service"
systemctl show -p NeedDaemonReload --value "$service"
echo "$(systemctl show -p ActiveState --value "$service")/$(systemctl show -p SubState --value "$service")"
sha256sum "$unit_path" 2>/dev/null | cut -c1-64
echo
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true
