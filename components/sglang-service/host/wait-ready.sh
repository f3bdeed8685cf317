# shellcheck shell=bash
# usage: wait-ready URL TIMEOUT_SECONDS PID [CURL_HEADER_FILE]   (installed by dflash-sglang)
# Waits until URL answers 200 while PID lives, or fails after TIMEOUT_SECONDS. Polls every
# 0.25 s: SGLang's generation check itself takes at least 1 s once the port is open (its one
# health handler, srt/entrypoints/http_server.py health_generate: a 1-token generation and a
# 1 s sleep), and systemd marks the unit active only when this ends, so a longer pause would
# only delay that.
url=$1 timeout=$2 pid=$3 headers=${4:-}
# Seconds since boot (/proc/uptime), never the wall clock: an NTP correction or a resumed VM
# steps that by hours (issue 60), which would end this wait at once or hold it for hours.
up_s() { local up _; read -r up _ < /proc/uptime && echo "${up%.*}"; }
deadline=$(( $(up_s) + timeout ))
while :; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "server process $pid exited before it was ready" >&2
    exit 1
  fi
  if [ -n "$headers" ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -H "@$headers" "$url" || true)
  else
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 "$url" || true)
  fi
  [ "$code" = 200 ] && exit 0
  if [ "$(up_s)" -ge "$deadline" ]; then
    echo "$url not ready after ${timeout}s (last status $code)" >&2
    exit 1
  fi
  sleep 0.25
done
