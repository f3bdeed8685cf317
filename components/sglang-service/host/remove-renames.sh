# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (state_root, stack_line) come from the rendered header (remote/handlers.ts removeInterruptedRenames)
# dflash-sglang: a destroy after an interrupted rename: the old unit a rename left serving
# (its transaction kept beside the rename's marker, <state>/<new unit>/replaces) is drained,
# stopped and removed by that transaction, if it is this stack's (its `stack=` line), with
# the new name's generations (the known-good carried there): the rename never ended.
for m in "$state_root"/*/replaces; do
  [ -f "$m" ] || continue
  t="${m%/replaces}/replaced.transaction.sh"
  if ! { [ -f "$t" ] && grep -qxF "$stack_line" "$t"; }; then continue; fi
  bash "$t" remove || exit $?
  d=${m%/replaces}
  rm -rf "$m" "$t"
  # The generation carried there, unless the new name has been installed since (by another
  # stack: its own `current` then; its generations are its own).
  [ -e "$d/current" ] || rm -rf "$d/generations" "$d/known-good" "$d/last-good.service" "$d/last-good.json" "$d/last-good.secrets"
done
