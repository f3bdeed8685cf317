// The adaptive sweep's report (components/sweep/adaptive/report.ts): GPU time per host against
// the full grid's estimate, the Pareto front with the chosen configuration marked, and a chart
// that shows both.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { gridPoints } from "../../../../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, LaunchRecord, conclude } from "../../../../components/sweep/adaptive/strategy";
import { fullGridEstimate, paretoFront, renderAdaptiveMarkdown, renderAdaptiveSvg } from "../../../../components/sweep/adaptive/report";

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

test("the report names the choice, the GPU time per host against the full grid, and marks the chosen one on the front", () => {
  const md = renderAdaptiveMarkdown(REPORT);
  // 190 against 189 tok/s, one launch each: 0.5 % apart, well within a launch's offset (1.5 %) of each other.
  assert.match(md, /\*\*A tie: b8t4-w2048, b16t4-w2048\*\*: the measurements cannot tell them apart\. b8t4-w2048 190\.0 tok\/s \(±[0-9.]+, 1 launch\)/);
  const clear = [record("b8t4-w2048", "gpu-1", 190, 170, 7.1), record("b16t4-w2048", "gpu-2", 150, 176, 7.6)];
  const alone = renderAdaptiveMarkdown({ ...REPORT, records: clear, conclusion: conclude(POINTS, clear, STRATEGY) });
  assert.match(alone, /\*\*Best: b8t4-w2048\*\*, 190\.0 tok\/s \(±[0-9.]+, 1 launch, 9 requests\)\. Chance that it is within 1 % of the best configuration, launched or not: [0-9.]+ %/);
  assert.match(md, /\| gpu-1 \| 2 \| 800 \| 72 \| 0\.24 h \|/);
  assert.match(md, /\| gpu-2 \| 1 \| 400 \| 36 \| 0\.12 h \|/);
  assert.match(md, /The full grid would have cost about 0\.70 h \(6 launches and full passes at this run's mean costs\): this run spent 52 % of it\./);
  assert.match(md, /\| b8t4-w2048 \| 190 \| 170 \| 7\.1 \| \*\*chosen\*\* \|/);
  assert.match(md, /Stopped: no configuration left has a 10 % chance/);
  const svg = renderAdaptiveSvg(REPORT);
  assert.match(svg, /fill="#d62728"><title>b8t4-w2048: 190 \/ 170 tok\/s/);
  assert.match(svg, />spent<\/text>/);
  assert.match(svg, />full grid<\/text>/);
});
