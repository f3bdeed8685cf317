#!/usr/bin/env bats
# HAProxy's agent check on a replica (components/fleet/host/agent.sh), in bash, against a fake
# curl: "up #answered" only for a chat completion whose content is text (a plain "up" where it
# cannot judge); "down #why" for garbage (U+FFFD
# or control characters, raw or escaped), an empty answer, an HTTP error or no answer.

bats_require_minimum_version 1.5.0

FLEET_HOST_DIR=${DFLASH_FLEET_HOST_DIR:-$(cd "$BATS_TEST_DIRNAME/../../../../components/fleet/host" && pwd)}

setup() {
  cd "$BATS_TEST_TMPDIR" || exit 1
  mkdir -p bin
  # curl prints ./answer, then (its -w) a newline and ./status; it exits with ./curl-exit; its arguments go to ./curl-args.
  cat >bin/curl <<'CURL'
#!/bin/bash
printf '%s\n' "$@" >curl-args
code=$(cat curl-exit 2>/dev/null || echo 0)
[ "$code" = 0 ] || { echo "curl: (7) Failed to connect" >&2; exit "$code"; }
cat answer
printf '\n%s' "$(cat status 2>/dev/null || echo 200)"
CURL
  chmod +x bin/curl
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

# check: runs the agent as systemd would for one connection.
check() {
  (
    url=http://127.0.0.1:30000/v1/chat/completions body='{"model":"m"}' seconds=2 curl_headers=$BATS_TEST_TMPDIR/headers
    # shellcheck source=../../../../components/fleet/host/agent.sh
    source "$FLEET_HOST_DIR/agent.sh"
  )
}

answer() { printf '%s' "$1" >answer; }

@test "a chat completion with text content: up, answered" {
  answer '{"choices":[{"index":0,"message":{"role":"assistant","content":"OK, sure."}}]}'
  run check
  [ "$status" -eq 0 ]
  [ "$output" = "up #answered" ]
}

@test "the stack's API key header file is sent where there is one" {
  answer '{"choices":[{"message":{"content":"OK"}}]}'
  run check
  [ "$output" = "up #answered" ]
  run ! grep -qx -- "@$BATS_TEST_TMPDIR/headers" curl-args
  echo "Authorization: Bearer x" >headers
  run check
  [ "$output" = "up #answered" ]
  grep -qx -- "@$BATS_TEST_TMPDIR/headers" curl-args
}

@test "a reasoning model's answer (its text in reasoning_content, content null) is text: up, answered" {
  answer '{"choices":[{"message":{"content":null,"reasoning_content":"The user wants"}}]}'
  run check
  [ "$output" = "up #answered" ]
}

@test "garbage: U+FFFD raw, U+FFFD escaped, control characters escaped: down" {
  answer $'{"choices":[{"message":{"content":"\xef\xbf\xbd\xef\xbf\xbd"}}]}'
  run check
  [[ "$output" == "down #the answer is garbage"* ]]
  answer '{"choices":[{"message":{"content":"\ufffd\ufffd"}}]}'
  run check
  [[ "$output" == "down #the answer is garbage"* ]]
  answer '{"choices":[{"message":{"content":"a\u0001b\u001f"}}]}'
  run check
  [[ "$output" == "down #the answer is garbage"* ]]
  # Ordinary escapes are text.
  answer '{"choices":[{"message":{"content":"line\nnext\t\"quoted\" caf\u00e9"}}]}'
  run check
  [ "$output" = "up #answered" ]
}

@test "an empty answer, no chat completion, a 5xx: down, saying which" {
  answer '{"choices":[{"message":{"content":""}}]}'
  run check
  [ "$output" = "down #the answer is empty" ]
  answer '{"choices":[{"message":{"content":null}}]}'
  run check
  [ "$output" = "down #the answer is empty" ]
  answer '{"object":"error"}'
  run check
  [ "$output" = "down #the answer is not a chat completion" ]
  answer '{"detail":"Internal Server Error"}'
  echo 500 >status
  run check
  [ "$output" = "down #the server answered HTTP 500 to a generation" ]
}

@test "no answer in time, a 503 (loading, draining), another refusal: not judged, up (HAProxy's health check decides)" {
  answer '{"detail":"Service Unavailable"}'
  echo 503 >status
  run check
  [ "$output" = up ]
  echo 429 >status
  run check
  [ "$output" = up ]
  echo 28 >curl-exit
  run check
  [ "$output" = up ]
}
