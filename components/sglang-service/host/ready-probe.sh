# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, port, curl_auth, info_url) come from the rendered header (remote/steps.ts waitReady)
# dflash-sglang: one look of the readiness step at a node (reads only), in sections: the
# unit's state (host/show.sh), who listens on its port, the server's answer on its info
# endpoint (with the stack's API key header file, where it has one), and the host's clock
# with how long the main process has run (whole seconds: a load begins when the restart
# starts the unit, before this step begins). A section that cannot be read is empty.
echo @@section show
show_unit
echo @@section listen
ss -ltnpH 2>/dev/null | grep -F ":$port " || true
echo @@section info
curl -s -m 5 -w '\n@@status %{http_code}\n' ${curl_auth[@]+"${curl_auth[@]}"} "$info_url" || true
echo @@section age
# A line, even when a read fails.
# shellcheck disable=SC2005
echo "$(date +%s) $(ps -o etimes= -p "$(systemctl show -p MainPID --value "$service")" 2>/dev/null)"
