# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (state, curl_headers) come from the rendered header (remote/handlers.ts rollback)
# dflash-sglang: what a rollback put back on node 0 (reads only), for the readiness step to
# prove it: the known-good generation's unit hash (12 hex digits) and number (host/generations.sh),
# whether its secrets include the API key's header file, then its proof record (JSON: stack,
# expected arguments, model name).
good="$state/known-good"
echo "@@good $(sha256sum "$good/unit.service" 2>/dev/null | cut -c1-12)"
g=$(readlink "$good" 2>/dev/null) && echo "@@generation ${g##*/}"
if [ -f "$curl_headers" ]; then echo "@@keyed yes"; else echo "@@keyed no"; fi
echo "@@note"
cat "$good/proved.json"
