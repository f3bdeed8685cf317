# shellcheck shell=bash
# shellcheck disable=SC2154 # label and host come from the rendered header (script.ts renderPreflightScript)
# dflash-sglang: check before you stop: the preflight alone (reads only, host/checks.sh), run
# on the node that will run the configuration before anything of the stack's current unit is
# touched. A host that cannot run the new configuration keeps serving the old one.
# Run, unless sourced (the bash tests): `return` succeeds only in a sourced file.
if ! (return 0 2>/dev/null); then
  preflight
  echo "preflight passed for $label on $host"
fi
