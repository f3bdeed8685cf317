# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (service, show_props) come from the rendered header (remote/steps.ts)
# dflash-sglang: the unit's state as `systemctl show` gives it, the properties the readiness
# step reads (show_props), for host/ready-probe.sh and host/unit-show.sh.
show_unit() {
  local props=() p
  for p in "${show_props[@]}"; do props+=(-p "$p"); done
  systemctl show "$service" "${props[@]}" --no-pager
}
