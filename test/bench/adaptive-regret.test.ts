// Issue 62: a sweep is scored by what a user deploys, its answer's top, by regret; beside it the
// full grid, paired surface by surface with bootstrap intervals; the stated figures checked by
// rank (AUC, Spearman). The scoring's own arithmetic, on cases worked by hand.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { auc, pairedDifferences, quantile, regretOf, regretStats } from "../../bench/adaptive/regret";
import { spearman } from "../../bench/adaptive/regret-report";

const truth = new Map([["a", 200], ["b", 194], ["c", 150]]);

test("regret: what deploying the top loses against the true best; no answer loses everything", () => {
  assert.equal(regretOf("a", truth), 0);
  assert.equal(regretOf("b", truth).toFixed(3), "0.030");
  assert.equal(regretOf("c", truth), 0.25);
  assert.equal(regretOf(undefined, truth), 1);
  assert.equal(regretOf("not-in-the-grid", truth), 1);
});

test("the figures of a sample: mean, 95th percentile, shares within 3 % and 1 % (3 % itself counts)", () => {
  const s = regretStats([0, 0, 0.01, 0.03, 0.25]);
  assert.equal(s.meanRegret.toFixed(3), "0.058");
  assert.deepEqual([s.within3, s.within1], [0.8, 0.6]);
  assert.equal(quantile([0, 1, 2, 3, 4], 0.95).toFixed(2), "3.80");
  assert.equal(s.p95Regret.toFixed(3), quantile([0, 0, 0.01, 0.03, 0.25], 0.95).toFixed(3));
});

test("paired differences: the same surfaces' regrets subtracted, with an interval that holds the point", () => {
  const grid = Array.from({ length: 200 }, (_, i) => (i % 10 === 0 ? 0.02 : 0));
  const sweep = grid.map((g, i) => g + (i % 20 === 0 ? 0.04 : 0));
  const d = pairedDifferences(sweep, grid, 7);
  assert.equal(d.meanRegret.point.toFixed(4), "0.0020");
  assert.ok(d.meanRegret.low <= d.meanRegret.point && d.meanRegret.point <= d.meanRegret.high);
  assert.ok(d.meanRegret.low > 0, "the sweep is worse on 10 of 200 and never better: the interval excludes 0");
  assert.equal(d.within3.point.toFixed(4), "-0.0500", "10 of 200 surfaces fall from 2 % to 6 %");
  const same = pairedDifferences(grid, grid, 7);
  assert.deepEqual([same.meanRegret.low, same.meanRegret.high, same.within3.low, same.within3.high], [0, 0, 0, 0], "a sweep against itself differs by nothing");
  assert.throws(() => pairedDifferences([0], [0, 0], 1), /the same surfaces/);
  assert.deepEqual(pairedDifferences(sweep, grid, 7), d, "seeded");
});

test("AUC and Spearman: 1 for a perfect order, 0.5 / 0 for none, ties counted half", () => {
  assert.equal(auc([{ score: 0.9, positive: true }, { score: 0.1, positive: false }]), 1);
  assert.equal(auc([{ score: 0.5, positive: true }, { score: 0.5, positive: false }]), 0.5);
  assert.equal(auc([{ score: 0.1, positive: true }, { score: 0.9, positive: false }]), 0);
  assert.ok(Number.isNaN(auc([{ score: 1, positive: true }])));
  assert.equal(spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1);
  assert.equal(spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1);
  assert.ok(Math.abs(spearman([1, 2, 3, 4], [1, 1, 2, 2]) - 0.894) < 0.001, "ties get their average rank");
});
