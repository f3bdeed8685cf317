#!/usr/bin/env bash
# The pinned Pulumi CLI with the project's embedded defaults (scripts/pulumi-env.sh: state
# in .pulumi-state/ unless PULUMI_BACKEND_URL is set, no update checks, no plugin
# downloads), for stacks in this folder. Set-up links it as node_modules/.bin/pulumi, so
# `npx pulumi up --stack b16t4-w2048` runs it; `npm run pulumi -- <args>` sets up first.
set -euo pipefail
self=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$self")/.." && pwd)
# Under npx, node_modules/.bin (this wrapper) comes first on PATH; the toolchain must not
# take it for an installed `pulumi` (it would call itself).
path=""
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -n "$dir" ] && [ "$(readlink -f "$dir/pulumi" 2>/dev/null)" = "$self" ] && continue
  path="${path:+$path:}$dir"
done
export PATH="$path"
. "$root/scripts/pulumi-env.sh"
# >>> lock owner record (POSIX sh: lib/lock-owners.ts puts this same text into the Automation
# API's engine wrapper, lib/workspace.ts)
# Who may clear a stack lock (lib/stale-locks.ts): a lock names only a pid and a hostname, and
# machines can share a hostname (cloned VMs, containers). So every pulumi the project starts
# first leaves a record of itself on this machine: its pid, this boot, its pid namespace, its
# start time in clock ticks (pid and start ticks name one process in a boot), when it started,
# the hostname, the user and a hash of the backend URL (never the URL: it may hold a password).
# It is written by the process that then execs pulumi, so the pid is pulumi's. A lock is proven
# stale only against such a record. Best effort: without one, locks are never cleared here.
dflash_record_lock_owner() {
  _dflash_dir=${DFLASH_LOCK_OWNERS_DIR:-}
  if [ -z "$_dflash_dir" ]; then
    if [ -n "${XDG_CACHE_HOME:-}" ]; then _dflash_dir=$XDG_CACHE_HOME/dflash-pulumi/lock-owners
    elif [ -n "${HOME:-}" ]; then _dflash_dir=$HOME/.cache/dflash-pulumi/lock-owners
    else return 0; fi
  fi
  _dflash_boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || return 0
  _dflash_stat=$(cat "/proc/$$/stat" 2>/dev/null) || return 0
  # Fields after the command name (which may hold spaces): the 3rd field of stat comes first,
  # the 22nd (starttime) is the 20th. Split on purpose (numbers and a state letter: no glob).
  # shellcheck disable=SC2086
  set -- ${_dflash_stat##*) }
  _dflash_ticks=${20:-}
  case $_dflash_ticks in '' | *[!0-9]*) return 0 ;; esac
  _dflash_ns=$(readlink "/proc/$$/ns/pid" 2>/dev/null) || _dflash_ns=""
  _dflash_host=$(cat /proc/sys/kernel/hostname 2>/dev/null) || _dflash_host=$(hostname)
  _dflash_user=$(id -un 2>/dev/null) || _dflash_user=""
  _dflash_backend=$(printf '%s' "${PULUMI_BACKEND_URL:-}" | sha256sum 2>/dev/null | cut -c1-16) || _dflash_backend=""
  _dflash_at=$(date -u +%Y-%m-%dT%H:%M:%SZ) || return 0
  mkdir -p "$_dflash_dir" 2>/dev/null || return 0
  if printf '{"pid":%s,"bootId":"%s","pidNs":"%s","startTicks":%s,"startedAt":"%s","hostname":"%s","username":"%s","backend":"%s"}\n' \
    "$$" "$_dflash_boot" "$_dflash_ns" "$_dflash_ticks" "$_dflash_at" "$_dflash_host" "$_dflash_user" "$_dflash_backend" >"$_dflash_dir/.$$.tmp" 2>/dev/null; then
    mv -f "$_dflash_dir/.$$.tmp" "$_dflash_dir/$$.json" 2>/dev/null || rm -f "$_dflash_dir/.$$.tmp"
  fi
  return 0
}
# <<< lock owner record
# Before any command: an empty secrets passphrase is refused, stacks whose secrets open with
# the empty one are reported, and (before the commands that take the stack lock) locks left by
# a killed pulumi are cleared (scripts/pulumi-guard.ts). Only `stack change-secrets-provider`,
# the way off the empty passphrase, may run with it. Pulumi's global flags come before the
# command words or after them, so the words are found among the arguments.
guard=()
words=" $* "
case "$words" in
  *" stack change-secrets-provider "*) guard+=(--allow-empty-passphrase) ;;
esac
case "$words" in
  *" up "*|*" update "*|*" preview "*|*" refresh "*|*" destroy "*) guard+=(--clear-stale-locks) ;;
esac
# The stack a command names (--stack X, --stack=X, -s X): where it exists nowhere, the guard
# lists the stacks that do and how to add one, before Pulumi's "no stack named X found". Not
# for the commands that create one, nor for help.
stack_named=""
prev=""
for a in "$@"; do
  case "$prev" in --stack|-s) stack_named=$a ;; esac
  case "$a" in --stack=*) stack_named=${a#--stack=} ;; esac
  prev=$a
done
case "$words" in
  *" stack init "*|*" new "*|*" --help "*|*" -h "*|*" help "*) stack_named="" ;;
  *" stack select "*) case "$words" in *" --create "*|*" -c "*) stack_named="" ;; esac ;;
esac
[ -z "$stack_named" ] || guard+=("--stack-named=$stack_named")
"$root/node_modules/.bin/tsx" "$root/scripts/pulumi-guard.ts" "${guard[@]}"
# `pulumi stack rm` deletes the stack's settings file too (stacks/Pulumi.<stack>.yaml: a
# committed configuration), and Pulumi's own hint after a destroy suggests running it. Here it
# keeps the file (--preserve-config) unless asked with --remove-config, and says so.
case "$words" in
  *" stack rm "*|*" stack remove "*)
    args=()
    remove_config=false
    for a in "$@"; do
      if [ "$a" = "--remove-config" ]; then remove_config=true; else args+=("$a"); fi
    done
    set -- "${args[@]}"
    if ! $remove_config && [[ " $* " != *" --preserve-config "* ]]; then
      set -- "$@" --preserve-config
      echo "note: keeping the stack's settings file in stacks/ (it may be committed): pulumi stack rm runs with --preserve-config here; pass --remove-config to delete it as well" >&2
    fi
    # Pulumi wrote the stack's `encryptionsalt` into its settings file (stack init, and every
    # operation here: PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER persists the state's). Once the
    # stack is removed, that line is its removed state's: where the file holds no secret it
    # encrypts and the committed file has no such line, it is taken out, leaving the file as
    # committed.
    # (The `pulumi stack rm` run as a child below leaves no record: a lock it left would never
    # be judged stale here, only reported.)
    if $remove_config; then
      dflash_record_lock_owner || true
      exec pulumi "$@"
    fi
    # The project Pulumi runs: this folder's if it has one, else the wrapper's.
    project=$root
    [ -f "$PWD/Pulumi.yaml" ] && project=$PWD
    status=0
    pulumi "$@" || status=$?
    if [ "$status" = 0 ]; then
      for f in "$project"/stacks/Pulumi.*.yaml; do
        if [ ! -f "$f" ] || ! grep -q '^encryptionsalt:' "$f" || grep -q 'secure:' "$f"; then continue; fi
        rel="stacks/$(basename "$f")"
        stack=${rel#stacks/Pulumi.}
        stack=${stack%.yaml}
        # Only the file of the stack this command removed (named as an argument, or --stack=NAME).
        [[ " $* " == *" $stack "* || " $* " == *"=$stack "* ]] || continue
        committed=$(git -C "$project" show "HEAD:$rel" 2>/dev/null || true)
        if grep -q '^encryptionsalt:' <<<"$committed"; then continue; fi
        sed -i '/^encryptionsalt:/d' "$f"
        echo "note: took the removed stack's encryptionsalt out of $rel (it encrypts no secret there, and the committed file has none)" >&2
      done
    fi
    exit "$status"
    ;;
esac
dflash_record_lock_owner || true
exec pulumi "$@"
