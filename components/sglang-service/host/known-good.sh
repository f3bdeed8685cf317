# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (state, curl_headers) come from the rendered header (remote/handlers.ts rollback)
# dflash-sglang: what a rollback put back on node 0 (reads only), for the readiness step to
# prove it: the known-good unit's hash (12 hex digits), whether its secrets include the API
# key's header file, then its record (JSON: stack, expected arguments, model name).
echo "@@good $(sha256sum "$state/last-good.service" 2>/dev/null | cut -c1-12)"
if [ -f "$curl_headers" ]; then echo "@@keyed yes"; else echo "@@keyed no"; fi
echo "@@note"
cat "$state/last-good.json"
