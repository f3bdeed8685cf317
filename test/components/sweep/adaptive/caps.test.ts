// The adaptive strategy's optional caps (issue 62 trials; off by default): at most N distinct
// configurations, and no launch past a share of the full grid's GPU time as the records estimate it.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { gridPoints } from "../../../../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, fullGridCosts, StrategyOptions } from "../../../../components/sweep/adaptive/strategy";
import { fullGridSeconds, replay } from "../../../../components/sweep/adaptive/replay";
import { GRID, MODEL_COSTS } from "../../../../bench/adaptive/grid";
import { drawFamily, toReplayTable } from "../../../../bench/adaptive/family";

const POINTS = gridPoints(GRID);
const options = (o: Partial<StrategyOptions>, seed: number): StrategyOptions => ({ ...DEFAULT_STRATEGY, objective: { kind: "short", longWeight: 0.5 }, budget: {}, seed, ...o });
const surfaces = drawFamily(POINTS, 20261207, 12, { requestSd: 0.042, launchSd: 0.015 });

test("with the caps it launches at most N configurations, and stays near the share, cutting what it would spend past it", () => {
  for (const [i, s] of surfaces.entries()) {
    const table = toReplayTable(s, 420);
    const plain = replay(POINTS, table, MODEL_COSTS, options({}, i + 1), 2);
    const capped = replay(POINTS, table, MODEL_COSTS, options({ maxConfigurations: 9 }, i + 1), 2);
    assert.ok(new Set(capped.records.map((r) => r.point)).size <= 9);
    const shared = replay(POINTS, table, MODEL_COSTS, options({ maxShare: 0.3 }, i + 1), 2);
    // A launch in flight and the passes after the last launch may pass it by a little.
    assert.ok(shared.gpuSeconds / shared.fullGridGpuSeconds <= 0.3 + 0.06, `${s.seed}: ${shared.gpuSeconds / shared.fullGridGpuSeconds}`);
    assert.ok(shared.conclusion.chosen, "it still answers");
    assert.ok(shared.gpuSeconds <= plain.gpuSeconds + 1e-9, "the cap never adds GPU time");
    if (plain.gpuSeconds / plain.fullGridGpuSeconds > 0.4) assert.ok(shared.gpuSeconds < plain.gpuSeconds, `${s.seed}: the cap at 30 % cut nothing from ${plain.gpuSeconds / plain.fullGridGpuSeconds}`);
    // Once every configuration's fate is known the estimate is the full grid's own figure.
    const all = replay(POINTS, table, MODEL_COSTS, options({ stopChance: 0 }, i + 1), 2);
    if (all.records.length >= POINTS.length - 1) assert.ok(Math.abs(fullGridCosts(POINTS, all.records).seconds / fullGridSeconds(table, MODEL_COSTS) - 1) < 0.2);
  }
});
