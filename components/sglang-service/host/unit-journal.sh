# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, invocation) come from the rendered header (remote/steps.ts unitFailure)
# dflash-sglang: the journal of the unit's run that failed (reads only), where its invocation is
# known (not an earlier run), with the host's monotonic clock (a step of the wall clock does not
# bend the times between lines). Up to 2000 lines: with tensor parallelism every rank prints its
# own traceback, and the first one is the cause (parse.ts failureCause).
match=()
[ -z "$invocation" ] || match=("_SYSTEMD_INVOCATION_ID=$invocation")
journalctl -u "$service" --no-pager -o short-monotonic -n 2000 ${match[@]+"${match[@]}"}
