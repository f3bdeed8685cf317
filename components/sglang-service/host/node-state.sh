# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (unit_path, service, run, group_failed) come from the rendered header (remote/handlers.ts nodeState)
# dflash-sglang: what a node runs, for the readiness step (reads only): the live unit's hash,
# its state (bounded), this host's rollout note and its proof, and the group's failure mark;
# "@@end" last, so that a read cut short is told from a complete one.
echo "@@hash $(sha256sum "$unit_path" 2>/dev/null | cut -c1-64)"
echo "@@state $(timeout -k 5 20 systemctl is-active "$service")"
echo "@@note $(cat "$run/rollout" 2>/dev/null)"
echo "@@proved $(cat "$run/rollout.proved" 2>/dev/null)"
echo "@@groupfailed $(cat "$group_failed" 2>/dev/null)"
echo @@end
