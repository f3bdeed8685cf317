# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (url, body, seconds, curl_auth) come from the rendered header (remote/steps.ts waitReady)
# dflash-sglang: one real generation from the server (the readiness step's last check): a chat
# completion of a few tokens, within `seconds`, with the stack's API key header file where it
# has one. Its answer is the response body.
curl -s -m "$seconds" ${curl_auth[@]+"${curl_auth[@]}"} -H 'content-type: application/json' -d "$body" "$url"
