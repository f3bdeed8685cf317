# shellcheck shell=bash
# usage: wait-ready URL TIMEOUT_SECONDS PID [CURL_HEADER_FILE]   (installed by dflash-sglang)
# Waits until URL answers 200 while PID lives, or fails after TIMEOUT_SECONDS.
url=$1 timeout=$2 pid=$3 headers=${4:-}
deadline=$(( $(date +%s) + timeout ))
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
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "$url not ready after ${timeout}s (last status $code)" >&2
    exit 1
  fi
  sleep 1
done
