// The performance model's surface override (simhost/sim/sglang/surface.ts): the default leaves
// the model as it was; each shape the adaptive sweep's benchmark runs on has the shape its name
// says; bad overrides are refused naming the key.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { SpecSettings, generationDecodeRate, perfAt } from "../../../simhost/sim/sglang/perf";
import { DEFAULT_LAUNCH_SD, DEFAULT_SURFACE, launchOffset, outOfMemory, parseSurface, requestNoise } from "../../../simhost/sim/sglang/surface";

const tree = (budget: number, topk = 4, window: number | null = 2048): SpecSettings => ({ algorithm: "DDTREE", blockSize: 16, budget, topk, window, compactCache: window !== null, steps: 3 });
const rate = (s: SpecSettings, surface = DEFAULT_SURFACE) => generationDecodeRate(s, 128, 128, 1, surface);

test("without an override the model is the one the other tests pin", () => {
  assert.deepEqual(parseSurface(undefined), DEFAULT_SURFACE);
  assert.deepEqual(parseSurface({}), DEFAULT_SURFACE);
  for (const s of [tree(4), tree(12), tree(32, 8, null)]) assert.deepEqual(perfAt(s, 512, 1, parseSurface({})), perfAt(s, 512));
  assert.equal(requestNoise(DEFAULT_SURFACE, tree(8), 0, 3), 1);
  assert.equal(launchOffset(DEFAULT_SURFACE, tree(8), 2), 1, "no noise section: no launch offset either (a deterministic surface stays so)");
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
  const draws = Array.from({ length: 2000 }, (_, i) => requestNoise(surface, tree(8), 0, i));
  assert.equal(requestNoise(surface, tree(8), 0, 5), draws[5]);
  assert.notEqual(draws[0], draws[1]);
  assert.notEqual(requestNoise(parseSurface({ noise: { sd: 0.03, seed: 8 } }), tree(8), 0, 5), draws[5], "another seed");
  assert.notEqual(requestNoise(surface, tree(8), 1, 5), draws[5], "another launch of the same configuration draws other requests");
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
  assert.throws(() => parseSurface({ noise: { sd: 0.02, launchsd: 0.01 } }), /surface: noise has unknown key\(s\) launchsd \(known: sd, launchSd, seed\)/);
  assert.throws(() => parseSurface({ noise: { sd: 0.02, launchSd: -0.01 } }), /surface: noise.launchSd must be a number >= 0, got -0.01/);
  assert.throws(() => parseSurface([]), /surface: must be an object/);
});

test("a surface with noise gets the documented launch-to-launch sd unless it sets one; 0 turns it off", () => {
  assert.equal(DEFAULT_LAUNCH_SD, 0.015);
  assert.equal(parseSurface({ noise: { sd: 0.03, seed: 7 } }).noise?.launchSd, 0.015);
  assert.equal(parseSurface({ noise: { sd: 0.03, launchSd: 0.02, seed: 7 } }).noise?.launchSd, 0.02);
  const off = parseSurface({ noise: { sd: 0.03, launchSd: 0, seed: 7 } });
  assert.deepEqual([0, 1, 2].map((l) => launchOffset(off, tree(8), l)), [1, 1, 1]);
});

test("the launch offset is one draw per launch: reproducible from the seed, another for another launch, seed or configuration", () => {
  const surface = parseSurface({ noise: { sd: 0.03, launchSd: 0.02, seed: 7 } });
  const offsets = Array.from({ length: 8 }, (_, l) => launchOffset(surface, tree(8), l));
  assert.deepEqual(offsets, Array.from({ length: 8 }, (_, l) => launchOffset(parseSurface({ noise: { sd: 0.03, launchSd: 0.02, seed: 7 } }), tree(8), l)), "the same seed, the same offsets");
  assert.equal(new Set(offsets).size, offsets.length, "every launch draws its own");
  assert.notEqual(launchOffset(parseSurface({ noise: { sd: 0.03, launchSd: 0.02, seed: 8 } }), tree(8), 0), offsets[0], "another seed");
  assert.notEqual(launchOffset(surface, tree(12), 0), offsets[0], "another configuration");
  // Its own draw, not one of the requests' (the same z would tie a launch to its first request).
  assert.notEqual((offsets[0] - 1) / 0.02, (requestNoise(surface, tree(8), 0, 0) - 1) / 0.03);
});

test("over many launches the offset has the configured sd and mean 1", () => {
  const surface = parseSurface({ noise: { sd: 0.03, launchSd: 0.015, seed: 11 } });
  // 4000 launches over four configurations: the sd of a sample of 4000 is within 3 % of the
  // true one about 99.9 % of the time; this seed's draws are fixed, so the bound cannot flake.
  const draws = [tree(4), tree(8), tree(16, 8), tree(32, 2, null)].flatMap((s) => Array.from({ length: 1000 }, (_, l) => launchOffset(surface, s, l)));
  const mean = draws.reduce((a, x) => a + x, 0) / draws.length;
  const sd = Math.sqrt(draws.reduce((a, x) => a + (x - mean) ** 2, 0) / (draws.length - 1));
  assert.ok(Math.abs(mean - 1) < 0.001, `mean ${mean}`);
  assert.ok(Math.abs(sd / 0.015 - 1) < 0.05, `sd ${sd}`);
});

test("repeated passes on one server average to its launch's offset, not to 1: only another launch draws another", () => {
  const surface = parseSurface({ noise: { sd: 0.03, launchSd: 0.02, seed: 7 } });
  // The step-time factor of each request, as the server applies it (generation.ts run).
  const served = (launch: number, requests: number) => Array.from({ length: requests }, (_, i) => requestNoise(surface, tree(8), launch, i) * launchOffset(surface, tree(8), launch));
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  // The first launch whose offset is well away from 1 (deterministic for this seed).
  const launch = Array.from({ length: 50 }, (_, l) => l).find((l) => Math.abs(launchOffset(surface, tree(8), l) - 1) > 0.025)!;
  const offset = launchOffset(surface, tree(8), launch);
  // 4000 requests: their noise averages to within 0.0015 of 1 (3 sd of the mean), the offset stays.
  const many = mean(served(launch, 4000));
  assert.ok(Math.abs(many - offset) < 0.0015, `launch ${launch}: mean ${many}, offset ${offset}`);
  assert.ok(Math.abs(many - 1) > 0.02, `launch ${launch}: the mean ${many} keeps the offset`);
  // Over many launches the offsets themselves average out.
  const launches = Array.from({ length: 2000 }, (_, l) => launchOffset(surface, tree(8), l));
  assert.ok(Math.abs(mean(launches) - 1) < 0.0015, `mean over launches ${mean(launches)}`);
});
