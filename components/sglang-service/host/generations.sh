# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (state, stack, unit, port, every_secret, keep_gens...) come from the rendered header (script.ts renderTransaction)
# dflash-sglang: generations. Every configuration a restart installs on a host is a
# generation, a folder made whole before anything uses it and never changed after (NixOS's
# system-N-link, for one unit):
#   <state>/generations/N/unit.service      the unit as installed
#   <state>/generations/N/helpers/          the unit's helpers (ExecStartPre, ExecStartPost)
#   <state>/generations/N/secrets/          its secret files (0600; the folder 0700): its
#                                           server config, API key headers, token
#   <state>/generations/N/generation.json   number, stack, unit name, port, unit hash, when
#   <state>/generations/N/proved.json       added once, when readiness proves it: what it
#                                           must serve (stack, arguments, model name)
#   <state>/current -> generations/N        what is installed
#   <state>/known-good -> generations/M     the last one readiness proved: a rollback
#                                           installs it whole and makes it current again
# Old ones are pruned: the known-good, the current and the newest $keep_gens stay
# (safety.keepGenerations). `remove` (destroy) removes them all with the unit.
# Part of the transaction (script.ts renderTransaction); the bash tests source it.

# The generation a link (current, known-good) of unit folder $2 (default: $state) points to,
# as its number; fails when there is none.
gen_of() {
  local t s=${2:-$state}
  t=$(readlink "$s/$1" 2>/dev/null) || return 1
  t=${t##*/}
  [[ "$t" =~ ^[0-9]+$ ]] && [ -d "$s/generations/$t" ] && echo "$t"
}
# The folder of the generation a link points to; fails when there is none.
gen_dir() { local n; n=$(gen_of "$1") && echo "$state/generations/$n"; }
# The generations of unit folder $1 (default: $state), newest first.
gen_list() {
  local d
  for d in "${1:-$state}"/generations/*; do
    d=${d##*/}
    [[ "$d" =~ ^[0-9]+$ ]] && echo "$d"
  done | sort -rn
}
# Points link $1 (current, known-good) of unit folder $3 (default: $state) at generation $2,
# whole (a rename over the old link).
set_link() {
  local s=${3:-$state}
  ln -sfn "generations/$2" "$s/$1.dflash-tmp" && mv -Tf "$s/$1.dflash-tmp" "$s/$1"
}

# Makes the next generation from unit file $1, the helpers in folder $2 and the secret files
# named in every_secret, read from $3: a suffix of their live paths ("" for the live files,
# ".dflash-new" for those a restart read from stdin), or a folder (a path) holding them by
# name; a file that is not there is not part of it. JSON fields beyond the header's come as
# "key":value text in $4. Sets made_gen; links nothing.
make_generation() {
  local n d f
  n=$(gen_list | head -n 1)
  n=$(( ${n:-0} + 1 ))
  d="$state/generations/$n"
  rm -rf "$d.dflash-tmp" && (umask 077; mkdir -p "$d.dflash-tmp/secrets" "$d.dflash-tmp/helpers") || return 1
  install -m 0644 "$1" "$d.dflash-tmp/unit.service" || return 1
  for f in "$2"/*; do
    [ -f "$f" ] || continue
    install -m 0755 "$f" "$d.dflash-tmp/helpers/${f##*/}" || return 1
  done
  local src
  for f in "${every_secret[@]}"; do
    case "$3" in /*) src="$3/${f##*/}" ;; *) src="$f$3" ;; esac
    [ -f "$src" ] || continue
    (umask 077; cp -f "$src" "$d.dflash-tmp/secrets/${f##*/}") || return 1
  done
  printf '{"generation":%s,"stack":"%s","unit":"%s","port":%s,"unitHash":"%s","createdAt":"%s"%s}\n' \
    "$n" "$stack" "${unit%.service}" "$port" "$(hash_of "$1")" "$(date -u +%FT%TZ)" "${4:+,$4}" > "$d.dflash-tmp/generation.json" || return 1
  # On disk before it counts (a power cut after the rename must not leave empty files behind
  # a name that says "whole"), and its name with it.
  sync -f "$d.dflash-tmp" && mv "$d.dflash-tmp" "$d" && sync -f "$d" || return 1
  made_gen=$n
}

# Whether generation folders $1 and $2 hold the same configuration: unit and secret files.
gen_same() {
  local f
  [ "$(hash_of "$1/unit.service")" = "$(hash_of "$2/unit.service")" ] || return 1
  for f in "$1"/secrets/* "$2"/secrets/*; do
    [ -e "$f" ] || continue
    cmp -s "$1/secrets/${f##*/}" "$2/secrets/${f##*/}" || return 1
  done
}

# Whether generation folder $1 holds exactly the live unit and secret files.
gen_is_live() {
  local f
  [ -f "$1/unit.service" ] && [ "$(hash_of "$1/unit.service")" = "$(hash_of "$live")" ] || return 1
  for f in "${every_secret[@]}"; do
    if [ -f "$f" ]; then cmp -s "$f" "$1/secrets/${f##*/}" || return 1
    elif [ -e "$1/secrets/${f##*/}" ]; then return 1; fi
  done
}

# Puts generation folder $1's secret files in place (those it lacks are removed): a rollback
# brings the configuration back with its own secrets, not with whatever the failed one left.
install_gen_secrets() {
  local f
  mkdir -p "$secrets_dir" && chmod 0700 "$secrets_dir" || return 1
  for f in "${every_secret[@]}"; do
    if [ -f "$1/secrets/${f##*/}" ]; then (umask 077; cp -f "$1/secrets/${f##*/}" "$f.dflash-tmp") && mv -f "$f.dflash-tmp" "$f" || return 1
    else rm -f "$f"; fi
  done
}

# Removes the generations that are neither the known-good, the current, nor among the newest
# $keep_gens; and any that a step which died left half-made (*.dflash-tmp: they may hold secrets).
prune_generations() {
  local good cur n count=0 d
  good=$(gen_of known-good) cur=$(gen_of current)
  for d in "$state"/generations/*.dflash-tmp; do [ ! -e "$d" ] || rm -rf "$d"; done
  for n in $(gen_list); do
    count=$(( count + 1 ))
    if [ "$count" -gt "$keep_gens" ] && [ "$n" != "${good:-}" ] && [ "$n" != "${cur:-}" ]; then rm -rf "${state:?}/generations/$n"; fi
  done
}

# A known-good record an earlier version of this tool kept (<state>/last-good.service, .json,
# .secrets/) becomes a generation, the known-good, so that an upgraded host rolls back to it;
# the old files go. Nothing when there is none or a known-good generation exists.
adopt_last_good() {
  [ -f "$state/last-good.service" ] || return 0
  if ! gen_of known-good >/dev/null; then
    # Its port is its record's (the configuration it proved), not this restart's.
    local port=$port p
    p=$(sed -nE 's/.*"port":([0-9]+).*/\1/p' "$state/last-good.json" 2>/dev/null) && [ -n "$p" ] && port=$p
    # Its secret files: those kept with it, or, by a version that kept none, the live ones
    # (what it ran with: this runs before a restart installs anything).
    local from=""
    [ ! -d "$state/last-good.secrets" ] || from="$state/last-good.secrets"
    make_generation "$state/last-good.service" "$helper_dir" "$from" '"adoptedFrom":"last-good"' || return 1
    [ ! -f "$state/last-good.json" ] || cp -f "$state/last-good.json" "$state/generations/$made_gen/proved.json" || return 1
    set_link known-good "$made_gen" || return 1
  fi
  rm -rf "$state/last-good.service" "$state/last-good.json" "$state/last-good.secrets"
}

# The unit is renamed $1 on this node (service.unitName changed): the known-good generation
# is carried to the new name's folder as a generation of its own there, its known-good, with
# the lines that name the unit (description, journal identifier, secret files) renamed, so that
# a new configuration that fails rolls back to it rather than leaving the host down. Port,
# arguments and secrets stay its own. A name that already has a known-good keeps its own.
carry_generation() {
  local from to="$state_root/$1" re f n
  from=$(gen_dir known-good) || return 0
  [ -f "$from/proved.json" ] || return 0
  if gen_of known-good "$to" >/dev/null; then return 0; fi
  # The old name as a sed pattern: unit names hold letters, digits, '_', '@', '-' and '.'.
  re=${unit%.service}; re=${re//./[.]}
  n=$(gen_list "$to" | head -n 1)
  n=$(( ${n:-0} + 1 ))
  local d="$to/generations/$n"
  mkdir -p "$to/generations" && rm -rf "$d.dflash-tmp" && (umask 077; mkdir -p "$d.dflash-tmp/secrets") || return 1
  sed -e "s#^Description=SGLang $re (#Description=SGLang $1 (#" -e "s#^SyslogIdentifier=$re\$#SyslogIdentifier=$1#" -e "s#$secrets_dir/${re}[.]#$secrets_dir/$1.#g" "$from/unit.service" > "$d.dflash-tmp/unit.service" &&
    sed -e "s#$secrets_dir/${re}[.]#$secrets_dir/$1.#g" "$from/proved.json" > "$d.dflash-tmp/proved.json" &&
    cp -a "$from/helpers" "$d.dflash-tmp/helpers" || return 1
  for f in "$from/secrets"/*; do
    [ -e "$f" ] || continue
    f=${f##*/}
    (umask 077; cp -f "$from/secrets/$f" "$d.dflash-tmp/secrets/$1.${f#"${unit%.service}".}") || return 1
  done
  # Its record: the new name, the number it had under the old one.
  sed -e "s#^{\"generation\":[0-9]*,#{\"generation\":$n,#" -e "s#\"unit\":\"[^\"]*\"#\"unit\":\"$1\"#" -e "s#}\$#,\"renamedFrom\":\"${unit%.service}\",\"renamedFromGeneration\":$(gen_of known-good)}#" "$from/generation.json" > "$d.dflash-tmp/generation.json" &&
    sed -i "s#\"unitHash\":\"[0-9a-f]*\"#\"unitHash\":\"$(hash_of "$d.dflash-tmp/unit.service")\"#" "$d.dflash-tmp/generation.json" &&
    sync -f "$d.dflash-tmp" && mv "$d.dflash-tmp" "$d" && set_link known-good "$n" "$to" && sync -f "$d" || return 1
  echo "kept the previous configuration ($(known_good)) as the known-good of $1, the unit's new name (its generation $n there): a new configuration that fails rolls back to it"
}

# Removes every generation of the unit folder $1 and its links (a removal: destroy, a rename's end).
remove_generations() { rm -rf "$1/generations" "$1/current" "$1/known-good" "$1/current.dflash-tmp" "$1/known-good.dflash-tmp" "$1/last-good.service" "$1/last-good.json" "$1/last-good.secrets"; }

# A restart's new generation that was never installed (the restart failed before it could be)
# goes when the step ends: every generation on a host is one that was installed.
drop_unused_generation() {
  [ -n "${new_gen:-}" ] && [ "$(gen_of current)" != "$new_gen" ] && rm -rf "${state:?}/generations/$new_gen"
  true
}

# A destroy that finds the unit now another stack's: this stack's generations (by their
# record's stack), secrets included, go, except what runs (current) and the known-good.
drop_stack_generations() {
  local n good cur
  good=$(gen_of known-good) cur=$(gen_of current)
  for n in $(gen_list); do
    if [ "$n" = "${good:-}" ] || [ "$n" = "${cur:-}" ]; then continue; fi
    grep -q "^{\"generation\":$n,\"stack\":\"$stack\"," "$state/generations/$n/generation.json" 2>/dev/null && rm -rf "${state:?}/generations/$n"
  done
  true
}
