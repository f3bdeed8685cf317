# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (label, host, python, flags, paths, gpus, run_as...) come from the rendered header (script.ts preflightValues)
# dflash-sglang: the preflight checks (reads only), shared by the stand-alone preflight
# (host/preflight.sh) and the staging script (host/stage.sh): the host's SGLang accepts every
# flag, the paths exist, the folders it writes can be written, the node has the GPUs, and a server that runs as another user can
# use what it needs. Exits 1, naming every problem, if the host cannot run the configuration.
#
# Values: label host python help_s cmd_s; flags (the launch flags), flag_canonicals (for a
# hidden alias: the flag it stands for; '' otherwise), flag_olders (a hidden older spelling
# of the flag; '' otherwise) and flag_sources (model.extraArgs: only model.extraArgs names the
# flag; '' for a flag the tool derives itself), index by index; closest_awk (host/closest.awk);
# paths and path_whats, index by index; gpus (a comma list), gpu_count, gpus_chosen (yes: chosen
# by CUDA_VISIBLE_DEVICES); run_as, credentials (yes: the unit gets its secrets as systemd
# credentials); write_dirs and write_whats, index by index, and write_min_kib.

# A here-string, not `printf | grep -q`: grep -q exits at its match, and with pipefail the
# printf still writing (bash writes line by line) would die of SIGPIPE and fail the test.
check_flag() { # FLAG [CANONICAL: FLAG is a hidden alias of it] [OLDER: a hidden spelling of FLAG] [SOURCE: model.extraArgs, or '']
  if grep -qxF -- "$1" <<< "$listed"; then return 0; fi
  if [ -n "${2:-}" ] && grep -qxF -- "$2" <<< "$listed"; then
    echo "note: $1 is a deprecated spelling of $2 that SGLang accepts but hides from --help; prefer $2"
    return 0
  fi
  # A flag the user wrote: no build setting makes it one, the word itself is to correct.
  if [ "${4:-}" = model.extraArgs ]; then extra_problem "$1" "${3:-}"; return 0; fi
  if [ -n "${3:-}" ]; then unknown+=("$1 (older SGLang releases spell it $3 and hide it from --help; a flag map can name that)"); return 0; fi
  unknown+=("$1")
}

# The listed flag a mistyped FLAG most likely meant (host/closest.awk), or nothing.
closest_flag() { # FLAG
  word=$1 awk "$closest_awk" <<< "$listed"
}

# A flag of model.extraArgs the host's SGLang does not list: named as the user's, with the
# nearest listed flag, and the fix is to correct model.extraArgs.
extra_problem() { # FLAG [OLDER: a hidden spelling of FLAG]
  local guess hint fix="Correct model.extraArgs: it passes its words to the server as they are."
  guess=$(closest_flag "$1")
  if [ -n "${2:-}" ]; then hint=" (older SGLang releases spell it $2 and hide it from --help)"
  elif [ -n "$guess" ]; then hint=" (did you mean $guess?)"
  else hint=" (its --help lists no such flag)"; fix="Correct model.extraArgs (it passes its words to the server as they are), or install an SGLang that has the flag."; fi
  problems+=("model.extraArgs: $1 is not a flag of the SGLang on $host$hint. $fix")
}

# The launch flags against the host's `--help`.
check_flags() {
  local help help_rc joined i
  help=$(timeout -k 5 "$help_s" "$python" -m sglang.launch_server --help 2>&1)
  help_rc=$?
  if [ "$help_rc" = 0 ]; then
    listed=$(printf '%s\n' "$help" | grep -oE -- '--[A-Za-z0-9][A-Za-z0-9-]*' | sort -u)
    unknown=()
    for i in "${!flags[@]}"; do check_flag "${flags[i]}" "${flag_canonicals[i]}" "${flag_olders[i]}" "${flag_sources[i]:-}"; done
    if [ ${#unknown[@]} -gt 0 ]; then
      joined=$(IFS=,; echo "${unknown[*]}")
      # Advice for the case found: a build without DDTree cannot be made to run it by naming
      # another build (sglangBuild: upstream has no DDTREE either); other flags can be mapped.
      if grep -qi -- ddtree <<< "${unknown[*]}" && ! grep -qi -- ddtree <<< "$listed"; then
        problems+=("the installed SGLang has no DDTree: its --help lists no DDTree flag, and this configuration needs ${joined//,/, }. Install the DDTree build of SGLang on the host, or deploy a configuration without DDTree; no sglangBuild setting makes up for a missing algorithm.")
      else
        problems+=("the installed SGLang does not accept ${joined//,/, } (checked against its --help). Set sglangBuild to the build installed on the host (upstream, ddtree-fork or a flag map), or install a build that has these flags.")
      fi
      # A simulated host (npm run simhost) changes its build with one command.
      if [ -f /etc/dflash-sim/sglang.json ]; then
        problems+=("this is a simulated host: \`npm run simhost -- configure $(hostname) '{\"profile\":\"ddtree-fork\"}'\` gives it the DDTree build ('{\"profile\":\"upstream\"}' the upstream one).")
      fi
    fi
  elif [ "$help_rc" = 124 ] || [ "$help_rc" = 137 ]; then
    problems+=("\`$python -m sglang.launch_server --help\` did not answer within $help_s s (timeouts.helpSeconds) and was killed: the Python environment hangs on import (a stuck network filesystem, a wedged GPU driver?). Run it by hand on the host, or raise timeouts.helpSeconds if its imports are that slow.")
  else
    problems+=("\`$python -m sglang.launch_server --help\` failed: $(printf '%s\n' "$help" | tail -n 3 | paste -sd'|' | sed 's/|/ | /g'). Check service.python points at the Python that has SGLang.")
  fi
}

# A test as the server's user, bounded.
as_user() { timeout -k 5 "$cmd_s" runuser -u "$run_as" -- test "$@"; }

# A server that runs as a user other than root (service.runAs): the user exists, can run
# service.python and read every path it needs, and, where it gets secrets, systemd can hand
# them over (LoadCredential=, systemd 247 on). Nothing for root.
check_run_as() {
  local i systemd_version
  [ "$run_as" != root ] || return 0
  if ! timeout -k 5 "$cmd_s" id -u "$run_as" >/dev/null 2>&1; then
    problems+=("service.runAs: the user $run_as does not exist on $host. Create it (useradd --system $run_as) or name a user that exists.")
  else
    as_user -x "$python" || problems+=("service.runAs: $run_as cannot run service.python $python.")
    for i in "${!paths[@]}"; do
      [ ! -d "${paths[i]}" ] || as_user -r "${paths[i]}" -a -x "${paths[i]}" || problems+=("service.runAs: $run_as cannot read ${path_whats[i]} ${paths[i]} (it needs read and search permission there and on every folder above).")
    done
  fi
  if [ "$credentials" = yes ]; then
    systemd_version=$(timeout -k 5 "$cmd_s" systemctl --version 2>/dev/null | awk 'NR == 1 { print $2 }')
    [ "${systemd_version:-0}" -ge 247 ] 2>/dev/null || problems+=("service.runAs: $run_as gets the API key as a systemd credential (LoadCredential=), which needs systemd 247 or later; the host has ${systemd_version:-an unknown version}. Run the server as root on this host, or upgrade systemd.")
  fi
}

# Every folder the restart and its rollback write (write_dirs, write_whats, index by index) can
# be written, with write_min_kib free: a read-only /usr/local (an image-based or hardened host)
# or a full disk fails here, before anything stops, not half-way through a restart whose
# rollback would then fail the same way. A folder not made yet: the nearest one that exists
# (mkdir -p makes the rest). Reads only: access(2) (`test -w`, which a read-only file system
# fails even for root) and df.
check_writable() {
  local i d free why
  for i in "${!write_dirs[@]}"; do
    d=${write_dirs[i]}
    while [ ! -e "$d" ] && [ "$d" != / ]; do d=$(dirname "$d"); done
    if [ ! -w "$d" ]; then
      why="not writable by root"
      [[ ",$(findmnt -no OPTIONS --target "$d" 2>/dev/null)," == *,ro,* ]] && why="on a read-only file system (mounted at $(findmnt -no TARGET --target "$d" 2>/dev/null))"
      problems+=("${write_dirs[i]} (${write_whats[i]}) cannot be written: $d is $why. A restart writes there after it has stopped the old server, and so would its rollback: make it writable (or mount a writable file system there), then run pulumi up again.")
      continue
    fi
    free=$(df -Pk "$d" 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [[ "$free" =~ ^[0-9]+$ ]] && [ "$free" -lt "$write_min_kib" ]; then
      problems+=("${write_dirs[i]} (${write_whats[i]}) has $free KiB free on its file system, less than the $write_min_kib KiB a restart and its rollback write: free some space there, then run pulumi up again.")
    fi
  done
}

# The node's GPUs: as many as the server needs, or each one CUDA_VISIBLE_DEVICES chose.
check_gpus() {
  local smi smi_rc count missing
  smi=$(timeout -k 5 "$cmd_s" nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits 2>&1)
  smi_rc=$?
  if [ "$smi_rc" = 0 ]; then
    count=$(printf '%s\n' "$smi" | grep -cE '^[0-9]+, ')
    if [ "$gpus_chosen" = yes ]; then
      missing=$(printf '%s\n' "$smi" | awk -F', *' -v want="$gpus" 'BEGIN { n = split(want, g, ",") } /^[0-9]+, / { seen[$1] = 1 } END { for (i = 1; i <= n; i++) if (!(g[i] in seen)) printf "%s%s", (k++ ? "," : ""), g[i] }')
      [ -z "$missing" ] || problems+=("this node's server uses GPUs $gpus (service.environment.CUDA_VISIBLE_DEVICES) but nvidia-smi lists no GPU $missing (the host has $count).")
    else
      [ "$count" -ge "$gpu_count" ] || problems+=("this node needs $gpu_count GPUs (model.tpSize over the nodes) but the host has $count.")
    fi
  elif [ "$smi_rc" = 124 ] || [ "$smi_rc" = 137 ]; then
    problems+=("nvidia-smi did not answer within $cmd_s s (timeouts.commandSeconds) and was killed: the GPU driver looks wedged. Run nvidia-smi by hand on the host (a driver reload or a reboot may be needed).")
  else
    problems+=("nvidia-smi did not answer as expected: ${smi:0:200}")
  fi
}

# Every check; exits 1 (the script), naming every problem, if one fails.
preflight() {
  local i
  problems=()
  check_flags
  for i in "${!paths[@]}"; do [ -d "${paths[i]}" ] || problems+=("${path_whats[i]} ${paths[i]} does not exist on the host."); done
  check_writable
  check_run_as
  check_gpus
  if [ ${#problems[@]} -gt 0 ]; then
    echo "Preflight failed for $label on $host; nothing was stopped or changed, the current server is untouched:" >&2
    printf '  - %s\n' "${problems[@]}" >&2
    exit 1
  fi
}
