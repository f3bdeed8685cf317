# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (url, body, seconds, curl_headers) come from the rendered header (components/fleet/render.ts renderAgentScript)
# dflash-sglang: HAProxy's agent check of one replica (agent-check: HAProxy connects, reads one
# line, and closes). Run by systemd for each connection (dflash-agent-<stack>.socket, Accept=yes),
# its stdout the connection. It asks the local server for one short chat completion (the
# stack's API key header file where it has one) and judges the answer it gets: a 200 must be a
# completion with text (content, or reasoning_content for a reasoning model) and no U+FFFD or
# control character, raw or escaped in the JSON; a 5xx other than 503 is a broken server. Those
# answer "down #" and why (HAProxy takes the server out until an "up": one "down" acts at once).
# No answer in time, a 503 (loading, draining) or another refusal are not judged here (a plain
# "up"): whether the replica serves at all is HAProxy's health check's to say, and a fleet
# whose replicas are all busy must not go dark because its probes waited. It judges the form
# of the answer, not whether it is right. A text answer is "up #answered": the fleet's leave
# (balancer-step.sh) counts only that as a replica that generates now.
auth=()
[ -r "$curl_headers" ] && auth=(-H "@$curl_headers")
say() { printf '%s\n' "$1"; exit 0; }
code=0
out=$(curl -sS -m "$seconds" -w '\n%{http_code}' ${auth[@]+"${auth[@]}"} -H 'content-type: application/json' -d "$body" "$url" 2>&1) || code=$?
status=${out##*$'\n'}
answer=${out%$'\n'*}
[ "$code" = 0 ] || say up
case "$status" in
200) ;;
5??) [ "$status" = 503 ] && say up
  say "down #the server answered HTTP $status to a generation" ;;
*) say up ;;
esac
grep -q '"choices"' <<<"$answer" || say "down #the answer is not a chat completion"
if ! grep -qE '"(content|reasoning_content)": ?"[^"]' <<<"$answer"; then say "down #the answer is empty"; fi
if LC_ALL=C grep -q $'\xef\xbf\xbd' <<<"$answer" || grep -qiE '\\u(fffd|000[0-8]|000[bcef]|001[0-9a-f]|007f)' <<<"$answer"; then
  say "down #the answer is garbage (U+FFFD or control characters): the server's output is broken"
fi
say "up #answered"
