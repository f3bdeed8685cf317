// The replay's launch-to-launch offset (components/sweep/adaptive/replay.ts, ReplayEntry
// launchSd): one draw per launch, shared by all of its passes, so passes repeated on one launch
// cannot average it away; the model's table (bench/adaptive/model.ts) carries the simulator's.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { gridPoints } from "../../../../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, StrategyOptions } from "../../../../components/sweep/adaptive/strategy";
import { drawLaunchOffset, drawPass, replay, ReplayCosts, ReplayEntry } from "../../../../components/sweep/adaptive/replay";
import { GRID } from "../../../../bench/adaptive/grid";
import { modelTable, readSurface } from "../../../../bench/adaptive/model";
import { parseSurface } from "../../../../simhost/sim/sglang/surface";
import { prng } from "../../../../lib/prng";
import { REPO_ROOT } from "../../../../lib/pulumi-env";

const POINTS = gridPoints(GRID);
const COSTS: ReplayCosts = { shortRequests: 3, fullRequests: 6, shortPassSeconds: 6, fullPassSeconds: 18, passOverheadSeconds: 10 };
const options = (extra: Partial<StrategyOptions> = {}): StrategyOptions => ({ ...DEFAULT_STRATEGY, objective: { kind: "short", longWeight: 0 }, budget: {}, seed: 1, ...extra });
const entry = (mean: number, extra: Partial<ReplayEntry> = {}): ReplayEntry => ({ short: { mean, sd: 0.02 }, long: { mean: mean * 0.8, sd: 0.02 }, acceptLength: 6, codingPassed: true, launchSeconds: 420, ...extra });
const TABLE_OPTIONS = { shortPromptTokens: 128, longContextTokens: 8192, maxTokens: 128, baseNoise: 0.02, launchSeconds: 420 };

test("a launch's offset scales every request of a pass: the same draws, shifted", () => {
  const e = entry(200);
  const plain = drawPass(prng(5), e, "full", COSTS);
  const slow = drawPass(prng(5), e, "full", COSTS, 0.95);
  // Rounded to 0.01 tok/s on both sides.
  for (const k of ["median", "min", "max"] as const) {
    assert.ok(Math.abs(slow.short[k] - plain.short[k] * 0.95) < 0.011, `short ${k}: ${slow.short[k]} against ${plain.short[k]}`);
    assert.ok(Math.abs(slow.long![k] - plain.long![k] * 0.95) < 0.011, `long ${k}`);
  }
  assert.deepEqual(drawPass(prng(5), e, "full", COSTS, 1), plain, "no offset: the pass as before");
});

test("without a launchSd a launch draws nothing; with one, its offsets have that sd over many launches", () => {
  const rand = prng(9);
  assert.equal(drawLaunchOffset(rand, entry(200)), 1);
  assert.equal(drawLaunchOffset(rand, entry(200, { launchSd: 0 })), 1);
  assert.equal(rand(), prng(9)(), "no number was drawn for them");
  const offsets = Array.from({ length: 4000 }, () => drawLaunchOffset(rand, entry(200, { launchSd: 0.015 })));
  const mean = offsets.reduce((a, x) => a + x, 0) / offsets.length;
  const sd = Math.sqrt(offsets.reduce((a, x) => a + (x - mean) ** 2, 0) / (offsets.length - 1));
  // Seeded: the bounds (3 sd of the sample mean; 5 % on the sd, over 4 of its sd) hold or fail for good.
  assert.ok(Math.abs(mean - 1) < 0.0008, `mean ${mean}`);
  assert.ok(Math.abs(sd / 0.015 - 1) < 0.05, `sd ${sd}`);
});

test("replayed, every pass of a launch shares its offset, and each launch draws its own", () => {
  // Almost no per-request noise, so a pass's median is its launch's offset times the mean.
  const table = Object.fromEntries(POINTS.map((p, i) => [p.name, entry(150 + i, { short: { mean: 150 + i, sd: 1e-6 }, long: { mean: 120, sd: 1e-6 }, launchSd: 0.03 })]));
  const ratios: number[] = [];
  for (const seed of [1, 2, 3, 4]) {
    const r = replay(POINTS, table, COSTS, options({ seed }), 2);
    for (const rec of r.records) {
      const offsets = rec.passes.map((p) => p.figures.short.median / table[rec.point].short.mean);
      // Medians are rounded to 0.01 tok/s: 1e-4 of ~150 tok/s.
      for (const o of offsets) assert.ok(Math.abs(o - offsets[0]) < 1e-4, `${rec.point} (seed ${seed}): the passes of one launch read ${offsets}`);
      ratios.push(offsets[0]);
    }
    assert.ok(r.records.some((rec) => rec.passes.length > 1), `seed ${seed}: some launch has several passes`);
  }
  assert.ok(ratios.filter((x) => Math.abs(x - 1) > 0.01).length > ratios.length / 3, `launches are off by their offset: ${ratios.map((x) => x.toFixed(3))}`);
  assert.ok(new Set(ratios.map((x) => x.toFixed(4))).size > ratios.length * 0.9, "each launch draws its own");
});

test("the model's table carries the surface's launch sd, or the one asked for; none without noise", () => {
  const points = POINTS.slice(0, 3);
  const noisy = modelTable(points, readSurface(path.join(REPO_ROOT, "bench", "surfaces", "noisy.json")), TABLE_OPTIONS);
  assert.deepEqual(Object.values(noisy).map((e) => e.launchSd), [0.015, 0.015, 0.015], "noisy.json has noise: the simulator's default 1.5 %");
  const asked = modelTable(points, parseSurface({ noise: { sd: 0.03, seed: 7 } }), { ...TABLE_OPTIONS, launchSd: 0.02 });
  assert.deepEqual(Object.values(asked).map((e) => e.launchSd), [0.02, 0.02, 0.02]);
  const quiet = modelTable(points, readSurface(path.join(REPO_ROOT, "bench", "surfaces", "single-peak.json")), TABLE_OPTIONS);
  assert.ok(Object.values(quiet).every((e) => !("launchSd" in e)), "single-peak.json has no noise: no offset, the replay as before");
});
