// The host scripts' bash tests (the .bats files here, bats-core from npm) run in `npm test`,
// and they can fail: a drain or rollback branch of components/sglang-service/host/
// transaction.sh changed in a copy makes them fail.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { HOST_DIR } from "../../../../components/sglang-service/hostScript";
import { bats as runBats, mutated as mutatedCopy } from "../../../support/bats";

const FILES = fs.readdirSync(__dirname).filter((f) => f.endsWith(".bats")).sort().map((f) => path.join(__dirname, f));

/** Runs bats on `files` with the host scripts of `hostDir`; TAP output. */
const bats = (files: string[], hostDir = HOST_DIR, filter?: string) => runBats(files, { DFLASH_HOST_DIR: hostDir }, filter);

test("the host scripts' bash tests pass", () => {
  assert.ok(FILES.length >= 2, FILES.join(", "));
  const r = bats(FILES);
  assert.equal(r.code, 0, r.tap);
  assert.match(r.tap, /^1\.\.\d+$/m);
  assert.doesNotMatch(r.tap, /^not ok/m, r.tap);
});

/** The host scripts with `from` replaced by `to` in `name` (once; it must be there). */
const mutated = (name: string, from: string, to: string) => mutatedCopy(HOST_DIR, name, from, to);

/** [what the mutant breaks, the text it replaces, its replacement]: drain mutants face the drain's tests, rollback mutants the rollback's. */
const MUTANTS: [string, string, string][] = [
  ["a kill at the drain deadline cuts nothing", 'killed=1 cut=${remaining:-null}\n      say "the drain did not end', 'killed=1 cut=0\n      say "the drain did not end'],
  ["a peer's abort is not counted", '[ "$killed" = 0 ] && [ "$group_size" -gt 1 ]', '[ "$killed" = 0 ] && [ "$group_size" -gt 9 ]'],
  ["a forced exit is not counted", 'forced=$(journalctl', 'forced=$(true'],
  ["one tokenizer worker's count is read as every worker's", "workers=$(tokenizer_workers)", "workers=1"],
  // Issue 60: the drain's clock, and the journal it reads.
  ["a step of the wall clock ends the drain at once (its clock the wall clock again)", 'now() { local up _; read -r up _ < /proc/uptime && echo "$up"; }', "now() { date +%s.%N; }"],
  ["the drain reads what the server logged before its stop (no cursor)", '[ -n "$cursor" ] && sel+=(--after-cursor "$cursor")', "true"],
  ["the drain's end is read on the wall clock, against a start since boot", "-o short-monotonic --no-pager", "-o short-unix --no-pager"],
  ["the rollback installs the failed unit", 'install_start "$good" || {', 'install_start "$stage/unit.service" || {'],
  ["the rollback chooses the newest generation, not the known-good", "if ! good=$(gen_dir known-good); then", "if ! good=$(gen_dir current); then"],
  ["the rollback keeps the failed configuration's secrets", 'install_gen_secrets "$good" || {', "true || {"],
  ["a rollback to the failed configuration itself is not refused", 'if [ -n "$failed" ] && gen_same "$failed" "$good"; then', "if false; then"],
  ["the rollback refuses a change of a secret alone", 'if [ -n "$failed" ] && gen_same "$failed" "$good"; then', 'if [ -n "$failed" ] && [ "$(hash_of "$failed/unit.service")" = "$(hash_of "$good/unit.service")" ]; then'],
];

/** The same for generations.sh, facing the generations' tests. */
const GENERATION_MUTANTS: [string, string, string][] = [
  ["pruning removes the known-good", '[ "$n" != "${good:-}" ]', '[ "$n" != "none" ]'],
  ["a generation is made without its secrets", '(umask 077; cp -f "$src" "$d.dflash-tmp/secrets/${f##*/}") || return 1', "true"],
  ["a rollback's secrets keep what the failed configuration added", "    else rm -f \"$f\"; fi", "    else true; fi"],
];

for (const [what, from, to] of MUTANTS) {
  test(`a mutant of the transaction fails the bash tests: ${what}`, () => {
    const dir = mutated("transaction.sh", from, to);
    try {
      const r = bats([path.join(__dirname, "transaction.bats")], dir, /rollback/.test(what) ? "^rollback" : "^drain");
      assert.notEqual(r.code, 0, `the mutant (${what}) passed every bash test:\n${r.tap}`);
      assert.match(r.tap, /^not ok/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const [what, from, to] of GENERATION_MUTANTS) {
  test(`a mutant of the generations fails the bash tests: ${what}`, () => {
    const dir = mutated("generations.sh", from, to);
    try {
      const r = bats([path.join(__dirname, "generations.bats")], dir);
      assert.notEqual(r.code, 0, `the mutant (${what}) passed every bash test:\n${r.tap}`);
      assert.match(r.tap, /^not ok/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
