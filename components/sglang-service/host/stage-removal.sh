# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (stage, state, state_root, helper_dir, units_dir) come from the rendered header (script.ts renderStageRemoval)
# dflash-sglang: remove this stack's stage folder, then whatever is left empty, and the shared
# helpers once no stack of any unit is staged on the host and no unit file names them. Run
# after the transaction's `remove`. A rename's first half leaves the old unit serving (the
# restart of the new name removes it): its helpers stay, or a crash or a reboot before that
# restart would find its ExecStartPre gone and leave nothing serving (campaign seed 4143,
# seq. 64). Never fails: what it leaves is empty folders or helpers nothing names.
remove_stage() {
  rm -rf "$stage"
  rmdir "$state/stacks" "$state" 2>/dev/null || true
  if ! ls -d "$state_root"/*/stacks/* >/dev/null 2>&1 && ! grep -lqsF -- "$helper_dir/" "$units_dir"/*.service; then
    rm -rf "$helper_dir"
    rmdir "$state_root" 2>/dev/null || true
  fi
  true
}

# Run, unless sourced (the bash tests): `return` succeeds only in a sourced file.
if ! (return 0 2>/dev/null); then remove_stage; fi
