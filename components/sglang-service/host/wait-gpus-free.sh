# shellcheck shell=bash
# shellcheck disable=SC2154 # $gpu_busy_awk comes from the rendered header (render.ts helperScripts)
# usage: wait-gpus-free GPU_LIST MAX_USED_MIB TIMEOUT_SECONDS [READ_SECONDS]   (installed by dflash-sglang)
# The unit's ExecStartPre: waits until the GPUs (a comma list) each use at most MAX_USED_MIB,
# or fails after TIMEOUT_SECONDS. Each nvidia-smi read is bounded (READ_SECONDS, default 30):
# a hung driver reads as busy (host/gpu-busy.awk), and the wait ends at its deadline.
gpus=$1 max=$2 timeout=$3 read_s=${4:-30}
# Without its reading (a header that could not be read), nothing is free: fail, never pass.
[ -n "${gpu_busy_awk:-}" ] || { echo "wait-gpus-free: its GPU reading (gpu_busy_awk) is missing; reinstall it with pulumi up" >&2; exit 1; }
# Seconds since boot (/proc/uptime), never the wall clock: an NTP correction or a resumed VM
# steps that by hours (issue 60), which would end this wait at once or hold it for hours.
up_s() { local up _; read -r up _ < /proc/uptime && echo "${up%.*}"; }
deadline=$(( $(up_s) + timeout ))
while :; do
  busy=$(timeout -k 5 "$read_s" nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2>&1 |
    awk -F', *' -v gpus="$gpus" -v max="$max" "$gpu_busy_awk")
  [ -z "$busy" ] && exit 0
  if [ "$(up_s)" -ge "$deadline" ]; then
    echo "GPU memory still in use after ${timeout}s: $busy" >&2
    exit 1
  fi
  sleep 1
done
