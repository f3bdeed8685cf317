// The sweep's confidence calibration (components/sweep/adaptive/calibration.ts), pure: the
// isotonic fit, its pooling of small blocks, the mapping, and the fitted table in use.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { calibrate, CALIBRATION, isotonicFit } from "../../../../components/sweep/adaptive/calibration";
import fitted from "../../../../components/sweep/adaptive/calibration.json";

test("the isotonic fit is non-decreasing and pools what would go down", () => {
  const runs = [
    ...Array.from({ length: 20 }, (_, i) => ({ chance: 0.8, hit: i < 10 })),
    ...Array.from({ length: 20 }, (_, i) => ({ chance: 0.9, hit: i < 6 })),
    ...Array.from({ length: 20 }, (_, i) => ({ chance: 0.99, hit: i < 18 })),
  ];
  const fit = isotonicFit(runs);
  assert.deepEqual(fit.map((b) => [Math.round(b.chance * 100) / 100, b.hitRate, b.runs]), [[0.85, 0.4, 40], [0.99, 0.9, 20]]);
  for (let i = 1; i < fit.length; i++) assert.ok(fit[i].hitRate >= fit[i - 1].hitRate);
});

test("a block of fewer than ten runs is pooled with a neighbour: one run is no hit rate", () => {
  const runs = [{ chance: 0.5, hit: false }, ...Array.from({ length: 30 }, (_, i) => ({ chance: 0.9, hit: i < 24 }))];
  const fit = isotonicFit(runs);
  assert.equal(fit.length, 1);
  assert.equal(fit[0].runs, 31);
});

test("a chance maps linearly between the blocks, in proportion below the first, flat above the last", () => {
  const blocks = [{ chance: 0.8, hitRate: 0.7, runs: 10 }, { chance: 1, hitRate: 0.9, runs: 10 }];
  assert.ok(Math.abs(calibrate(0.8, blocks) - 0.7) < 1e-12);
  assert.ok(Math.abs(calibrate(0.4, blocks) - 0.35) < 1e-12, "a sweep cut short does not read as the lowest block");
  assert.ok(Math.abs(calibrate(0.9, blocks) - 0.8) < 1e-12);
  assert.equal(calibrate(1, blocks), 0.9);
  assert.equal(calibrate(0.42, []), 0.42, "no fit: the chance as it is");
});

test("the fit in use was written by its bench, from a training family, and is non-decreasing", () => {
  const f = fitted as { command: string; family: { seed: number; surfaces: number }; blocks: unknown[] };
  assert.match(f.command, /^npx tsx bench\/adaptive-calibrate\.ts/);
  assert.ok(f.family.surfaces >= 100, String(f.family.surfaces));
  assert.ok(CALIBRATION.length >= 2);
  for (let i = 1; i < CALIBRATION.length; i++) assert.ok(CALIBRATION[i].hitRate >= CALIBRATION[i - 1].hitRate && CALIBRATION[i].chance > CALIBRATION[i - 1].chance);
  assert.ok(CALIBRATION.every((b) => b.runs >= 10));
});
