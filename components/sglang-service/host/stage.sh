# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (stage, unit_name, unit_text, transaction_text, helper_names...) come from the rendered header (script.ts renderStageScript)
# dflash-sglang: stage a configuration: preflight (reads only, host/checks.sh), then the unit,
# the transaction and the helpers written to this stack's own folder ($stage), and the unit
# checked by systemd-analyze. The live unit, the secrets and the shared helpers are not
# touched: the transaction installs them, under the host's lock. Fails before writing
# anything if the host cannot run the configuration.
#
# Values: stage, stack, unit_name, helper_dir, cmd_s; unit_text, transaction_text; helper_names
# and helper_texts, index by index.

# Writes TEXT to PATH with MODE: whole or not at all (a temporary file, renamed).
write_file() { # PATH MODE TEXT
  printf '%s' "$3" > "$1.dflash-tmp" && chmod "$2" "$1.dflash-tmp" && mv -f "$1.dflash-tmp" "$1"
}

stage_files() {
  local verify="$stage/verify" i rc
  mkdir -p "$stage/helpers" "$verify" || return 1
  for i in "${!helper_names[@]}"; do
    write_file "$stage/helpers/${helper_names[i]}" 0755 "${helper_texts[i]}" || return 1
  done
  write_file "$stage/unit.service" 0644 "$unit_text" || return 1
  write_file "$stage/transaction.sh" 0755 "$transaction_text" || return 1
  # systemd-analyze wants the real unit name: verify a copy in a scratch folder, pointing at
  # the staged helpers (the transaction installs them, under the lock).
  sed "s#$helper_dir/#$stage/helpers/#g" "$stage/unit.service" > "$verify/$unit_name.service" || return 1
  if command -v systemd-analyze >/dev/null; then
    timeout -k 5 "$cmd_s" systemd-analyze verify "$verify/$unit_name.service" || {
      rc=$?
      [ "$rc" != 124 ] && [ "$rc" != 137 ] || echo "FAILED: systemd-analyze verify did not answer within $cmd_s s (timeouts.commandSeconds) on $host; nothing was changed. Check systemd there (systemctl status)." >&2
      return "$rc"
    }
  fi
  rm -rf "$verify"
}

# Run, unless sourced (the bash tests): `return` succeeds only in a sourced file.
if ! (return 0 2>/dev/null); then
  # 1. Preflight: the host can run this configuration. Reads only.
  preflight
  # 2. Stage: this stack's folder only; the live unit is not touched.
  stage_files || exit $?
  echo "staged $unit_name for stack $stack in $stage"
fi
