// The comparison sweeps (bench/adaptive/baselines.ts) driven against generated surfaces by a
// driver shaped like the replay (components/sweep/adaptive/replay.ts: free hosts ask for a
// launch with what has finished): they never pass their budget, never launch what a failed
// launch ruled out, answer with a configuration that worked, and successive halving launches
// its survivors again.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { GridPoint, gridPoints } from "../../components/sweep/adaptive/space";
import { drawPass, fullGridSeconds, ReplayCosts, ReplayEntry } from "../../components/sweep/adaptive/replay";
import { LaunchRecord, PassKind, ruledOut, spentSeconds } from "../../components/sweep/adaptive/strategy";
import { prng } from "../../lib/prng";
import { GRID } from "../../bench/adaptive/grid";
import { drawFamily, toReplayTable } from "../../bench/adaptive/family";
import { ExpectedCosts, fullGrid, halvingPlan, randomSearch, successiveHalving } from "../../bench/adaptive/baselines";
import type { Policy } from "../../components/sweep/adaptive/replay";

const points = gridPoints(GRID);
const COSTS: ReplayCosts = { shortRequests: 3, fullRequests: 6, shortPassSeconds: 6, fullPassSeconds: 18, passOverheadSeconds: 10 };
const EXPECTED: ExpectedCosts = { launchSeconds: 420, shortPassSeconds: 6, fullPassSeconds: 18 };
const surfaces = drawFamily(points, 424242, 40, { requestSd: 0.042, launchSd: 0.015 });

interface Run {
  records: LaunchRecord[];
  /** Per launch, in launch order: what was ruled out when it was decided. */
  ruledOutAtLaunch: { point: string; ruledOut: Set<string> }[];
  answer: ReturnType<Policy["conclude"]>;
}

function drive(policy: Policy, table: Record<string, ReplayEntry>, hosts: number, seed: number): Run {
  const rand = prng(seed);
  const records: LaunchRecord[] = [];
  const ruledOutAtLaunch: Run["ruledOutAtLaunch"] = [];
  const running: { host: number; point: string; at: number }[] = [];
  const free = Array.from({ length: hosts }, (_, host) => ({ host, at: 0 }));
  for (let guard = 0; guard < 1000; guard++) {
    free.sort((a, b) => a.at - b.at || a.host - b.host);
    while (free.length > 0) {
      const d = policy.decide(points, records, running.map((r) => r.point));
      if (d.kind === "stop") break;
      const h = free.shift()!;
      ruledOutAtLaunch.push({ point: d.point, ruledOut: new Set(ruledOut(points, records).keys()) });
      running.push({ host: h.host, point: d.point, at: h.at + table[d.point].launchSeconds });
    }
    if (running.length === 0) return { records, ruledOutAtLaunch, answer: policy.conclude(points, records) };
    running.sort((a, b) => a.at - b.at || a.host - b.host);
    const done = running.shift()!;
    const e = table[done.point];
    const record: LaunchRecord = { point: done.point, host: `h${done.host + 1}`, launchSeconds: e.launchSeconds, passes: [], ...(e.failure ? { failure: e.failure } : {}) };
    records.push(record);
    let at = done.at;
    if (!e.failure) {
      let kind: PassKind | "done" = policy.firstPass(points, records, record);
      while (kind !== "done") {
        const figures = drawPass(rand, e, kind, COSTS);
        const heldSeconds = figures.benchmarkSeconds + (record.passes.length > 0 ? COSTS.passOverheadSeconds : 0);
        record.passes.push({ kind, figures, heldSeconds });
        at += heldSeconds;
        kind = policy.nextPass(points, records, record);
      }
    }
    free.push({ host: done.host, at });
  }
  throw new Error(`${policy.name} did not finish`);
}

const byName = new Map<string, GridPoint>(points.map((p) => [p.name, p]));
const BUDGETS = [2000, 5200, 9000];

function check(run: Run, table: Record<string, ReplayEntry>, budget: number, what: string): void {
  assert.ok(spentSeconds(run.records) <= budget, `${what}: spent ${spentSeconds(run.records)} of ${budget}`);
  for (const l of run.ruledOutAtLaunch) assert.ok(!l.ruledOut.has(l.point), `${what}: launched ${l.point}, ruled out by an earlier OOM`);
  const worked = new Set(run.records.filter((r) => !r.failure).map((r) => r.point));
  if (worked.size === 0) return assert.equal(run.answer.chosen, undefined, what);
  assert.ok(run.answer.chosen && worked.has(run.answer.chosen) && !table[run.answer.chosen].failure, `${what}: chose ${run.answer.chosen}`);
  assert.equal(run.answer.tied[0], run.answer.chosen, what);
  for (const t of run.answer.tied) assert.ok(worked.has(t), `${what}: tied ${t}`);
}

test("random search: distinct random configurations, one full pass each, within the budget; its answer worked", () => {
  let oomLaunched = 0;
  for (const [i, s] of surfaces.entries()) {
    const table = toReplayTable(s, 420);
    for (const budget of BUDGETS) {
      for (const hosts of [1, 2]) {
        const run = drive(randomSearch({ budgetSeconds: budget, seed: i, costs: EXPECTED }), table, hosts, i);
        const what = `surface ${s.seed}, budget ${budget}, ${hosts} hosts`;
        check(run, table, budget, what);
        assert.equal(new Set(run.records.map((r) => r.point)).size, run.records.length, `${what}: distinct`);
        for (const r of run.records) assert.deepEqual(r.passes.map((p) => p.kind), r.failure ? [] : ["full"], what);
        // It stops only when one more launch (at the expected cost) might not fit, or nothing is left.
        const left = points.filter((p) => !run.records.some((r) => r.point === p.name) && !ruledOut(points, run.records).has(p.name));
        if (left.length > 0) assert.ok(spentSeconds(run.records) + 438 > budget - 438 * (hosts - 1), `${what}: stopped early at ${spentSeconds(run.records)}`);
        oomLaunched += run.records.filter((r) => r.failure).length;
      }
    }
  }
  assert.ok(oomLaunched > 0, "random search cannot know where memory runs out before it launches there");
  // Another seed, another order.
  const table = toReplayTable(surfaces[0], 420);
  const order = (seed: number) => drive(randomSearch({ budgetSeconds: 5200, seed, costs: EXPECTED }), table, 1, 1).records.map((r) => r.point);
  assert.deepEqual(order(3), order(3));
  assert.notDeepEqual(order(3), order(4));
});

test("the successive-halving plan: the most configurations in rung 0 such that every rung fits the budget", () => {
  // 9 x (420 + 6) + 3 x (420 + 18) = 5148 s; 10 in rung 0 would need 5574 s.
  assert.deepEqual(halvingPlan(38, 5200, EXPECTED, 3), { rungs: [9, 3], expectedSeconds: 5148 });
  assert.deepEqual(halvingPlan(38, 9000, EXPECTED, 3).rungs, [15, 5]);
  assert.deepEqual(halvingPlan(38, 30000, EXPECTED, 3).rungs, [38, 12, 4]);
  assert.deepEqual(halvingPlan(38, 30000, EXPECTED, 2).rungs.slice(0, 3), [36, 18, 9]);
  assert.deepEqual(halvingPlan(38, 100, EXPECTED, 3).rungs, [1], "a budget under one launch still plans one (the budget check then refuses it)");
});

test("successive halving: rung 0 short passes, the top third launched again with a full pass, the answer from the last rung; within the budget", () => {
  let relaunched = 0;
  for (const [i, s] of surfaces.entries()) {
    const table = toReplayTable(s, 420);
    for (const budget of BUDGETS) {
      for (const hosts of [1, 2]) {
        const run = drive(successiveHalving({ budgetSeconds: budget, seed: i, costs: EXPECTED }), table, hosts, i);
        const what = `surface ${s.seed}, budget ${budget}, ${hosts} hosts`;
        check(run, table, budget, what);
        const plan = halvingPlan(points.length, budget, EXPECTED, 3);
        const first = run.records.filter((r, k) => !run.records.slice(0, k).some((q) => q.point === r.point));
        const again = run.records.filter((r) => !first.includes(r));
        assert.ok(first.length <= plan.rungs[0], what);
        for (const r of first) assert.deepEqual(r.passes.map((p) => p.kind), r.failure ? [] : ["short"], what);
        for (const r of again) assert.deepEqual(r.passes.map((p) => p.kind), ["full"], what);
        if (plan.rungs.length < 2) continue;
        // Rung 1: the top of rung 0 by its short passes, launched again (a new launch, not a second pass).
        const worked = first.filter((r) => !r.failure).sort((a, b) => b.passes[0].figures.short.median - a.passes[0].figures.short.median);
        const rung1 = worked.slice(0, plan.rungs[1]).map((r) => r.point).sort();
        const launchedTwice = [...new Set(again.map((r) => r.point))].filter((p) => run.records.filter((r) => r.point === p).length >= 2).sort();
        assert.deepEqual(launchedTwice, rung1, what);
        // Nothing launched again before rung 0 had finished.
        const firstAgain = run.records.indexOf(again[0]);
        if (firstAgain >= 0) assert.ok(first.every((r) => run.records.indexOf(r) < firstAgain), `${what}: rung 1 before rung 0 finished`);
        // The answer: the configurations launched most, the highest mean of their launches.
        const most = Math.max(...run.records.map((r) => run.records.filter((q) => q.point === r.point).length));
        if (most > 1) assert.equal(run.records.filter((r) => r.point === run.answer.chosen).length, most, what);
        relaunched += launchedTwice.length;
      }
    }
  }
  assert.ok(relaunched > 0);
});

test("the full grid: every configuration once, one full pass, at the full grid's cost; the highest measured median", () => {
  for (const [i, s] of surfaces.slice(0, 10).entries()) {
    const table = toReplayTable(s, 420);
    const run = drive(fullGrid(), table, 2, i);
    assert.deepEqual(run.records.map((r) => r.point).sort(), points.map((p) => p.name).sort());
    assert.equal(spentSeconds(run.records), fullGridSeconds(table, COSTS));
    const top = run.records.filter((r) => !r.failure).sort((a, b) => b.passes[0].figures.short.median - a.passes[0].figures.short.median)[0];
    assert.equal(run.answer.chosen, top.point);
  }
});

test("the answers' tie sets follow the decision rule: within noise a tie, far apart a lone best", () => {
  const pass = (median: number) => ({ kind: "full" as const, heldSeconds: 18, figures: { short: { median, min: median * 0.96, max: median * 1.04, requests: 6 }, long: null, acceptLength: null, codingPassed: true, benchmarkSeconds: 18 } });
  const rec = (point: string, median: number): LaunchRecord => ({ point, host: "h1", launchSeconds: 420, passes: [pass(median)] });
  const policy = fullGrid();
  assert.deepEqual(policy.conclude(points, [rec("b8t4-w2048", 200), rec("b12t4-w2048", 201), rec("b4t2-w2048", 150)]), { chosen: "b12t4-w2048", tied: ["b12t4-w2048", "b8t4-w2048"] });
  assert.deepEqual(policy.conclude(points, [rec("b8t4-w2048", 200), rec("b12t4-w2048", 250)]), { chosen: "b12t4-w2048", tied: ["b12t4-w2048"] });
  assert.deepEqual(policy.conclude(points, [{ point: "b32t8-wnone", host: "h1", launchSeconds: 210, passes: [], failure: { cause: "OOM", outOfMemory: true } }]), { tied: [] });
  assert.ok(byName.size === points.length);
});

test("budgets and settings are checked", () => {
  assert.throws(() => randomSearch({ budgetSeconds: 0, seed: 1, costs: EXPECTED }), /randomSearch: budgetSeconds must be positive, got 0/);
  assert.throws(() => successiveHalving({ budgetSeconds: 5000, seed: 1, costs: EXPECTED, eta: 1 }), /eta must be a whole number >= 2, got 1/);
  assert.throws(() => successiveHalving({ budgetSeconds: 5000, seed: 1, costs: { ...EXPECTED, launchSeconds: -1 } }), /costs.launchSeconds must be a number >= 0, got -1/);
});
