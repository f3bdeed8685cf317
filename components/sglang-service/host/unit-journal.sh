# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, invocation) come from the rendered header (remote/steps.ts unitFailure)
# dflash-sglang: the unit's last 40 journal lines (reads only), of its invocation where one is
# known (the run that failed, not an earlier one).
match=()
[ -z "$invocation" ] || match=("_SYSTEMD_INVOCATION_ID=$invocation")
journalctl -u "$service" --no-pager -o cat -n 40 ${match[@]+"${match[@]}"}
