// Issue 60: two operators whose machines share a hostname (cloned VMs, containers), one
// PostgreSQL backend, one stack. A stack lock names only a pid and a hostname; the guard
// (scripts/pulumi-guard.ts) used to call the other operator's live lock stale (same hostname,
// pid not alive *here*) and `pulumi cancel` it, and both updates ran at once. Now a lock is
// stale only against an owner record that a pulumi started here left (lib/lock-owners.ts).
// - the wrapper (`npx pulumi`) and the Automation API's engine leave a record of the pulumi
//   they exec: its pid, boot, start ticks;
// - for real, against a throwaway PostgreSQL: two operators are two process trees with
//   records of their own (DFLASH_LOCK_OWNERS_DIR), and, where this machine allows it, each
//   run in a pid namespace of its own (as containers are), so that neither sees the other's
//   pid alive. In every round of `up`s of one stack at most one runs, the other fails on the
//   lock, its guard names the holder and cancels nothing; a killed `up` leaves a lock that
//   the other operator does not clear and its own operator's next guard proves stale and does.
import { after, before, test, TestContext } from "node:test";
import * as assert from "node:assert/strict";
import { ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { backendKey, parseProcStat, readOwnerRecord, renderRecordingEngine, thisMachine } from "../../lib/lock-owners";
import { StackLock, stackLocks } from "../../lib/stale-locks";
import { startPostgres, ThrowawayPostgres } from "../support/postgres";
import { killSession } from "../support/killSession";

const WRAPPER = path.join(REPO_ROOT, "scripts/pulumi.sh");
const NAME = `lock-owners-${process.pid}`;
const PROJECT = "lock-race";
const STACK = "race";
const PASSPHRASE = `lock-race-${process.pid}`;

interface Run {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
  code?: number | null;
}

function start(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, detached = true): Run {
  // Detached: a session of its own, so a kill reaches its plugins too (killSession).
  const child = spawn(file, args, { cwd, env, detached, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const run: Run = { child, out: () => out, exited: undefined as unknown as Promise<number | null> };
  run.exited = new Promise((resolve) => child.on("close", (code) => resolve((run.code = code))));
  if (detached) started.push(run);
  return run;
}
/** Every detached run, for clean-up when a check fails while one still waits on its gate. */
const started: Run[] = [];

async function until(what: string, check: () => boolean, timeoutMs = 90_000): Promise<void> {
  for (const started = Date.now(); !check(); await new Promise((r) => setTimeout(r, 50))) {
    assert.ok(Date.now() - started < timeoutMs, `timed out after ${timeoutMs / 1000} s waiting until ${what}`);
  }
}

test("the wrapper and the Automation API's engine leave a record of the pulumi they exec, under its pid", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lock-owners-"));
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, DFLASH_LOCK_OWNERS_DIR: path.join(dir, "owners") };
    delete env.PULUMI_BACKEND_URL;
    const here = thisMachine();
    const version = start(WRAPPER, ["version"], REPO_ROOT, env);
    assert.equal(await version.exited, 0, version.out());
    const record = readOwnerRecord(path.join(dir, "owners"), version.child.pid!);
    assert.ok(record, `a record of pid ${version.child.pid}: ${fs.readdirSync(path.join(dir, "owners"))}`);
    assert.deepEqual({ ...record, startTicks: 0, startedAt: "" }, { pid: version.child.pid, bootId: here.bootId, pidNs: here.pidNs, startTicks: 0, startedAt: "", hostname: os.hostname(), username: os.userInfo().username, backend: backendKey(`file://${REPO_ROOT}/.pulumi-state`) });
    assert.ok(Math.abs(Date.parse(record.startedAt) - Date.now()) < 120_000, record.startedAt);

    // The engine: a stand-in prints its own stat; the record names the same process.
    const engine = path.join(dir, "an engine's folder", "pulumi");
    fs.mkdirSync(path.dirname(engine));
    fs.writeFileSync(engine, '#!/bin/sh\ncat /proc/$$/stat\nprintf "%s\\n" "$@"\n', { mode: 0o755 });
    for (const ownSession of [false, true]) {
      const wrapper = path.join(dir, "pulumi");
      fs.writeFileSync(wrapper, renderRecordingEngine(engine, { ownSession }), { mode: 0o755 });
      // Not detached: the Automation API spawns it in its own process group, where setsid(1)
      // does not fork.
      const run = start(wrapper, ["up", "--stack", "b16t4 w2048"], dir, { ...env, PULUMI_BACKEND_URL: "postgres://db/x" }, false);
      assert.equal(await run.exited, 0, run.out());
      const [stat, ...args] = run.out().trim().split("\n");
      assert.deepEqual(args, ["up", "--stack", "b16t4 w2048"]);
      const recorded = readOwnerRecord(path.join(dir, "owners"), run.child.pid!);
      assert.equal(recorded?.startTicks, parseProcStat(stat)?.startTicks, "the engine is the recorded process (same pid, same start)");
      assert.equal(recorded?.backend, backendKey("postgres://db/x"));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

let pg: ThrowawayPostgres | undefined;
let project = "";
let backendUrl = "";

before(async () => {
  pg = await startPostgres(NAME);
  pg.sql(`CREATE ROLE pulumi LOGIN PASSWORD '${PASSPHRASE}'`);
  pg.sql("CREATE DATABASE pulumi OWNER pulumi");
  backendUrl = pg.url("pulumi", PASSPHRASE, "pulumi");
  // A program with no resources that holds its update (and the stack's lock) until a gate
  // file appears: the test decides when an update ends, with no sleeps.
  project = fs.mkdtempSync(path.join(os.tmpdir(), "lock-race-"));
  fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(project, "node_modules"));
  fs.writeFileSync(path.join(project, "Pulumi.yaml"), `name: ${PROJECT}\nruntime: nodejs\nmain: index.js\n`);
  fs.writeFileSync(
    path.join(project, "index.js"),
    'const fs = require("fs");\nmodule.exports = async () => {\n  const gate = process.env.LOCK_RACE_GATE;\n  while (gate && !fs.existsSync(gate)) await new Promise((r) => setTimeout(r, 50));\n  return { done: true };\n};\n',
  );
});

after(() => {
  pg?.stop();
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

/** Two operators: records of their own; in a pid namespace of their own, starting from other pids. */
const operators = [
  { name: "op1", burn: 400 },
  { name: "op2", burn: 1200 },
].map((op) => ({ ...op, owners: "" }));

const locks = (): StackLock[] => {
  const reading = stackLocks(backendUrl, PROJECT);
  assert.ok("locks" in reading, JSON.stringify(reading));
  return reading.locks.filter((l) => l.stack === STACK);
};

function envOf(op: (typeof operators)[number], gate: string): NodeJS.ProcessEnv {
  return { ...process.env, PULUMI_BACKEND_URL: backendUrl, PULUMI_CONFIG_PASSPHRASE: PASSPHRASE, DFLASH_LOCK_OWNERS_DIR: op.owners, LOCK_RACE_GATE: gate, DFLASH_LOCAL_OVERLAY: "off" };
}

const UP = ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", STACK];

/** `npx pulumi up` of one operator: in a fresh pid namespace when `isolated`, past `burn` pids. */
function up(op: (typeof operators)[number], gate: string, isolated: boolean): Run {
  if (!isolated) return start(WRAPPER, UP, project, envOf(op, gate));
  const script = `for ((i = 0; i < ${op.burn}; i++)); do (:); done; "$0" "$@"; exit $?`;
  return start("unshare", ["--pid", "--fork", "--mount-proc", "bash", "-c", script, WRAPPER, ...UP], project, envOf(op, gate));
}


const CANCELLED = /running `pulumi cancel`/;
const PROBLEM = /problem deleting the lock/;
const LOCKED = /the stack is currently locked/;

test("operators whose machines share a hostname: never two ups of one stack at once, no lock of the other cancelled; a killed up's lock is cleared by its own operator only", async (t: TestContext) => {
  const isolated = spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"]).status === 0;
  if (!isolated) t.diagnostic("unshare --pid is not allowed here: the operators share a pid namespace (the old rule would not have cancelled their live locks)");
  for (const op of operators) op.owners = fs.mkdtempSync(path.join(os.tmpdir(), `owners-${op.name}-`));
  try {
    const init = spawnSync(WRAPPER, ["stack", "init", STACK], { cwd: project, env: envOf(operators[0], ""), encoding: "utf8" });
    assert.equal(init.status, 0, init.stderr);

    for (let round = 1; round <= 5; round++) {
      const gate = path.join(project, `gate-${round}`);
      const [first, second] = round % 2 ? operators : [...operators].reverse();
      const what = `round ${round}`;
      if (round < 5) {
        // The second starts once the first holds the lock: its guard sees a live lock whose
        // pid it cannot see (another pid namespace) and has no record of.
        const a = up(first, gate, isolated);
        await until(`${what}: ${first.name}'s up holds the lock`, () => {
          assert.equal(a.code, undefined, `${what}: ${first.name}'s up ended: ${a.out()}`);
          return locks().length > 0;
        });
        const [held] = locks();
        const b = up(second, gate, isolated);
        await until(`${what}: ${second.name}'s up ends on the lock`, () => {
          assert.doesNotMatch(b.out(), CANCELLED, `${what}: ${second.name}'s guard cancelled a live lock`);
          return b.code !== undefined;
        });
        assert.notEqual(b.code, 0, `${what}: ${second.name}'s up must not run: ${b.out()}`);
        assert.match(b.out(), LOCKED, b.out());
        assert.doesNotMatch(b.out(), CANCELLED);
        assert.ok(b.out().includes(`pulumi: stack ${STACK} is locked by pulumi pid ${held.pid} on host ${os.hostname()} (user ${held.username}) since `), `${what}: the holder is named: ${b.out()}`);
        assert.match(b.out(), new RegExp(`it may be running on another machine with the same hostname .*; wait for it to finish, or, if you know that process is gone, run \`npx pulumi cancel --stack ${STACK}\``));
        assert.deepEqual(locks(), [held], `${what}: the first one's lock is untouched`);
        fs.writeFileSync(gate, "");
        assert.equal(await a.exited, 0, `${what}: ${first.name}'s up: ${a.out()}`);
        for (const r of [a, b]) assert.doesNotMatch(r.out(), PROBLEM);
      } else {
        // Both at once: whichever takes the lock runs; the other (or both, when each sees the
        // other's lock) fails on it, while the gate keeps the update going.
        const runs = operators.map((op) => up(op, gate, isolated));
        await until(`${what}: an up ends on the lock`, () => runs.some((r) => r.code !== undefined));
        const failed = runs.filter((r) => r.code !== undefined);
        for (const r of failed) {
          assert.notEqual(r.code, 0, `${what}: an up ran while the other one was going: ${r.out()}`);
          assert.match(r.out(), LOCKED, r.out());
        }
        fs.writeFileSync(gate, "");
        const codes = await Promise.all(runs.map((r) => r.exited));
        assert.ok(codes.filter((c) => c === 0).length <= 1, `${what}: at most one succeeded: ${codes}`);
        for (const r of runs) {
          assert.doesNotMatch(r.out(), CANCELLED);
          assert.doesNotMatch(r.out(), PROBLEM);
        }
      }
      assert.deepEqual(locks(), [], `${what}: the lock is released`);
    }

    // A killed up: op1's pulumi (and its plugins) SIGKILLed while it holds the lock.
    const [op1, op2] = operators;
    const closed = path.join(project, "gate-kill");
    const killed = up(op1, closed, false);
    await until("op1's up holds the lock", () => locks().some((l) => l.pid === killed.child.pid));
    killSession(killed.child.pid!);
    await killed.exited;
    const [left] = locks();
    assert.equal(left?.pid, killed.child.pid, "the killed up left its lock");
    const open = path.join(project, "gate-open");
    fs.writeFileSync(open, "");
    // op2 cannot prove it gone: it says who holds it and clears nothing.
    const theirs = up(op2, open, false);
    await theirs.exited;
    assert.notEqual(theirs.code, 0, theirs.out());
    assert.doesNotMatch(theirs.out(), CANCELLED);
    assert.ok(theirs.out().includes(`pulumi: stack ${STACK} is locked by pulumi pid ${left.pid}`), theirs.out());
    assert.deepEqual(locks(), [left]);
    // op1's own next up proves it stale, clears it, and runs.
    const mine = up(op1, open, false);
    assert.equal(await mine.exited, 0, mine.out());
    assert.ok(mine.out().includes(`note: stack ${STACK} was locked by pulumi pid ${left.pid}, which no longer runs (killed?); running \`pulumi cancel\` for it`), mine.out());
    assert.doesNotMatch(mine.out(), PROBLEM);
    assert.deepEqual(locks(), []);
  } finally {
    for (const r of started) if (r.code === undefined) killSession(r.child.pid!);
    for (const op of operators) if (op.owners) fs.rmSync(op.owners, { recursive: true, force: true });
  }
});
