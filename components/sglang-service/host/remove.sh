# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (transaction, carry, stage_removal) come from the rendered header (remote/handlers.ts removePresence)
# dflash-sglang: the teardown of a stack on a node (the delete of its presence): the staged
# transaction's `remove` (drain, stop, remove the unit, its secrets and known-good record,
# where the node still runs this stack's unit; `carry`: where the record goes when this is
# half of a replacement), then the removal of the stage folder (host/stage-removal.sh, or the
# one-line removal an earlier version recorded), run as its own bash.
if [ -f "$transaction" ]; then bash "$transaction" remove ${carry[@]+"${carry[@]}"} || exit $?; fi
bash -c "$stage_removal"
