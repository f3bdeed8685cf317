# shellcheck shell=bash
# dflash-sglang: the unit's state (reads only; host/show.sh).
show_unit
