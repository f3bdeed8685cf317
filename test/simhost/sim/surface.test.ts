// The performance model's surface override (simhost/sim/sglang/surface.ts): the default leaves
// the model as it was; each shape the adaptive sweep's benchmark runs on has the shape its name
// says; bad overrides are refused naming the key.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { SpecSettings, generationDecodeRate, perfAt } from "../../../simhost/sim/sglang/perf";
import { DEFAULT_SURFACE, outOfMemory, parseSurface, requestNoise } from "../../../simhost/sim/sglang/surface";

const tree = (budget: number, topk = 4, window: number | null = 2048): SpecSettings => ({ algorithm: "DDTREE", blockSize: 16, budget, topk, window, compactCache: window !== null, steps: 3 });
const rate = (s: SpecSettings, surface = DEFAULT_SURFACE) => generationDecodeRate(s, 128, 128, 1, surface);

test("without an override the model is the one the other tests pin", () => {
  assert.deepEqual(parseSurface(undefined), DEFAULT_SURFACE);
  assert.deepEqual(parseSurface({}), DEFAULT_SURFACE);
  for (const s of [tree(4), tree(12), tree(32, 8, null)]) assert.deepEqual(perfAt(s, 512, 1, parseSurface({})), perfAt(s, 512));
  assert.equal(requestNoise(DEFAULT_SURFACE, tree(8), 3), 1);
  assert.equal(outOfMemory(DEFAULT_SURFACE, tree(32, 8, null)), false);
});

test("a bump raises the speed around its centre and fades away from it", () => {
  const surface = parseSurface({ bumps: [{ height: 0.2, budget: 24, topk: 8, window: "none", widths: { budget: 0.7, topk: 0.7, window: 1 } }] });
  const gain = (s: SpecSettings) => rate(s, surface) / rate(s);
  assert.ok(Math.abs(gain(tree(24, 8, null)) - 1.2) < 1e-4, "the full height at the centre (rates are rounded to 0.001 tok/s)");
  assert.ok(gain(tree(16, 8, null)) > 1.05 && gain(tree(16, 8, null)) < 1.2);
  assert.ok(gain(tree(4, 2, 2048)) < 1.001, "nothing far away");
});

test("two bumps make two peaks on the benchmark's grid: each is faster than all of its grid neighbours", () => {
  const surface = parseSurface({
    bumps: [
      { height: 0.11, budget: 4, topk: 2, window: 2048, widths: { budget: 0.9, topk: 0.9, window: 1 } },
      { height: 0.22, budget: 24, topk: 8, window: "none", widths: { budget: 0.9, topk: 0.9, window: 1 } },
    ],
  });
  const r = (b: number, t: number, w: number | null) => rate(tree(b, t, w), surface);
  // Grid: budgets 4, 6, 8, 12, 16, 24, 32; topk 2, 4, 8; window 2048 or none. The model's own
  // rise with the budget moves the small-tree bump's top from b4 to b6.
  assert.ok(r(6, 2, 2048) > Math.max(r(4, 2, 2048), r(8, 2, 2048), r(6, 4, 2048), r(6, 2, null)), "the small-tree peak");
  assert.ok(r(16, 8, null) > Math.max(r(12, 8, null), r(24, 8, null), r(16, 4, null), r(16, 8, 2048)), "the large-tree peak");
  assert.ok(r(16, 8, null) > r(6, 2, 2048) * 1.03, "the large-tree peak is the higher one");
});

test("a ridge favours trees as wide as they are deep, along the diagonal", () => {
  const surface = parseSurface({ nodeCost: 0.008, bumps: [{ height: 0.12, budget: 16, topk: 4, widths: { budget: 0.45 }, ridge: true }] });
  const gain = (b: number, t: number) => rate(tree(b, t), surface) / rate(tree(b, t), parseSurface({ nodeCost: 0.008 }));
  for (const [b, t] of [[8, 2], [16, 4], [32, 8]]) assert.ok(Math.abs(gain(b, t) - 1.12) < 1e-4, `on the ridge: b${b}t${t}`);
  assert.ok(gain(16, 2) < 1.02 && gain(8, 8) < 1.001, "off the ridge");
});

test("the out-of-memory region: trees of budget x topk from the limit on, a missing window counting more", () => {
  const surface = parseSurface({ oom: { treeNodes: 96, windowNoneFactor: 1.5 } });
  assert.equal(outOfMemory(surface, tree(12, 8)), true);
  assert.equal(outOfMemory(surface, tree(8, 8)), false);
  assert.equal(outOfMemory(surface, tree(8, 8, null)), true, "64 nodes x 1.5 without a window");
  assert.equal(outOfMemory(surface, { ...tree(8), algorithm: "DFLASH" }), false, "only DDTree trees");
});

test("measurement noise is seeded: the same request draws the same factor, requests differ, the mean stays 1", () => {
  const surface = parseSurface({ noise: { sd: 0.03, seed: 7 } });
  const draws = Array.from({ length: 2000 }, (_, i) => requestNoise(surface, tree(8), i));
  assert.equal(requestNoise(surface, tree(8), 5), draws[5]);
  assert.notEqual(draws[0], draws[1]);
  assert.notEqual(requestNoise(parseSurface({ noise: { sd: 0.03, seed: 8 } }), tree(8), 5), draws[5], "another seed");
  const mean = draws.reduce((s, x) => s + x, 0) / draws.length;
  const sd = Math.sqrt(draws.reduce((s, x) => s + (x - mean) ** 2, 0) / draws.length);
  assert.ok(Math.abs(mean - 1) < 0.003, `mean ${mean}`);
  assert.ok(Math.abs(sd - 0.03) < 0.003, `sd ${sd}`);
});

test("a bad override is refused, naming the key", () => {
  assert.throws(() => parseSurface({ nodecost: 0.1 }), /surface: surface has unknown key\(s\) nodecost \(known: nodeCost, topkBest, bumps, oom, noise\)/);
  assert.throws(() => parseSurface({ bumps: [{ height: 0.1, budget: 8 }] }), /surface: bumps\[0\].topk must be a number >= 1, got undefined/);
  assert.throws(() => parseSurface({ oom: { treeNodes: "many" } }), /surface: oom.treeNodes must be a number >= 1, got "many"/);
  assert.throws(() => parseSurface({ noise: { sd: -1 } }), /surface: noise.sd must be a number >= 0, got -1/);
  assert.throws(() => parseSurface([]), /surface: must be an object/);
});
