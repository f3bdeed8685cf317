// The feasibility bound (bench/adaptive/feasibility.ts), pure: the generator's probe moves the
// isolated peak and changes nothing else; maximum coverage is exact; the bound is a share.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { gridPoints } from "../../components/sweep/adaptive/space";
import { GRID } from "../../bench/adaptive/grid";
import { drawFamily, generateSurface, IsolatedDraw } from "../../bench/adaptive/family";
import { coverSets, launchesAt, maxCoverage, measurementSd, noisyOracle, possibleCentres, surfaceBounds, tiered } from "../../bench/adaptive/feasibility";

const points = gridPoints(GRID);
const family = drawFamily(points, 20261203, 120);

test("the probe sees the isolated peak's draw; its own index gives the same surface, another index moves only the peak", () => {
  let seen = 0;
  for (const s of family) {
    let d: IsolatedDraw | undefined;
    assert.deepEqual(generateSurface(points, s.seed, {}, { isolated: (x) => (d = x) }), s);
    if (!d) continue;
    seen++;
    assert.ok(d.candidates.includes(d.point));
    assert.deepEqual(generateSurface(points, s.seed, {}, { centreIndex: d.drawnIndex }), s);
    const other = (d.drawnIndex + 1) % d.candidates.length;
    let e: IsolatedDraw | undefined;
    const moved = generateSurface(points, s.seed, {}, { centreIndex: other, isolated: (x) => (e = x) });
    assert.deepEqual(e!.before, d.before);
    assert.equal(e!.sigma, d.sigma);
    assert.equal(e!.point, d.candidates[other]);
    assert.equal(moved.requestSd, s.requestSd);
    assert.deepEqual(Object.keys(moved.truth), Object.keys(s.truth));
  }
  assert.ok(seen >= 15, `${seen} isolated peaks`);
  assert.throws(() => generateSurface(points, family.find((s) => s.features.includes("isolated-peak"))!.seed, {}, { centreIndex: 99 }), /not an index/);
});

test("maximum coverage is exact where greedy is not", () => {
  // Greedy takes the 4-set {1, 2, 3, 4} first and then covers 5 with two; {0, 1, 2} and {3, 4, 5} cover 6.
  const sets = [0b011110, 0b000111, 0b111000];
  assert.equal(maxCoverage(sets, 2), 6);
  assert.equal(maxCoverage(sets, 0), 0);
  assert.equal(maxCoverage(sets, 1), 4);
  assert.equal(maxCoverage([1, 2, 4, 8], 3), 3);
  assert.equal(maxCoverage([1, 2, 4, 8], 10), 4);
});

test("the bound per surface rises with launches to 1, and the tiers never lower it", () => {
  const bs = family.flatMap((s) => [...(surfaceBounds(points, s, {}, "needle", [1, 0.01])?.values() ?? [])].map((b) => ({ ...b, family: 0 })));
  assert.ok(bs.length > 0);
  for (const b of bs) {
    for (let m = 1; m < b.bound.length; m++) assert.ok(b.bound[m] >= b.bound[m - 1]);
    assert.equal(b.bound[b.bound.length - 1], 1);
    assert.ok(b.centres <= b.candidates);
  }
  const mean = (xs: number[]) => xs.reduce((t, x) => t + x, 0) / xs.length;
  const at35 = mean(bs.map((b) => b.bound[launchesAt(0.35, b.fullGridSeconds)]));
  assert.ok(tiered(bs, 0.35, 0.45) >= at35 - 1e-12);
  assert.equal(launchesAt(0.35, 38 * 438), 13);
});

test("the noisy oracle, measuring almost without noise, finds at least what its launches cover; with noise it is a share", () => {
  let checked = 0;
  for (const s of family) {
    const p = possibleCentres(points, s, {}, "needle");
    if (!p || checked >= 4) continue;
    checked++;
    const m = 6;
    const blind = maxCoverage(coverSets(p, 1), m) / p.centres.length;
    const quiet = noisyOracle(p, m, { requestSd: 1e-6, launchSd: 1e-6 }, 1e-3, 3, 1);
    assert.ok(quiet >= blind - 1e-12, `${s.seed}: ${quiet} < ${blind}`);
    const loud = noisyOracle(p, m, { requestSd: 0.042, launchSd: 0.015 }, measurementSd({ requestSd: 0.042, launchSd: 0.015 }, 2000, 1), 5, 1);
    assert.ok(loud >= 0 && loud <= 1);
  }
  assert.ok(checked > 0);
  const spread = measurementSd({ requestSd: 0.042, launchSd: 0.015 }, 20000, 62);
  assert.ok(spread > 0.015 && spread < 0.04, `${spread}`);
});
