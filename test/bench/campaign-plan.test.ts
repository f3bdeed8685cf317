// The fault campaign's plan (bench/campaign/plan.ts), pure: same seed, same sequence; every
// step kind and fault kind is drawn; the model allows what a failed `up` may leave.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { allowedAfter, FAULTS, mix, planCampaignSequence, planSequence, shorter } from "../../bench/campaign/plan";

test("a plan is a function of its seed and index; other seeds give other plans", () => {
  assert.deepEqual(planSequence(7, 3, 12), planSequence(7, 3, 12));
  assert.notDeepEqual(planSequence(7, 3, 12), planSequence(8, 3, 12));
  assert.notDeepEqual(planSequence(7, 3, 12), planSequence(7, 4, 12));
  assert.equal(planSequence(7, 3, 12).length, 12);
});

test("over many sequences every operation, key change and fault kind is drawn", () => {
  const steps = Array.from({ length: 50 }, (_, i) => planSequence(1, i, 10)).flat();
  assert.deepEqual(new Set(steps.map((s) => s.op)), new Set(["up", "preview", "refresh", "destroy"]));
  const ups = steps.filter((s) => s.op === "up");
  assert.deepEqual(new Set(ups.map((s) => s.fault)), new Set(FAULTS));
  assert.deepEqual(new Set(ups.map((s) => s.key)), new Set(["keep", "set", "rotate", "remove"]));
  for (const change of ["rename", "badFlag", "otherPort", "previewFirst"] as const) assert.ok(ups.some((u) => u.op === "up" && u[change]), change);
});

test("one sequence in four runs on a two-node group; neighbouring seeds draw unrelated first steps", () => {
  assert.deepEqual([0, 1, 2, 3, 7].map((i) => planCampaignSequence(1, i, 2).group), [false, false, false, true, true]);
  const firstOps = Array.from({ length: 40 }, (_, s) => planSequence(s, 0, 1)[0].op);
  // mulberry32 seeded with nearby numbers draws nearby first values: mix() spreads them.
  assert.ok(firstOps.filter((o) => o === "up").length >= 20, firstOps.join(" "));
  assert.notEqual(mix(1, 0), mix(0, 1));
});

test("after a step: a successful up proves its configuration; a failed one leaves the previous one, or its own where nothing was rolled back", () => {
  const old = { stack: "a" as const, unit: "u", serving: { budget: 8, window: 2048 }, key: null };
  const attempted = { stack: "a" as const, unit: "u", serving: { budget: 16, window: 2048 }, key: "k" };
  assert.deepEqual(allowedAfter(old, attempted, true, ""), [attempted]);
  assert.deepEqual(allowedAfter(old, attempted, false, "... Rolled back: the previous configuration ..."), [old]);
  assert.deepEqual(allowedAfter(old, attempted, false, "command on 127.0.0.10 did not finish"), [old, attempted]);
  assert.deepEqual(allowedAfter(old, null, true, ""), [old], "a preview or refresh changes nothing");
});

test("shrinking tries the sequence with each step left out", () => {
  const steps = planSequence(2, 0, 4);
  assert.deepEqual(shorter(steps).map((s) => s.length), [3, 3, 3, 3]);
  assert.deepEqual(shorter(steps)[1], [steps[0], steps[2], steps[3]]);
});
