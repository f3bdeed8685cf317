// The adaptive sweep's report (components/sweep/adaptive/report.ts): GPU time per host against
// the full grid's estimate, the Pareto front with the chosen configuration marked, and a chart
// that shows both.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { gridPoints } from "../../../../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, LaunchRecord, conclude } from "../../../../components/sweep/adaptive/strategy";
import { fullGridEstimate, gridCostText, offsetVerdict, paretoFront, renderAdaptiveMarkdown, renderAdaptiveSvg } from "../../../../components/sweep/adaptive/report";

const POINTS = gridPoints({ budgets: [4, 8, 16], topks: [2, 4], windows: [2048], compactCache: "auto" });
const STRATEGY = { ...DEFAULT_STRATEGY, objective: { kind: "short" as const, longWeight: 0 }, budget: {}, seed: 1 };
const record = (point: string, host: string, short: number, long: number, accept: number): LaunchRecord => ({
  point,
  host,
  launchSeconds: 400,
  restartSeconds: 390,
  passes: [
    { kind: "short", figures: { short: { median: short, min: short - 1, max: short + 1, requests: 3 }, long: { median: long, min: long - 1, max: long + 1, requests: 3 }, acceptLength: accept, codingPassed: null, benchmarkSeconds: 6 }, heldSeconds: 6 },
    { kind: "full", figures: { short: { median: short, min: short - 1, max: short + 1, requests: 6 }, long: { median: long, min: long - 1, max: long + 1, requests: 6 }, acceptLength: accept, codingPassed: true, benchmarkSeconds: 20 }, heldSeconds: 30 },
  ],
});
const RECORDS = [record("b8t4-w2048", "gpu-1", 190, 170, 7.1), record("b16t4-w2048", "gpu-2", 189, 176, 7.6), record("b4t2-w2048", "gpu-1", 180, 165, 6.5)];
const REPORT = { points: POINTS, records: RECORDS, conclusion: conclude(POINTS, RECORDS, STRATEGY), objective: STRATEGY.objective, longContextTokens: 8192, why: "no configuration left has a 10 % chance to beat b8t4-w2048 by 1 %", resumed: [] };

test("the Pareto front: what nothing else beats on short and long decode rate and acceptance length at once", () => {
  assert.deepEqual(paretoFront(REPORT.conclusion.measured).map((m) => m.point.name), ["b8t4-w2048", "b16t4-w2048"]);
});

test("the full grid's cost is estimated from this run's own launch and full-pass costs", () => {
  assert.equal(fullGridEstimate(POINTS, RECORDS), POINTS.length * (400 + 20));
  assert.equal(fullGridEstimate(POINTS, []), undefined);
});

test("the full grid's estimate prices a configuration that ran out of memory, and every one needing at least its memory, at a failed launch's cost", () => {
  // b4t2 and b8t4 started (400 s + a 20 s full pass); b16t4, never started, ran out of memory (210 s).
  const oom: LaunchRecord = { point: "b16t4-w2048", host: "gpu-2", launchSeconds: 210, failure: { cause: "CUDA out of memory", outOfMemory: true }, passes: [] };
  const records = [RECORDS[0], RECORDS[2], oom];
  // b4t4 and b8t2 need no more memory than b8t4: they start (420 s each); b16t2's tree is b8t4's size: a 90 % chance (0.9 x 420 + 0.1 x 210).
  assert.equal(fullGridEstimate(POINTS, records), 4 * 420 + (0.9 * 420 + 0.1 * 210) + 210);
  assert.match(gridCostText(POINTS, records), /; about 1\.1 of them expected to run out of memory, at 210 s a failed launch\) would cost about 0\.64 h/);
  assert.doesNotMatch(gridCostText(POINTS, RECORDS), /out of memory/);
  // A relaunch that ran out of memory where the configuration started before says nothing of its memory need.
  const flaky: LaunchRecord = { ...oom, launch: 2, point: "b8t4-w2048" };
  assert.equal(fullGridEstimate(POINTS, [...RECORDS, flaky]), POINTS.length * 420);
});

test("the report names the choice in the report's words, the GPU time per host against the full grid, and marks the best (or each of a tie) on the front", () => {
  const md = renderAdaptiveMarkdown(REPORT);
  // 190 against 189 tok/s, one launch each: 0.5 % apart, well within a launch's offset (1.5 %) of each other.
  // The report's words (components/verdict/words.ts): "Tie: ... (inconclusive)", "none is named best".
  assert.match(md, /\*\*Tie: b8t4-w2048, b16t4-w2048 \(inconclusive\)\*\*: the measurements cannot tell them apart, so none is named best\. b8t4-w2048 190\.0 tok\/s \(±[0-9.]+, 1 launch\)/);
  const clear = [record("b8t4-w2048", "gpu-1", 190, 170, 7.1), record("b16t4-w2048", "gpu-2", 150, 176, 7.6)];
  const alone = renderAdaptiveMarkdown({ ...REPORT, records: clear, conclusion: conclude(POINTS, clear, STRATEGY) });
  assert.match(alone, /\*\*Best: b8t4-w2048\*\*, 190\.0 tok\/s \(±[0-9.]+, 1 launch, 9 requests\)\. If you deploy b8t4-w2048: expected regret \(the share of the best configuration's speed, launched or not, it may lack\) [0-9.]+ %, at most [0-9.]+ % with 90 % \(from the measurements, a launch-to-launch offset of 1\.5 % assumed, not measured: no configuration was launched twice/);
  // Issue 62: the per-run "chance within 1 %" separated good answers from bad ones no better than chance; what is stated instead is the regret and, per configuration, its interval and chances.
  assert.doesNotMatch(alone, /Chance that it is within/);
  const row = /\| b8t4-w2048 \| 190\.0 \| ([0-9.]+)-([0-9.]+) \| ([0-9.]+) % \| ([0-9.]+) % \| ([0-9.]+) % \| ([0-9.]+) % \|/.exec(alone);
  assert.ok(row, alone);
  const [low, high, best, within, expected, bound] = row.slice(1).map(Number);
  // Three configurations were never launched: they compete for "the best" (the surrogate's beliefs), so the top's chance is well short of certain.
  assert.ok(low < 190 && high > 190 && best > 0 && best < 100 && within >= best && expected <= bound, row[0]);
  assert.match(md, /\| gpu-1 \| 2 \| 800 \| 72 \| 0\.24 h \|/);
  assert.match(md, /\| gpu-2 \| 1 \| 400 \| 36 \| 0\.12 h \|/);
  assert.ok(md.includes("Measuring the full grid once (each of its 6 configurations launched once and given one full pass, at this run's mean costs: 400 s a launch, 20 s a full pass) would cost about 0.70 h of GPU time. This run cost 0.36 h, 52 % of that: it launched 3 of the 6 configurations (3 launches) and ran 6 passes (3 short, 3 full)."), md);
  // Every configuration of the tie is marked as the report marks it; none is "chosen".
  assert.match(md, /\| b8t4-w2048 \| 190 \| 170 \| 7\.1 \| \*\*tie\*\* \|/);
  assert.match(md, /\| b16t4-w2048 \| 189 \| 176 \| 7\.6 \| \*\*tie\*\* \|/);
  assert.doesNotMatch(md, /chosen|A tie/);
  assert.match(alone, /\| b8t4-w2048 \| 190 \| 170 \| 7\.1 \| \*\*best\*\* \|/);
  assert.match(md, /Stopped: no configuration left has a 10 % chance/);
  const svg = renderAdaptiveSvg(REPORT);
  assert.match(svg, /fill="#d62728"><title>b8t4-w2048: 190 \/ 170 tok\/s/);
  assert.match(svg, />spent<\/text>/);
  assert.match(svg, />full grid<\/text>/);
});

// Issue 63: "this run spent 442 % of the full grid" said neither what the full grid is nor why a
// run could cost more than it. It is this run's GPU time over that of launching every
// configuration once with one full pass, at the run's own mean costs: more where full passes
// are repeated on one server, a configuration is launched again, and short passes screen.
test("the GPU time against the full grid says what each is, as a share or a multiple, and what the run spent it on", () => {
  const points = gridPoints({ budgets: [4, 8], topks: [4], windows: [2048], compactCache: "auto" });
  const launch = (point: string, fulls: number): LaunchRecord => ({
    point,
    host: "gpu-1",
    launchSeconds: 20,
    passes: [
      { kind: "short", figures: { short: { median: 100, min: 99, max: 101, requests: 3 }, long: null, acceptLength: 6, codingPassed: null, benchmarkSeconds: 6 }, heldSeconds: 6 },
      ...Array.from({ length: fulls }, () => ({ kind: "full" as const, figures: { short: { median: 100, min: 99, max: 101, requests: 6 }, long: null, acceptLength: 6, codingPassed: true, benchmarkSeconds: 30 }, heldSeconds: 30 })),
    ],
  });
  // 20 + 6 + 6 x 30, and twice 20 + 6 + 30: 318 s against 2 x (20 + 30) = 100 s.
  assert.equal(
    gridCostText(points, [launch("b4t4-w2048", 6), launch("b8t4-w2048", 1), launch("b8t4-w2048", 1)]),
    "Measuring the full grid once (each of its 2 configurations launched once and given one full pass, at this run's mean costs: 20 s a launch, 30 s a full pass) would cost about 0.03 h of GPU time. " +
      "This run cost 0.09 h, 3.2 times that: it launched 2 of the 2 configurations (3 launches, 1 of them of a configuration launched before) and ran 11 passes (3 short, 8 full, 5 repeats of a full pass on the same server).",
  );
  assert.equal(gridCostText(points, [{ ...launch("b4t4-w2048", 0), passes: [] }]), "No full pass finished: no estimate of what measuring the full grid once would cost.");
});

test("with relaunches, the report says what they measured of the launch offset beside the one it assumes, and marks each relaunch", () => {
  // b8t4 launched three times, 190, 184 and 196 tok/s: about 3 % apart, twice the 1.5 % assumed; with 2 degrees of freedom that is already beyond chance (chi-square, p about 0.01).
  const records = [...RECORDS, { ...record("b8t4-w2048", "gpu-2", 184, 170, 7.1), launch: 2 }, { ...record("b8t4-w2048", "gpu-1", 196, 170, 7.1), launch: 3 }];
  const md = renderAdaptiveMarkdown({ ...REPORT, records, conclusion: conclude(POINTS, records, STRATEGY) });
  assert.match(md, /a launch-to-launch offset of 1\.5 % assumed; the relaunches of 1 configuration measured 3\.[0-9] % \(2 degrees of freedom: above the assumption: these figures are too sure\)/);
  // Two launches 1 % apart: one degree of freedom says nothing either way.
  const two = [...RECORDS, { ...record("b8t4-w2048", "gpu-2", 188, 170, 7.1), launch: 2 }];
  assert.match(renderAdaptiveMarkdown({ ...REPORT, records: two, conclusion: conclude(POINTS, two, STRATEGY) }), /measured [0-9.]+ % \(1 degree of freedom: too few to tell much\)/);
  assert.equal(offsetVerdict(0.015, 0.015, 10), "in line with the assumption or below it");
  assert.equal(offsetVerdict(0.02, 0.015, 3), "too few to tell much");
  assert.match(md, /\| b8t4-w2048 \(launch 3\) \| gpu-1 \|/);
  assert.doesNotMatch(md, /not measured: no configuration was launched twice/);
  // Six degrees of freedom at about 5 %: enough to say the assumption was too low.
  const values = [190, 180, 200, 181, 199, 185, 195];
  const many = [...RECORDS.slice(1), ...values.map((v, k) => ({ ...record("b8t4-w2048", "gpu-1", v, 170, 7.1), ...(k > 0 ? { launch: k + 1 } : {}) }))];
  assert.match(renderAdaptiveMarkdown({ ...REPORT, records: many, conclusion: conclude(POINTS, many, STRATEGY) }), /measured [4-6]\.[0-9] % \(6 degrees of freedom: above the assumption: these figures are too sure\)/);
});

test("the report names what it left unlaunched where a peak can hide, says so when nothing was, and when nothing was assessed", () => {
  const left = renderAdaptiveMarkdown({ ...REPORT, conclusion: { ...REPORT.conclusion, unlaunched: [{ point: "b8t2-w2048", upper: 0.93 }, { point: "b16t2-w2048", upper: 0.87 }] } });
  assert.match(left, /Not launched, where a peak narrower than a grid step could hide \(each likely to lie in the surface's upper half, by the surrogate\): b8t2-w2048 \(93 %\), b16t2-w2048 \(87 %\)\. The figures above do not count such a peak/);
  const none = renderAdaptiveMarkdown({ ...REPORT, conclusion: { ...REPORT.conclusion, unlaunched: [] } });
  assert.match(none, /Not launched: no configuration likely to lie in the surface's upper half \(by the surrogate\) was left unlaunched/);
  assert.doesNotMatch(none, /could hide \(each/);
  const unknown = renderAdaptiveMarkdown({ ...REPORT, conclusion: { ...REPORT.conclusion, unlaunched: [{ point: "b8t2-w2048", upper: null }] } });
  assert.match(unknown, /Not launched, and not assessed \(no configuration was measured in full, so the surrogate says nothing of them\): b8t2-w2048\. Any of them could be the best/);
  // The conclusion itself: this run launched three of the grid; what it names was not launched.
  for (const u of REPORT.conclusion.unlaunched) assert.ok(!RECORDS.some((r) => r.point === u.point), u.point);
});
