import { test } from "node:test";
import * as assert from "node:assert/strict";
import { perfAt, specSettings, SpecSettings } from "../../../simhost/sim/sglang/perf";

const ddtree = (budget: number, topk = 4, window: number | null = 2048): SpecSettings => ({
  algorithm: "DDTREE", blockSize: 16, budget, topk, window, compactCache: false, steps: 3,
});

test("speed peaks at an intermediate DDTree budget while acceptance keeps rising", () => {
  const budgets = [2, 4, 8, 16, 32, 64];
  const tps = budgets.map((b) => perfAt(ddtree(b), 512).decodeTokensPerSecond);
  const tau = budgets.map((b) => perfAt(ddtree(b), 512).acceptLength);
  const best = tps.indexOf(Math.max(...tps));
  assert.ok(best > 0 && best < budgets.length - 1, `peak inside the range, got ${tps}`);
  for (let i = 1; i < tau.length; i++) assert.ok(tau[i] > tau[i - 1]);
});

test("a draft window saves drafter work at long context only", () => {
  const long = 32768;
  assert.ok(perfAt(ddtree(8, 4, 2048), long).decodeTokensPerSecond > perfAt(ddtree(8, 4, null), long).decodeTokensPerSecond);
  assert.equal(perfAt(ddtree(8, 4, 2048), 100).decodeTokensPerSecond, perfAt(ddtree(8, 4, null), 100).decodeTokensPerSecond);
});

test("speculation beats plain decoding and the model is deterministic", () => {
  const plain = specSettings({ speculative_algorithm: null }, {});
  assert.ok(perfAt(ddtree(8), 100).decodeTokensPerSecond > 4 * perfAt(plain, 100).decodeTokensPerSecond);
  assert.deepEqual(perfAt(ddtree(8), 100), perfAt(ddtree(8), 100));
});

test("DDTree topk comes from SGLANG_DDTREE_MAX_TOPK as in the fork", () => {
  const s = specSettings({ speculative_algorithm: "DDTREE", speculative_ddtree_budget: 12 }, { SGLANG_DDTREE_MAX_TOPK: "6" });
  assert.equal(s.topk, 6);
  assert.equal(s.budget, 12);
});
