// The sweep's confidence calibration (components/sweep/adaptive/calibration.ts), pure: the
// logistic fit, the mapping, and the fit in use.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { calibrate, CALIBRATION, logisticFit } from "../../../../components/sweep/adaptive/calibration";
import fitted from "../../../../components/sweep/adaptive/calibration.json";
import { prng } from "../../../../lib/prng";

test("the logistic fit recovers the law the runs were drawn from", () => {
  // Hits drawn from confidence = logistic(0.3 + 0.5 logit(chance)), at chances spread over (0.5, 1).
  const rand = prng(11);
  const truth = { intercept: 0.3, slope: 0.5 };
  const runs = Array.from({ length: 20000 }, () => {
    const chance = 0.5 + 0.499 * rand();
    return { chance, hit: rand() < calibrate(chance, truth) };
  });
  const fit = logisticFit(runs);
  assert.ok(Math.abs(fit.intercept - 0.3) < 0.1 && Math.abs(fit.slope - 0.5) < 0.1, JSON.stringify(fit));
});

test("a chance that says nothing fits as a flat rate: the slope goes to zero, the level to the hit rate", () => {
  const runs = Array.from({ length: 400 }, (_, i) => ({ chance: 0.6 + (0.39 * (i % 20)) / 19, hit: Math.floor(i / 20) % 4 !== 0 }));
  const fit = logisticFit(runs);
  assert.ok(Math.abs(fit.slope) < 1e-6, String(fit.slope));
  assert.ok(Math.abs(calibrate(0.7, fit) - 0.75) < 1e-6 && Math.abs(calibrate(0.99, fit) - 0.75) < 1e-6);
});

test("a fit is refused where it cannot be made: too few runs, all hits, one chance for all, or chances that split hits from misses", () => {
  assert.throws(() => logisticFit([{ chance: 0.9, hit: true }, { chance: 0.8, hit: false }]), /at least ten runs/);
  assert.throws(() => logisticFit(Array.from({ length: 20 }, () => ({ chance: 0.9, hit: true }))), /some hits and some misses/);
  assert.throws(() => logisticFit(Array.from({ length: 20 }, (_, i) => ({ chance: 1, hit: i % 2 === 0 }))), /do not vary/);
  assert.throws(() => logisticFit(Array.from({ length: 20 }, (_, i) => ({ chance: 0.5 + i / 40, hit: i >= 10 }))), /no fit/);
});

test("the mapping rises with the chance, and a chance of 0 or 1 is no certainty", () => {
  const fit = { intercept: 0.2, slope: 0.4 };
  const values = [0, 0.3, 0.6, 0.9, 1].map((c) => calibrate(c, fit));
  for (let i = 1; i < values.length; i++) assert.ok(values[i] > values[i - 1], values.join(", "));
  assert.ok(values[0] > 0 && values[4] < 1);
  assert.equal(calibrate(0.5, { intercept: 0, slope: 1 }), 0.5);
});

test("below the lowest chance the fit saw, a chance maps in proportion: a sweep cut short is not lifted toward the base rate", () => {
  const fit = { intercept: 1, slope: 0.3, lowestChance: 0.6 };
  const atLow = calibrate(0.6, fit);
  assert.ok(Math.abs(calibrate(0.3, fit) - atLow / 2) < 1e-12);
  assert.equal(calibrate(0, fit), 0);
  assert.ok(calibrate(0.3, { intercept: 1, slope: 0.3 }) > 0.6, "without the floor the line lifts it (what the floor is for)");
  const fitted = logisticFit(Array.from({ length: 40 }, (_, i) => ({ chance: 0.5 + i / 100, hit: i % 3 !== 0 })));
  assert.equal(fitted.lowestChance, 0.5);
});

test("the fit in use was written by its bench from several training families, and rises with the chance", () => {
  const f = fitted as { command: string; family: { seeds: number[]; surfaces: number }; runs: number; hits: number };
  assert.match(f.command, /^npx tsx bench\/adaptive-calibrate\.ts/);
  assert.ok(f.family.seeds.length >= 2 && f.runs === f.family.seeds.length * f.family.surfaces && f.runs >= 1000, JSON.stringify(f.family));
  assert.ok(CALIBRATION.slope > 0, JSON.stringify(CALIBRATION));
  const rate = f.hits / f.runs;
  assert.ok(calibrate(0.5, CALIBRATION) < rate && calibrate(0.999, CALIBRATION) > rate, "a low chance states less than the training rate, a high one more");
});
