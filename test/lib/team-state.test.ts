// Team state in PostgreSQL, for real: a throwaway PostgreSQL server set up as the README's
// "For a team" says, and two operators sharing it: two workspaces with the same
// PULUMI_BACKEND_URL and passphrase, running two checkouts of the project at different
// paths, acting on the same stacks and the same simulated host.
// - Pulumi's stack lock is a row in the shared table: a second `up` of a stack being
//   updated is refused, naming the holder;
// - two stacks of one host, one per operator, take turns on the host's own lock;
// - the second operator's `stack output`, `refresh` and resumed sweep see the first one's
//   results, and its no-op `up` from another checkout changes nothing (state names no
//   checkout: before, it recorded each checkout's path, and refresh or destroy failed once
//   the recording checkout was gone);
// - a lock left by a killed `pulumi` (started by the project's wrapper, which records it) is
//   cleared by the next operation on this machine.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import * as hosts from "../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../lib/workspace";
import { Checkout, copyWorkingTree } from "../../lib/checkout";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { stackLocks, staleLocks, StackLock } from "../../lib/stale-locks";
import { runSweep, sweepBackend } from "../../components/sweep/sweep";
import { startPostgres, ThrowawayPostgres } from "../support/postgres";
import { hostShell } from "../support/hostShell";
import { storedResultOfOutputs } from "../../components/benchmark/compare";
import { killSession } from "../support/killSession";

const NAME = `team-state-${process.pid}`;
const UNIT = "sglang-k26";
const PROJECT = "dflash-sglang";
/** Shared out of band, as a team would. */
const PASSPHRASE = `team-passphrase-${process.pid}`;
/** The database user's password; `:` and `@` exercise the URL's encoding. */
const DB_PASSWORD = `db:secret@${process.pid}`;
const TINY_BENCHMARK = { runs: 1, warmupRuns: 0, maxTokens: 32, longContextTokens: [], concurrency: [1], coding: false };

let pg: ThrowawayPostgres | undefined;
let host: hosts.HostInfo;
let second: Checkout | undefined;
let backendUrl: string;
/** The first operator, in this checkout. */
let op1: SimWorkspace | undefined;
/** The second operator, in a copy of this checkout elsewhere. */
let op2: SimWorkspace | undefined;

const { sh, mainPid } = hostShell(() => host, UNIT);
const serving = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`));
const config = (stack: string, benchmark: Record<string, unknown> = { enabled: false }) => ({
  ...readRepoStackConfig(stack),
  ...simHostConfig(host, UNIT),
  "dflash-sglang:safety": { stableSeconds: 1 },
  "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
  "dflash-sglang:benchmark": benchmark,
});
const stacks = () => ({ alpha: config("b8t4-w2048", TINY_BENCHMARK), beta: config("b16t4-w2048"), gamma: config("b4t4-w2048") });

const locksOf = (stack: string): StackLock[] => {
  const reading = stackLocks(backendUrl, PROJECT);
  assert.ok("locks" in reading, `the backend's locks could not be read: ${JSON.stringify(reading)}`);
  return reading.locks.filter((l) => l.stack === stack);
};

async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  for (const start = Date.now(); !check(); await new Promise((r) => setTimeout(r, 50))) {
    assert.ok(Date.now() - start < timeoutMs, `timed out after ${timeoutMs / 1000} s waiting until ${what}`);
  }
}

const stackFileOf = (ws: SimWorkspace, stack: string) => YAML.parse(fs.readFileSync(path.join(ws.dir, "stacks", `Pulumi.${stack}.yaml`), "utf8"));

before(async () => {
  pg = await startPostgres(NAME);
  // What the README tells a team to run once (as the postgres user).
  pg.sql(`CREATE ROLE pulumi LOGIN PASSWORD '${DB_PASSWORD}'`);
  pg.sql("CREATE DATABASE pulumi OWNER pulumi");
  backendUrl = pg.url("pulumi", DB_PASSWORD, "pulumi");
  host = await hosts.start(NAME, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  second = copyWorkingTree();
  op1 = simWorkspace(stacks(), { backendUrl, passphrase: PASSPHRASE });
  op2 = simWorkspace(stacks(), { backendUrl, passphrase: PASSPHRASE, projectRoot: second.root });
});

after(async () => {
  const steps: Array<() => unknown> = [() => hosts.stop(NAME), () => op1?.cleanup(), () => op2?.cleanup(), () => second?.remove(), () => pg?.stop()];
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      process.stderr.write(`team-state clean-up: ${(e as Error).message}\n`);
    }
  }
});

test("one state: while the first operator's up holds a stack, the second one's up of it is refused, naming the holder", async () => {
  const first = (await op1!.stack("alpha")).up();
  // Pulumi's lock: a row of the backend's table, written before the program runs.
  await until("the first up holds alpha's lock", () => locksOf("alpha").length > 0);
  const [held] = locksOf("alpha");
  const refused = await (await op2!.stack("alpha")).up().then(
    () => null,
    (e: Error) => e.message,
  );
  assert.notEqual(refused, null, "the second up of a locked stack must not run");
  assert.match(refused!, /the stack is currently locked by 1 lock\(s\)/);
  assert.ok(refused!.includes(`created by ${os.userInfo().username}@${os.hostname()} (pid ${held.pid})`), `the holder is named:\n${refused!.slice(-1500)}`);
  assert.ok(!refused!.includes(DB_PASSWORD) && !refused!.includes(encodeURIComponent(DB_PASSWORD)), "the database password is not shown");
  const up = await first;
  assert.equal(up.summary.result, "succeeded", "the first up was not disturbed");
  assert.ok((storedResultOfOutputs(up.outputs)?.short.output_throughput ?? 0) > 0, "alpha was benchmarked");
  assert.deepEqual(locksOf("alpha"), [], "the lock is released");
});

test("the second operator sees the first one's results: stack output, refresh, and a resumed sweep skips what was measured", async () => {
  const mine = await (await op1!.stack("alpha")).outputs();
  const theirs = await (await op2!.stack("alpha")).outputs();
  assert.deepEqual(storedResultOfOutputs(theirs), storedResultOfOutputs(mine));
  assert.equal(theirs.unitHash.value, mine.unitHash.value);
  assert.equal(theirs.benchmarkResultsPath.value, "bench/out/alpha.jsonl", "relative to the project folder of whoever measured");

  const pid = await mainPid();
  const refresh = await (await op2!.stack("alpha")).refresh();
  assert.equal(refresh.summary.result, "succeeded");
  assert.deepEqual(Object.keys(refresh.summary.resourceChanges ?? {}), ["same"], JSON.stringify(refresh.summary.resourceChanges));
  assert.equal(await mainPid(), pid, "refresh changed nothing on the host");

  // The second operator's sweep on real hosts (as from --hosts): its stacks are the team's.
  const sweepWs = simWorkspace({}, { backendUrl: sweepBackend(true, backendUrl), passphrase: PASSPHRASE, projectRoot: second!.root });
  try {
    const lines: string[] = [];
    const outcomes = await runSweep({
      ws: sweepWs,
      stacks: { alpha: stacks().alpha },
      hosts: [{ name: "gpu-1", config: simHostConfig(host, UNIT) }],
      resume: true,
      keepGoing: false,
      progress: (h, line) => lines.push(`[${h}] ${line}`),
      shouldStop: () => false,
    });
    assert.deepEqual(outcomes.map((o) => [o.stack, o.status]), [["alpha", "skipped: already measured"]], lines.join("\n"));
    assert.equal(outcomes[0].decodeTokensPerS, (storedResultOfOutputs(mine)?.short as { decode_tokens_per_s?: number } | undefined)?.decode_tokens_per_s);
  } finally {
    sweepWs.cleanup();
  }
  assert.equal(await mainPid(), pid, "the sweep restarted nothing");
});

test("a no-op up by the second operator, from a checkout at another path, changes nothing, nor does the first one's after it", async () => {
  const pid = await mainPid();
  const theirs = await (await op2!.stack("alpha")).up();
  assert.deepEqual(Object.keys(theirs.summary.resourceChanges ?? {}), ["same"], JSON.stringify(theirs.summary.resourceChanges));
  const mine = await (await op1!.stack("alpha")).up();
  assert.deepEqual(Object.keys(mine.summary.resourceChanges ?? {}), ["same"], JSON.stringify(mine.summary.resourceChanges));
  assert.equal(await mainPid(), pid, "nothing restarted");
  // What resources record names no checkout, so nobody's path ends up in the diff.
  const checkouts = [REPO_ROOT, second!.root, fs.realpathSync(path.join(REPO_ROOT, "node_modules"))];
  for (const r of (await (await op1!.stack("alpha")).exportStack()).deployment.resources as Array<{ urn: string; inputs?: unknown; outputs?: unknown }>) {
    const recorded = JSON.stringify({ inputs: r.inputs, outputs: r.outputs });
    for (const checkout of checkouts) assert.ok(!recorded.includes(checkout), `${r.urn} records ${checkout}`);
  }
  // The second operator's stack file lacked the secrets settings (as a clone does before
  // they are committed): it took the state's, not a salt of its own.
  assert.equal(stackFileOf(op2!, "alpha").encryptionsalt, stackFileOf(op1!, "alpha").encryptionsalt);
});

test("two operators' ups of two stacks of one host, at once, take turns on the host's lock; both succeed and the later one serves", async () => {
  // A longer load keeps the first one on the host while the other reaches its restart.
  hosts.configure(NAME, JSON.stringify({ loadSeconds: 5 }));
  try {
    const [beta, gamma] = [await op1!.stack("beta"), await op2!.stack("gamma")];
    let betaOut = "";
    let gammaOut = "";
    const [b, g] = await Promise.all([beta.up({ onOutput: (s) => (betaOut += s) }), gamma.up({ onOutput: (s) => (gammaOut += s) })]);
    assert.equal(b.summary.result, "succeeded");
    assert.equal(g.summary.result, "succeeded");
    const waited = (out: string, holder: string) => new RegExp(`waiting for stack "${holder}" \\(unit ${UNIT}, .*\\) to finish with this host`).test(out);
    const gammaWaited = waited(gammaOut, "beta");
    const betaWaited = waited(betaOut, "gamma");
    assert.ok(gammaWaited !== betaWaited, `exactly one waited for the other (gamma for beta: ${gammaWaited}, beta for gamma: ${betaWaited})`);
    const [last, budget] = gammaWaited ? ["gamma", 4] : ["beta", 16];
    assert.equal((await serving()).speculative_ddtree_budget, budget, `${last}, the later one, serves`);
    assert.equal(await sh(`grep '^X-DFlash-Stack=' /etc/systemd/system/${UNIT}.service`), `X-DFlash-Stack=${last}`);
  } finally {
    hosts.configure(NAME, JSON.stringify({ loadSeconds: 2 }));
  }
});


test("a lock left by a killed pulumi is cleared by the next operation on this machine", async () => {
  // A real `npx pulumi refresh` of the second operator (the wrapper, which leaves the owner
  // record that lets this machine prove the lock stale), in a session of its own, killed with
  // its plugins while it holds gamma's lock.
  const refresh = spawn(path.join(REPO_ROOT, "scripts/pulumi.sh"), ["refresh", "--yes", "--skip-preview", "--non-interactive", "--stack", "gamma"], { cwd: op2!.dir, env: op2!.env, detached: true, stdio: "ignore" });
  const exited = new Promise<void>((resolve) => refresh.once("exit", () => resolve()));
  try {
    await until("the refresh holds gamma's lock", () => locksOf("gamma").length > 0);
  } finally {
    killSession(refresh.pid!);
    await exited;
  }
  assert.deepEqual(locksOf("gamma").map((l) => l.pid), [refresh.pid], "the killed refresh left its lock");
  assert.deepEqual(staleLocks(backendUrl, PROJECT).stale.map((l) => [l.stack, l.pid]), [["gamma", refresh.pid]]);
  await op1!.stack("gamma");
  assert.deepEqual(locksOf("gamma"), [], "cleared (pulumi cancel)");
});

test("the checkout that last deployed a stack is gone: refresh and destroy from the other checkout run its own code", async () => {
  // gamma was deployed from the second checkout; its state must not need that checkout.
  second!.remove();
  const gamma = await op1!.stack("gamma");
  const refresh = await gamma.refresh();
  assert.equal(refresh.summary.result, "succeeded");
  const destroy = await gamma.destroy();
  assert.equal(destroy.summary.result, "succeeded");
  assert.equal(await sh(`ls -d /var/lib/dflash-sglang/${UNIT}/stacks/gamma 2>/dev/null || true`), "", "the teardown ran: gamma's staged files are gone");
});
