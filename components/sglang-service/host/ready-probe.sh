# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, port, curl_auth, info_url) come from the rendered header (remote/steps.ts waitReady)
# dflash-sglang: one look of the readiness step at a node (reads only), in sections: the
# unit's state (host/show.sh), who listens on its port, the server's answer on its info
# endpoint (with the stack's API key header file, where it has one), and the host's clock
# (seconds since boot: /proc/uptime, as the restart's @@result "at", host/transaction.sh) with
# how long the main process has run (a load begins when the restart starts the unit, before this
# step begins). A section that cannot be read is empty.

# A process's age in seconds, to a hundredth: when it started, in the kernel's clock ticks
# since boot (/proc/PID/stat, field 22), against /proc/uptime, as ps computes etimes (which it
# gives in whole seconds). Nothing when there is no such process.
main_age() {
  local up tck
  case "${1:-}" in '' | 0 | *[!0-9]*) return 0 ;; esac
  [ -r "/proc/$1/stat" ] || return 0
  read -r up _ < /proc/uptime && tck=$(getconf CLK_TCK) || return 0
  # The command's name (field 2) may hold spaces and ") ": count the fields after its last one.
  sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk -v up="$up" -v tck="$tck" 'NF >= 20 { printf "%.2f", up - $20 / tck }'
}

# Run, unless sourced (the bash tests): `return` succeeds only in a sourced file.
if ! (return 0 2>/dev/null); then
  echo @@section show
  show_unit
  echo @@section listen
  ss -ltnpH 2>/dev/null | grep -F ":$port " || true
  echo @@section info
  curl -s -m 5 -w '\n@@status %{http_code}\n' ${curl_auth[@]+"${curl_auth[@]}"} "$info_url" || true
  echo @@section age
  # A line, even when a read fails: the host's clock and the main process's age, both to a
  # hundredth of a second. The clock is the time since boot, never the wall clock: readiness
  # subtracts the restart's "at" from it (handlers.ts loadToReady), and an NTP step between the
  # two would move one and not the other (issue 60).
  read -r up _ < /proc/uptime || up=""
  echo "$up $(main_age "$(systemctl show -p MainPID --value "$service" 2>/dev/null)")"
fi
