#!/usr/bin/env bash
# usage: bash bench/cpu-by-command.sh COMMAND [ARG...]
# Runs COMMAND (e.g. `bash .ci/run`, the whole `npm test`) under the kernel's process accounting
# and prints, after it, the CPU seconds of every process of this machine that ended meanwhile
# (run it with nothing else running), summed by command
# name (the simulated hosts' processes included: accounting covers every PID namespace), the
# largest first. Needs root and the accounting tools (Debian: apt-get install acct). A process
# still running when COMMAND ends is not counted; one that renamed itself (a thread name such
# as DelayedTaskSche is a Node.js process) is counted under its last name.
# bench/results/test-time.md shows what it found.
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: bash bench/cpu-by-command.sh COMMAND [ARG...]" >&2
  exit 2
fi
for tool in accton lastcomm; do
  command -v "$tool" >/dev/null || { echo "cpu-by-command: $tool not found: install the accounting tools (Debian: apt-get install acct)" >&2; exit 2; }
done
file=$(mktemp /tmp/dflash-acct.XXXXXX)
accton "$file" >/dev/null
stopped=0
stop() { [ "$stopped" = 1 ] || { accton off >/dev/null; stopped=1; }; }
trap 'stop; rm -f "$file"' EXIT
status=0
"$@" || status=$?
stop
# lastcomm: command, flags, user, tty, then "<cpu> secs" and the start time.
lastcomm --file "$file" | awk '
  { for (i = 2; i < NF; i++) if ($(i + 1) == "secs") { cpu[$1] += $i; n[$1]++; total += $i; break } }
  END {
    printf "%-18s %8s %9s %6s\n", "command", "processes", "cpu s", "share"
    for (c in cpu) printf "%-18s %8d %9.1f %5.1f%%\n", c, n[c], cpu[c], 100 * cpu[c] / total | "sort -k3 -rn | head -20"
    close("sort -k3 -rn | head -20")
    printf "%-18s %8s %9.1f\n", "all", "", total
  }' >&2
exit "$status"
