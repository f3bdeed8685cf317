# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (url, body, seconds, curl_headers) come from the rendered header (components/fleet/render.ts renderAgentScript)
# dflash-sglang: HAProxy's agent check of one replica (agent-check: HAProxy connects, reads one
# line, and closes). Run by systemd for each connection (dflash-agent-<stack>.socket, Accept=yes),
# its stdout the connection. It asks the local server for one short chat completion (the
# stack's API key header file where it has one) and answers "up" only where the answer is
# text: a completion with content, no U+FFFD and no control character, raw or escaped in the
# JSON. Else "down #" and why (HAProxy takes the server out until an "up"). It judges the form
# of the answer, not whether it is right.
auth=()
[ -r "$curl_headers" ] && auth=(-H "@$curl_headers")
say() { printf '%s\n' "$1"; exit 0; }
code=0
out=$(curl -sS -m "$seconds" -w '\n%{http_code}' ${auth[@]+"${auth[@]}"} -H 'content-type: application/json' -d "$body" "$url" 2>&1) || code=$?
status=${out##*$'\n'}
answer=${out%$'\n'*}
[ "$code" = 0 ] || say "down #no answer from the server (curl exit $code)"
[ "$status" = 200 ] || say "down #the server answered HTTP $status to a generation"
grep -q '"choices"' <<<"$answer" || say "down #the answer is not a chat completion"
if grep -qE '"content": ?(null|"")' <<<"$answer"; then say "down #the answer is empty"; fi
if LC_ALL=C grep -q $'\xef\xbf\xbd' <<<"$answer" || grep -qiE '\\u(fffd|000[0-8]|000[bcef]|001[0-9a-f]|007f)' <<<"$answer"; then
  say "down #the answer is garbage (U+FFFD or control characters): the server's output is broken"
fi
say "up"
