// The adaptive sweep's runner (components/sweep/adaptive/run.ts) against a stand-in workspace
// whose `up` answers as a stack on a simulated host would (restart timings, a benchmark output of
// the pass's settings): further passes change only the benchmark settings and launch nothing;
// an interrupted sweep resumed from its journal, or from the stacks' outputs where the journal
// lost a line, launches no configuration twice; a failed launch is a data point. The engine
// and the hosts themselves: test/components/sweep/sweep.test.ts runs the same `up`s for real.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { SimWorkspace } from "../../../../lib/workspace";
import { gridPoints, speculativeOf } from "../../../../components/sweep/adaptive/space";
import { DEFAULT_PASSES, isLocked, isOutOfMemory, journalKey, launchSecondsOf, launchStack, readJournal, runAdaptive, AdaptiveRunOptions } from "../../../../components/sweep/adaptive/run";
import { DEFAULT_STRATEGY, initialDesign, StrategyOptions } from "../../../../components/sweep/adaptive/strategy";
import { resultOf } from "../../../support/benchmarkResults";

const POINTS = gridPoints({ budgets: [4, 8, 12, 16, 24], topks: [2, 4], windows: [2048, "none"], compactCache: "auto" });
const STRATEGY: StrategyOptions = { ...DEFAULT_STRATEGY, initialLaunches: 4, objective: { kind: "short", longWeight: 0 }, budget: {}, seed: 1 };
/** A smooth surface with its top at b12t4, and an out-of-memory corner. */
const rate = (budget: number, topk: number) => 190 - 6 * (Math.log2(budget) - Math.log2(12)) ** 2 - 4 * (topk === 4 ? 0 : 1);
const OOM = new Set(["b24t4-wnone"]);

/** A workspace whose stacks answer as deployed ones would; counts the launches (an `up` that changes the speculative block). */
function standIn(dir: string, locked: Map<string, number> = new Map(), failing: (stack: string) => boolean = () => false) {
  const configs = new Map<string, Record<string, unknown>>();
  const outputs = new Map<string, Record<string, { value: unknown }>>();
  const deployed = new Map<string, string>();
  const launches: string[] = [];
  const ups: { stack: string; runId: string }[] = [];
  const ws: SimWorkspace = {
    dir,
    env: {},
    stackConfig: (name) => configs.get(name) ?? {},
    setStackConfig: (name, key, value) => configs.set(name, { ...(configs.get(name) ?? {}), [`dflash-sglang:${key}`]: value }),
    async removeStack(name) {
      configs.delete(name);
      outputs.delete(name);
    },
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
    async stack(name) {
      return {
        outputs: async () => outputs.get(name) ?? {},
        up: async () => {
          // Another engine holds this stack's lock for its next `locked` attempts.
          const left = locked.get(name) ?? 0;
          if (left > 0) {
            locked.set(name, left - 1);
            throw new Error("error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.");
          }
          const c = configs.get(name)!;
          const spec = JSON.stringify(c["dflash-sglang:speculative"]);
          // A relaunch's stack (run.ts launchStack) holds the same configuration as the point's own.
          const point = POINTS.find((x) => JSON.stringify(speculativeOf(x)) === spec)!;
          const bench = c["dflash-sglang:benchmark"] as { runId: string; coding: boolean; runs: number };
          ups.push({ stack: name, runId: bench.runId });
          if (failing(name)) {
            launches.push(name);
            throw new Error("error: update failed\nssh: connect to host 127.0.0.10 port 22: Connection refused");
          }
          if (deployed.get(name) !== spec) {
            launches.push(name);
            deployed.set(name, spec);
            if (OOM.has(point.name)) throw new Error("error: update failed\nsglang on 127.0.0.10 exited during weight load: Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 4.00 GiB");
          }
          const p = point;
          const out = {
            restartTimings: { value: { drainSeconds: 1, stopSeconds: 1, gpuReleaseSeconds: 2, loadToReadySeconds: 20, requestsCut: 0 } },
            benchmark: { value: resultOf({ decode: rate(p.budget, p.topk), spread: 1, long: { 8192: rate(p.budget, p.topk) - 10 }, coding: bench.coding ? [5, 5] : null, accept: 7 }) },
          };
          outputs.set(name, out);
          return { outputs: out } as never;
        },
      } as never;
    },
  };
  return { ws, launches, ups };
}

const run = (ws: SimWorkspace, extra: Partial<AdaptiveRunOptions> = {}) =>
  runAdaptive({ ws, points: POINTS, mode: "adaptive", strategy: STRATEGY, passes: DEFAULT_PASSES, longContextTokens: 8192, base: {}, hosts: [{ name: "h1", config: {} }, { name: "h2", config: {} }], resume: false, keepGoing: true, hostsAreFresh: false, progress: () => {}, shouldStop: () => false, ...extra });

test("passes after the first change only the benchmark's runId: one launch per configuration", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-run-"));
  const { ws, launches, ups } = standIn(dir);
  try {
    const result = await run(ws);
    assert.equal(new Set(launches).size, launches.length, "no configuration launched twice");
    assert.ok(launches.length < POINTS.length, `${launches.length} of ${POINTS.length} launched`);
    assert.ok(ups.some((u) => u.runId === "full-1") && ups.some((u) => u.runId === "short-1"));
    assert.match(result.why, /no configuration left has a \d+ % chance/);
    const record = result.records.find((r) => r.passes.length > 1)!;
    assert.equal(record.restartSeconds, 24, "the restart timings of the launch");
    assert.ok(result.records.some((r) => r.failure?.outOfMemory) || !launches.includes("b24t4-wnone"));
  } finally {
    ws.cleanup();
  }
});

test("killed after a few launches and resumed, it launches none of them again, even one its journal lost", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-resume-"));
  const { ws, launches } = standIn(dir);
  try {
    const first = await run(ws, { shouldStop: () => launches.length >= 5 });
    const before = [...launches];
    assert.ok(before.length >= 5);
    // The kill came between an `up` and its journal line: the last line is gone.
    const journal = path.join(dir, "adaptive-journal.jsonl");
    const lines = fs.readFileSync(journal, "utf8").split("\n").filter(Boolean);
    const lost = (JSON.parse(lines[lines.length - 1]) as { point: string }).point;
    fs.writeFileSync(journal, lines.filter((l) => !l.includes(`"point":"${lost}"`)).join("\n") + "\n");
    const second = await run(ws, { resume: true });
    const again = launches.slice(before.length);
    assert.deepEqual(again.filter((p) => before.includes(p)), [], `launched again: ${again.join(", ")}`);
    assert.ok(second.resumed.includes(lost), `${lost} taken from its stack's outputs`);
    assert.equal(second.resumed.length, new Set(first.records.map((r) => r.point)).size);
    assert.match(second.why, /no configuration left/);
  } finally {
    ws.cleanup();
  }
});

test("with relaunches, a tie is launched again as a stack of its own, measured in full at once; the journal keeps every launch, and a resume repeats none", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-relaunch-"));
  const { ws, launches, ups } = standIn(dir);
  // b12t4-w2048 and b12t4-wnone measure alike (the stand-in's rate ignores the window): a tie only launches can separate.
  const strategy = { ...STRATEGY, relaunches: 2 };
  try {
    const lines: string[] = [];
    const result = await run(ws, { strategy, progress: (_h, l) => lines.push(l) });
    const again = result.records.filter((r) => (r.launch ?? 1) > 1);
    assert.equal(again.length, 2, `two relaunches:\n${lines.join("\n")}`);
    for (const r of again) {
      const stack = launchStack(r.point, r.launch);
      assert.equal(stack, `${r.point}-launch-${r.launch}`);
      assert.ok(launches.includes(stack), `${stack} was an \`up\` that launched a server`);
      assert.equal(r.passes[0].kind, "full", "a relaunch is measured in full at once");
      assert.ok(ups.some((u) => u.stack === stack && u.runId === "full-1"));
      assert.ok(lines.some((l) => l.includes(`${r.point}: launch (launch ${r.launch} of ${r.point}`) && l.includes(`as stack ${stack}`)), lines.join("\n"));
    }
    const journal = readJournal(path.join(dir, "adaptive-journal.jsonl"), journalKey(POINTS, "adaptive", strategy, DEFAULT_PASSES, 8192));
    assert.equal(journal.length, result.records.length, "one journal entry per launch, relaunches included");
    const before = launches.length;
    const resumed = await run(ws, { strategy, resume: true });
    assert.equal(launches.length, before, `resumed, it launched: ${launches.slice(before).join(", ")}`);
    assert.equal(resumed.records.length, result.records.length);
  } finally {
    ws.cleanup();
  }
});

test("a relaunch that fails counts against the relaunches: the sweep stops, and says which launch it was", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-relaunch-fail-"));
  const { ws, launches } = standIn(dir, new Map(), (stack) => stack.includes("-launch-"));
  try {
    const lines: string[] = [];
    // The budget only bounds the test should relaunches that fail go uncounted (they were, once: without end).
    const result = await run(ws, { strategy: { ...STRATEGY, relaunches: 2, budget: { launches: 40 } }, progress: (_h, l) => lines.push(l) });
    const failed = result.records.filter((r) => (r.launch ?? 1) > 1);
    assert.equal(failed.length, 2, `two relaunches, both failed, then it stopped:\n${lines.join("\n")}`);
    assert.ok(failed.every((r) => r.failure && !r.failure.outOfMemory));
    assert.equal(launches.filter((l) => l.includes("-launch-")).length, 2);
    for (const r of failed) assert.ok(lines.some((l) => l.includes(`: launch (launch ${r.launch} of ${r.point}`) && l.includes(`as stack ${r.point}-launch-${r.launch}`)), lines.join("\n"));
  } finally {
    ws.cleanup();
  }
});

test("a journal of another sweep is refused; a line cut by a kill ends it", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-journal-"));
  try {
    const file = path.join(dir, "j.jsonl");
    const key = journalKey(POINTS, "adaptive", STRATEGY, DEFAULT_PASSES, 8192);
    fs.writeFileSync(file, `${JSON.stringify({ key })}\n${JSON.stringify({ point: "b8t4-w2048", host: "h1", launchSeconds: 30, passes: [] })}\n{"point":"b12t4`);
    assert.deepEqual(readJournal(file, key).map((r) => r.point), ["b8t4-w2048"]);
    const other = journalKey(POINTS, "adaptive", { ...STRATEGY, objective: { kind: "long", longWeight: 1 } }, DEFAULT_PASSES, 8192);
    assert.throws(() => readJournal(file, other), /is the journal of another sweep \(another grid, objective, strategy or benchmark passes\): remove it, or run the same sweep again to resume it/);
    assert.equal(journalKey(POINTS, "adaptive", { ...STRATEGY, budget: { launches: 3 } }, DEFAULT_PASSES, 8192), key, "a new budget resumes the same sweep");
    assert.equal(journalKey(POINTS, "adaptive", { ...STRATEGY, relaunches: 2 }, DEFAULT_PASSES, 8192), key, "so do more relaunches");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("launch time from restart timings; out-of-memory causes in torch's and SGLang's words", () => {
  assert.equal(launchSecondsOf({ drainSeconds: 2, stopSeconds: 1, gpuReleaseSeconds: 5, loadToReadySeconds: 412, requestsCut: null }), 420);
  assert.equal(launchSecondsOf(undefined), 0);
  assert.ok(isOutOfMemory("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"));
  assert.ok(isOutOfMemory("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."));
  assert.ok(!isOutOfMemory("sglang serve: error: unrecognized arguments: --speculative-ddtree-budget"));
});

test("a stack another engine keeps locked (a killed sweep's `up`, still running) is waited for, and never counted as a failure", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-locked-"));
  // The first launch of the first design.
  const first = initialDesign(POINTS, STRATEGY.initialLaunches, STRATEGY.seed)[0].name;
  try {
    // Locked for two attempts: waited for, then launched.
    const waited = standIn(dir, new Map([[first, 2]]));
    const lines: string[] = [];
    const r = await run(waited.ws, { lockPollMs: 10, progress: (_h, l) => lines.push(l), strategy: { ...STRATEGY, budget: { launches: 3 } } });
    assert.ok(lines.some((l) => l.includes(`${first}: its stack is locked by another \`pulumi up\``)), lines.join("\n"));
    assert.ok(r.records.some((x) => x.point === first && !x.failure), "launched once the lock was gone");
    assert.ok(!r.records.some((x) => x.failure), "no failure recorded");
    waited.ws.cleanup();
    // Locked past the wait: not a data point (a later --resume tries it again).
    const dir2 = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-locked-"));
    const stuck = standIn(dir2, new Map([[first, 1_000_000]]));
    const lines2: string[] = [];
    const r2 = await run(stuck.ws, { lockPollMs: 10, lockWaitSeconds: 0.05, progress: (_h, l) => lines2.push(l), strategy: { ...STRATEGY, budget: { launches: 3 } } });
    assert.ok(!r2.records.some((x) => x.point === first), "nothing recorded for it");
    assert.ok(lines2.some((l) => /not launched: its stack is still locked .*not a data point.*pulumi cancel/.test(l)), lines2.join("\n"));
    stuck.ws.cleanup();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(isLocked("the stack is currently locked by 1 lock(s)"), true);
  assert.equal(isLocked("CUDA out of memory"), false);
});
