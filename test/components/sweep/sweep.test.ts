// Sweeps over several simulated hosts at once, through the real engine.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { failureCause, recordedElsewhere, runSweep, SweepHost, SweepOutcome } from "../../../components/sweep/sweep";
import { collectRows } from "../../../scripts/report";
import { renderMarkdown } from "../../../components/benchmark/report";
import { storedResultOfOutputs } from "../../../components/benchmark/compare";

const NAMES = [`sweep-a-${process.pid}`, `sweep-b-${process.pid}`];
const STACKS = ["b8t4-w2048", "b16t4-w2048", "b4t4-w2048", "b12t6-w2048"];
const TINY_BENCHMARK = { runs: 1, warmupRuns: 0, maxTokens: 32, longContextTokens: [], concurrency: [1], coding: false };
let sweepHosts: SweepHost[];
let ws: SimWorkspace;

const stacks = () =>
  Object.fromEntries(STACKS.map((s) => [s, { ...readRepoStackConfig(s), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": TINY_BENCHMARK }]));

async function sweep(opts: { resume: boolean; stopAfter?: number }): Promise<{ outcomes: SweepOutcome[]; lines: string[] }> {
  const lines: string[] = [];
  let finished = 0;
  const outcomes = await runSweep({
    ws,
    stacks: stacks(),
    hosts: sweepHosts,
    resume: opts.resume,
    keepGoing: true,
    progress: (host, line) => {
      lines.push(`[${host}] ${line}`);
      if (/: (done|FAILED)/.test(line)) finished++;
    },
    shouldStop: () => opts.stopAfter !== undefined && finished >= opts.stopAfter,
  });
  return { outcomes, lines };
}

const statusOf = (outcomes: SweepOutcome[]) => Object.fromEntries(outcomes.map((o) => [o.stack, o.status]));

before(async () => {
  sweepHosts = [];
  for (const name of NAMES) {
    const h = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
    // The budget-12 configuration crashes on load, on every host.
    hosts.fault(name, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 } }));
    sweepHosts.push({ name, config: simHostConfig(h) });
  }
  ws = simWorkspace({});
});

after(async () => {
  for (const name of NAMES) await hosts.stop(name);
  ws?.cleanup();
});

test("an interrupted sweep stops starting new configurations and says what did not run", async () => {
  const { outcomes } = await sweep({ resume: false, stopAfter: 1 });
  const st = statusOf(outcomes);
  const done = Object.values(st).filter((s) => s === "succeeded" || s === "failed").length;
  // Each of the 2 hosts was busy with one configuration when the stop came; both finished.
  assert.ok(done >= 1 && done <= 2, JSON.stringify(st));
  assert.ok(Object.values(st).includes("not run"), JSON.stringify(st));
});

test("resuming runs the rest over both hosts, records the crash with its cause, and goes on", async () => {
  const { outcomes, lines } = await sweep({ resume: true });
  const st = statusOf(outcomes);
  assert.equal(st["b12t6-w2048"], "failed");
  assert.match(outcomes.find((o) => o.stack === "b12t6-w2048")!.cause!, /CUDA out of memory on GPU 3/);
  for (const s of ["b8t4-w2048", "b16t4-w2048", "b4t4-w2048"]) assert.ok(st[s] === "succeeded" || st[s] === "skipped: already measured", `${s}: ${st[s]}`);
  assert.ok(Object.values(st).includes("skipped: already measured"), "the configuration finished before the interruption was not redone");
  assert.deepEqual(new Set(outcomes.filter((o) => o.status !== "skipped: already measured" && o.host).map((o) => o.host)), new Set(NAMES), "both hosts worked");
  assert.ok(lines.some((l) => l.startsWith(`[${NAMES[0]}]`)) && lines.some((l) => l.startsWith(`[${NAMES[1]}]`)), "a progress line per host");
  const md = renderMarkdown(await collectRows(ws.dir, ws.env, "b*"));
  // The best is bold, or the rows the rule cannot separate tie; each row names its host.
  for (const s of ["b8t4-w2048", "b16t4-w2048", "b4t4-w2048"]) assert.match(md, new RegExp(`\\| (\\*\\*)?${s}(\\*\\* \\(best\\)| \\(tie\\))? \\| DDTREE[^|]* \\| [\\d.]+ \\([\\d.]+-[\\d.]+\\) \\|.* \\| 127\\.0\\.0\\.\\d+ \\|`));
});

test("a second resume redoes only what failed", async () => {
  for (const name of NAMES) hosts.fault(name, "{}");
  const { outcomes } = await sweep({ resume: true });
  assert.deepEqual(statusOf(outcomes), {
    "b12t6-w2048": "succeeded",
    "b16t4-w2048": "skipped: already measured",
    "b4t4-w2048": "skipped: already measured",
    "b8t4-w2048": "skipped: already measured",
  });
});

// Found by running `npm run sweep` twice: the second run's simulated hosts are new ones, and
// a stack that lands on another address than last time was replaced on the node, whose old
// half (the teardown) tried the earlier run's host: "cannot reach root@127.0.0.11:22".
test("on fresh simulated hosts, a stack whose state is for an earlier run's host (gone) starts afresh", async () => {
  const stack = "b8t4-w2048";
  const recorded = ws.stackConfig(stack)["dflash-sglang:host"] as { address: string };
  const gone = sweepHosts.find((h) => (h.config["dflash-sglang:host"] as { address: string }).address === recorded.address)!;
  // This run's host boots while the old one still runs, so it gets another address; then the old one goes.
  const name = `sweep-c-${process.pid}`;
  const fresh = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  try {
    await hosts.stop(gone.name);
    assert.notEqual(fresh.address, recorded.address);
    const lines: string[] = [];
    const outcomes = await runSweep({
      ws,
      stacks: { [stack]: stacks()[stack] },
      hosts: [{ name, config: simHostConfig(fresh) }],
      resume: false,
      keepGoing: true,
      hostsAreFresh: true,
      progress: (host, line) => lines.push(`[${host}] ${line}`),
      shouldStop: () => false,
    });
    assert.deepEqual(outcomes.map((o) => [o.stack, o.status, o.cause]), [[stack, "succeeded", undefined]], lines.join("\n"));
    assert.ok(lines.includes(`[${name}] ${stack}: its state is for a simulated host of an earlier run (${recorded.address}:22), which is gone; starting it afresh`), lines.join("\n"));
    assert.ok(storedResultOfOutputs(await (await ws.stack(stack)).outputs()), "measured on this run's host");
    assert.equal((ws.stackConfig(stack)["dflash-sglang:host"] as { address: string }).address, fresh.address);
  } finally {
    await hosts.stop(name);
  }
});

test("a stack's recorded host is elsewhere unless one of the hosts has its address, port and host key", () => {
  const host = (address: string, hostKey: string, port?: number): SweepHost => ({ name: address, config: { "dflash-sglang:host": { address, hostKey, ...(port ? { port } : {}) } } });
  const recorded = host("127.0.0.11", "ssh-ed25519 AAAA1").config;
  assert.equal(recordedElsewhere(recorded, [host("127.0.0.11", "ssh-ed25519 AAAA1", 22)]), undefined);
  assert.deepEqual(recordedElsewhere(recorded, [host("127.0.0.11", "ssh-ed25519 AAAA2")]), { address: "127.0.0.11", port: 22 });
  assert.deepEqual(recordedElsewhere(recorded, [host("127.0.0.10", "ssh-ed25519 AAAA1")]), { address: "127.0.0.11", port: 22 });
  assert.equal(recordedElsewhere({}, [host("127.0.0.10", "k")]), undefined, "a stack never deployed has nothing to forget");
});

test("failure causes are the line that says what went wrong", () => {
  const msg = "code: -2\n stderr: Command failed\nDiagnostics:\n  pulumi:pulumi:Stack (x):\n    error: update failed\n  pulumi-nodejs:dynamic:Resource (sglang-rollout):\n    error: sglang sglang-k26 (stack x) on 127.0.0.10 failed while loading weights after 1 s: CUDA out of memory on GPU 3\n";
  assert.equal(failureCause(msg), "sglang sglang-k26 (stack x) on 127.0.0.10 failed while loading weights after 1 s: CUDA out of memory on GPU 3");
  // A host-side script's failure arrives inside the command provider's error.
  const cmd = `Diagnostics:\n  command:remote:Command (sglang-restart):\n    error: Process exited with status 1: running "bash '/var/lib/dflash-sglang/u/stacks/x/transaction.sh' restart 0f":\n    sglang-k26 (stack x): stopping: SGLang is draining\n    FAILED: GPU memory on h was not released within 5 s after the old server exited (GPU 0: 900 MiB used; timeouts.gpuReleaseSeconds).\n`;
  assert.equal(failureCause(cmd), "GPU memory on h was not released within 5 s after the old server exited (GPU 0: 900 MiB used; timeouts.gpuReleaseSeconds).");
  const pre = `  command:remote:Command (sglang-unit):\n    error: Process exited with status 1: running "bash -s # stage u for stack x":\n    Preflight failed for u (stack x) on h; nothing was stopped or changed, the current server is untouched:\n      - model.path /m does not exist on the host.\n`;
  assert.match(failureCause(pre), /^Preflight failed for u \(stack x\) on h;/);
});
