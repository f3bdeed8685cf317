#!/usr/bin/env bats
# Generations (components/sglang-service/host/generations.sh): made whole, installed whole,
# chosen by the rollback, carried through a rename, adopted from an earlier version's record,
# pruned to the known-good, the current and the newest $keep_gens. Every branch that does not
# need a real host; test/components/sglang-service/generations.test.ts runs them on one.

setup() {
  load common
  load_transaction
  mkdir -p "$stage/helpers"
  printf '[Service]\nExecStart=/bin/true\n' > "$stage/unit.service"
  printf '#!/bin/sh\n' > "$stage/helpers/wait-ready"
}

# A new configuration as a restart stages it: unit text $1, key $2 read from stdin (.dflash-new).
staged() {
  printf '[Service]\n# %s\n' "$1" > "$stage/unit.service"
  printf 'api-key: %s\n' "$2" > "$secrets_dir/u.secrets.yaml.dflash-new"
  printf 'Authorization: Bearer %s\n' "$2" > "$secrets_dir/u.curl-headers.dflash-new"
}

@test "generations: a generation is made whole (unit, helpers, secrets 0600 in a 0700 folder, its record), numbered on, and links nothing" {
  staged one k1
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  [ "$made_gen" = 1 ]
  local g=$state/generations/1
  cmp "$stage/unit.service" "$g/unit.service"
  [ -x "$g/helpers/wait-ready" ]
  [ "$(cat "$g/secrets/u.secrets.yaml")" = "api-key: k1" ]
  [ ! -e "$g/secrets/u.env" ]
  [ "$(stat -c %a "$g")" = 700 ]
  [ "$(stat -c %a "$g/secrets/u.secrets.yaml")" = 600 ]
  grep -q '^{"generation":1,"stack":"s","unit":"u","port":30000,"unitHash":"'"$(hash_of "$stage/unit.service")"'","createdAt":"' "$g/generation.json"
  [ ! -e "$state/current" ] && [ ! -e "$state/known-good" ]
  staged two k2
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  [ "$made_gen" = 2 ]
  [ "$(cat "$state/generations/1/secrets/u.secrets.yaml")" = "api-key: k1" ]
}

@test "generations: installing one installs its unit and helpers and makes it current; its secrets are put in place whole" {
  staged one k1
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  fake_unit inactive
  install_unit "$state/generations/1"
  cmp "$live" "$state/generations/1/unit.service"
  [ -x "$helper_dir/wait-ready" ]
  [ "$(gen_of current)" = 1 ]
  echo "HF_TOKEN=other" > "$secrets_dir/u.env"
  install_gen_secrets "$state/generations/1"
  [ "$(cat "$secrets_dir/u.curl-headers")" = "Authorization: Bearer k1" ]
  [ ! -e "$secrets_dir/u.env" ]
  gen_is_live "$state/generations/1"
  echo "api-key: changed" > "$secrets_dir/u.secrets.yaml"
  ! gen_is_live "$state/generations/1" || false
}

@test "generations: the rollback installs the known-good whole (unit, secrets), not the newest, and makes it current" {
  fake_unit inactive
  fake_nvidia_smi $'0, 0\n1, 0'
  staged good kgood
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  install_unit "$state/generations/1"
  install_gen_secrets "$state/generations/1"
  echo '{"stack":"s"}' > "$state/generations/1/proved.json"
  set_link known-good 1
  staged bad kbad
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  install_unit "$state/generations/2"
  install_gen_secrets "$state/generations/2"
  run restore_known_good "$(hash_of "$state/generations/2/unit.service")"
  [ "$status" = 0 ]
  [[ "$output" == *"restoring the previous configuration (generation 1)"* ]]
  cmp "$live" "$state/generations/1/unit.service"
  [ "$(cat "$secrets_dir/u.secrets.yaml")" = "api-key: kgood" ]
  [ "$(gen_of current)" = 1 ]
  [ "$(known_good)" = "stack s, unit $(hash_of "$state/generations/1/unit.service" | cut -c1-12)" ]
}

@test "generations: pruning keeps the known-good, the current and the newest keep_gens; half-made ones go" {
  local n
  for n in 1 2 3 4 5 6 7 8 9 10; do
    staged "c$n" "k$n"
    make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  done
  set_link known-good 2
  set_link current 5
  mkdir -p "$state/generations/11.dflash-tmp/secrets"
  prune_generations
  [ "$(gen_list | paste -sd' ')" = "10 9 8 5 2" ]
  [ ! -e "$state/generations/11.dflash-tmp" ]
  keep_gens=1
  set_link current 10
  prune_generations
  [ "$(gen_list | paste -sd' ')" = "10 2" ]
  # The next is numbered after the newest, never reusing a pruned number.
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  [ "$made_gen" = 11 ]
}

@test "generations: a restart's generation that was never installed goes at the step's end; an installed one stays" {
  staged one k1
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  new_gen=$made_gen
  drop_unused_generation
  [ ! -e "$state/generations/1" ]
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  new_gen=$made_gen
  set_link current "$new_gen"
  drop_unused_generation
  [ -d "$state/generations/$new_gen" ]
}

@test "generations: an earlier version's known-good record (last-good.*) becomes the known-good generation, with its own port and secrets" {
  printf '[Service]\n# old\n' > "$state/last-good.service"
  echo '{"stack":"s","expectedArgs":{"port":31000},"modelName":"m"}' > "$state/last-good.json"
  mkdir -p "$state/last-good.secrets" "$helper_dir"
  echo "api-key: old" > "$state/last-good.secrets/u.secrets.yaml"
  printf '#!/bin/sh\n' > "$helper_dir/wait-gpus-free"
  adopt_last_good
  [ "$(gen_of known-good)" = 1 ]
  [ "$(cat "$state/known-good/secrets/u.secrets.yaml")" = "api-key: old" ]
  [ -x "$state/known-good/helpers/wait-gpus-free" ]
  grep -q '"port":31000' "$state/known-good/generation.json"
  grep -q '"modelName":"m"' "$state/known-good/proved.json"
  [ ! -e "$state/last-good.service" ] && [ ! -e "$state/last-good.secrets" ]
  # Nothing to adopt: nothing changes.
  adopt_last_good
  [ "$(gen_list | paste -sd' ')" = "1" ]
}

@test "generations: a rename carries the known-good to the new name's folder, renamed, with its port and secrets" {
  staged good kgood
  printf '[Unit]\nDescription=SGLang u (stack s)\n[Service]\nSyslogIdentifier=u\nExecStart=/x --config %s/u.secrets.yaml\n' "$secrets_dir" > "$stage/unit.service"
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  echo "{\"stack\":\"s\",\"config\":\"$secrets_dir/u.secrets.yaml\"}" > "$state/generations/1/proved.json"
  set_link known-good 1
  run carry_generation v
  [ "$status" = 0 ]
  [[ "$output" == "kept the previous configuration (stack s, unit "*") as the known-good of v, the unit's new name (its generation 1 there)"* ]]
  local to=$state_root/v
  [ "$(gen_of known-good "$to")" = 1 ]
  grep -qx 'Description=SGLang v (stack s)' "$to/known-good/unit.service"
  grep -qx 'SyslogIdentifier=v' "$to/known-good/unit.service"
  grep -q "$secrets_dir/v.secrets.yaml" "$to/known-good/unit.service"
  grep -q "$secrets_dir/v.secrets.yaml" "$to/known-good/proved.json"
  [ "$(cat "$to/known-good/secrets/v.secrets.yaml")" = "api-key: kgood" ]
  grep -q '"unit":"v","port":30000,"unitHash":"'"$(hash_of "$to/known-good/unit.service")"'"' "$to/known-good/generation.json"
  grep -q '"renamedFrom":"u","renamedFromGeneration":1}' "$to/known-good/generation.json"
  # A name that has a known-good of its own keeps it.
  echo changed > "$state/generations/1/unit.service"
  carry_generation v
  ! grep -q changed "$to/known-good/unit.service" || false
}

@test "generations: a removal takes every generation and link with it" {
  staged one k1
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  set_link current 1
  set_link known-good 1
  remove_generations "$state"
  [ ! -e "$state/generations" ] && [ ! -L "$state/current" ] && [ ! -L "$state/known-good" ]
  drop_new_secrets
  [ -z "$(secret_files_of u)" ]
}

@test "generations: good makes the current generation the known-good, with its proof, and prints its number" {
  fake_unit active
  staged one k1
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  install_unit "$state/generations/1"
  install_secrets
  run main good deadbeef <<< '{"stack":"s"}'
  [ "$status" = 0 ]
  [[ "$output" == *"@@generation 1"* ]]
  [ "$(gen_of known-good)" = 1 ]
  [ "$(cat "$state/generations/1/proved.json")" = '{"stack":"s"}' ]
}

@test "generations: good after an upgrade: the adopted record that serves becomes current; a hand-installed unit gets a generation of its own" {
  fake_unit active
  mkdir -p "$helper_dir"
  printf '[Service]\n# old\n' > "$state/last-good.service"
  cp "$state/last-good.service" "$live"
  echo '{"stack":"s"}' > "$state/last-good.json"
  run main good deadbeef <<< '{"stack":"s"}'
  [ "$status" = 0 ]
  [[ "$output" == *"@@generation 1"* ]]
  [ "$(gen_of current)" = 1 ] && [ "$(gen_of known-good)" = 1 ]
  printf '[Service]\n# by hand\n' > "$live"
  run main good deadbeef <<< '{"stack":"s"}'
  [[ "$output" == *"@@generation 2"* ]]
  grep -q '"madeFrom":"live"' "$state/generations/2/generation.json"
  [ "$(gen_of current)" = 2 ] && [ "$(gen_of known-good)" = 2 ]
}

@test "generations: a destroy that finds the unit another stack's removes this stack's generations, not what runs or the known-good" {
  local n
  for n in 1 2 3; do staged "c$n" "k$n"; make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"; done
  stack=other
  staged c4 k4
  make_generation "$stage/unit.service" "$stage/helpers" ".dflash-new"
  set_link known-good 2
  set_link current 4
  stack=s
  drop_stack_generations
  [ "$(gen_list | paste -sd' ')" = "4 2" ]
}

@test "generations: an earlier version's record without secrets is adopted with the live ones (what it ran with)" {
  printf '[Service]\n# old\n' > "$state/last-good.service"
  echo "api-key: live" > "$secrets_dir/u.secrets.yaml"
  mkdir -p "$helper_dir"
  adopt_last_good
  [ "$(cat "$state/known-good/secrets/u.secrets.yaml")" = "api-key: live" ]
}
