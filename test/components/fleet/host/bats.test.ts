// The balancer steps' bash tests (balancer-step.bats) run in `npm test`, and they can fail: a
// copy of components/fleet/host/ with the minHealthy check, the lock, the wait for HAProxy's
// sessions, the wait for the rejoin's check, the check of HAProxy's answer, the operator's hold, the
// marks or the conflict checks taken out makes them fail.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { bats, mutated } from "../../../support/bats";

const FLEET_HOST_DIR = path.join(__dirname, "..", "..", "..", "..", "components", "fleet", "host");
const FILE = path.join(__dirname, "balancer-step.bats");

test("the balancer steps' bash tests pass", () => {
  const r = bats([FILE], { DFLASH_FLEET_HOST_DIR: FLEET_HOST_DIR });
  assert.equal(r.code, 0, r.tap);
  assert.match(r.tap, /^1\.\.\d+$/m);
  assert.doesNotMatch(r.tap, /^not ok/m, r.tap);
});

/** [what the mutant breaks, the text it replaces, its replacement] in balancer-step.sh. */
const MUTANTS: [string, string, string][] = [
  ["a replica leaves whatever minHealthy says", 'if [ "$count" -lt "$min_healthy" ]; then', "if false; then"],
  ["others are counted without asking them to generate", '        generates "$addr" &', "        true &"],
  ["an agent's down counts as serving where /health_generate passes", "  down*) return 1 ;;", ""],
  ["the agents' answers are not used (each leave waits on /health_generate's 1 s sleep)", '  "up #answered"*) return 0 ;;', ""],
  ["an agent that says nothing definite counts as serving", '  timeout -k 2 "$command_seconds" curl -fsS -o /dev/null -m "$command_seconds" "http://$1/health_generate"', "  true"],
  ["the others' answers are not waited for", 'if wait "${pids[$k]}"; then', "if true; then"],
  ["the leave does not wait for HAProxy's sessions to end", 'if [ "${scur:-x}" = 0 ] && [ "${qcur:-x}" = 0 ]; then', "if true; then"],
  ["the rejoin does not wait for the check to pass", 'if serving "$mine"; then echo "@@joined', 'if true; then echo "@@joined'],
  ["two leaves count and drain at once", 'flock -w "$command_seconds" 9 ||', "true ||"],
  ["an operator's hold is lifted", 'kept_out() { [ "$operator_states" = keep ] && held "$1"; }', "kept_out() { false; }"],
  ["a leave does not mark the replica as taken out by a rollout", "    mark left ||", "    true ||"],
  ["a halted leave leaves the replica drained", 'if [ "$was_serving" = 1 ]; then', "if false; then"],
  ["fleet.drainPolicy halt moves on like cut", 'if [ "$halt_on_open" = yes ]; then', "if false; then"],
  ["fleet.drainPolicy cut waits for the sessions too (two waits in a row)", 'if [ "$halt_on_open" = no ] && [ "${qcur:-x}" = 0 ] && [ -n "$scur" ]; then', "if false; then"],
  ["fleet.drainPolicy cut moves on while HAProxy still queues for the replica", 'if [ "$halt_on_open" = no ] && [ "${qcur:-x}" = 0 ] && [ -n "$scur" ]; then', 'if [ "$halt_on_open" = no ] && [ -n "$scur" ]; then'],
  ["fleet.drainPolicy halt hands open requests over like cut", 'if [ "$halt_on_open" = no ] && [ "${qcur:-x}" = 0 ] && [ -n "$scur" ]; then', 'if [ "${qcur:-x}" = 0 ] && [ -n "$scur" ]; then'],
];

/** The same for balancer-servers.sh. */
const SERVER_MUTANTS: [string, string, string][] = [
  ["HAProxy's refusal of a state change goes unnoticed", '[ -z "${out//[[:space:]]/}" ] ||', "true ||"],
  ["an IPv6 address is not bracketed", 'if (a ~ /:/) a = "[" a "]";', ""],
  ["the configuration's disabled bit counts as maintenance", "[ $((admin & ~4)) = 0 ]", '[ "$admin" = 0 ]'],
  ["a new replica counts as an operator's hold", '[ -e "$state_dir/joined/$name" ] &&', ""],
];

/** The same for balancer-listen.sh. */
const LISTEN_MUTANTS: [string, string, string][] = [
  ["a wildcard listener is not a conflict", "case \"$1\" in 0.0.0.0 | '*' | '::' | '') return 0 ;; esac", ""],
  ["another stack's configuration is not read", 'done < <(awk \'$1 == "bind" { print $2 }\' "$file")', "done < /dev/null"],
];

for (const [file, what, from, to] of [...MUTANTS.map((m) => ["balancer-step.sh", ...m]), ...SERVER_MUTANTS.map((m) => ["balancer-servers.sh", ...m]), ...LISTEN_MUTANTS.map((m) => ["balancer-listen.sh", ...m])]) {
  test(`a mutant of the balancer steps (${file}) fails the bash tests: ${what}`, () => {
    const dir = mutated(FLEET_HOST_DIR, file, from, to);
    try {
      const r = bats([FILE], { DFLASH_FLEET_HOST_DIR: dir });
      assert.notEqual(r.code, 0, `the mutant (${what}) passed every bash test:\n${r.tap}`);
      assert.match(r.tap, /^not ok/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

const AGENT_FILE = path.join(__dirname, "agent.bats");

test("the agent check's bash tests pass", () => {
  const r = bats([AGENT_FILE], { DFLASH_FLEET_HOST_DIR: FLEET_HOST_DIR });
  assert.equal(r.code, 0, r.tap);
  assert.match(r.tap, /^1\.\.\d+$/m);
  assert.doesNotMatch(r.tap, /^not ok/m, r.tap);
});

/** [what the mutant breaks, the text it replaces, its replacement] in agent.sh. */
const AGENT_MUTANTS: [string, string, string][] = [
  ["garbage passes the check", "if LC_ALL=C grep -q $'\\xef\\xbf\\xbd'", "if false && LC_ALL=C grep -q $'\\xef\\xbf\\xbd'"],
  ["an empty answer passes", `if ! grep -qE '"(content|reasoning_content)": ?"[^"]' <<<"$answer"; then`, "if false; then"],
  ["a 5xx passes", '  say "down #the server answered HTTP $status to a generation" ;;', "  say up ;;"],
  ["a probe that got no answer takes the replica out", '[ "$code" = 0 ] || say up', '[ "$code" = 0 ] || say "down #no answer"'],
  ["a reasoning model's answer counts as empty", '"(content|reasoning_content)": ?"[^"]', '"content": ?"[^"]'],
  ["the API key is not sent", '[ -r "$curl_headers" ] && auth=(-H "@$curl_headers")', ""],
];

for (const [what, from, to] of AGENT_MUTANTS) {
  test(`a mutant of the agent check (agent.sh) fails its bash tests: ${what}`, () => {
    const dir = mutated(FLEET_HOST_DIR, "agent.sh", from, to);
    try {
      const r = bats([AGENT_FILE], { DFLASH_FLEET_HOST_DIR: dir });
      assert.notEqual(r.code, 0, `the mutant (${what}) passed every bash test:\n${r.tap}`);
      assert.match(r.tap, /^not ok/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
