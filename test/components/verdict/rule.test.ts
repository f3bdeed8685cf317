// The rule itself: estimates from launches with the launch offset (measured by relaunches, or
// twice the assumed one), comparisons with their always-valid interval beyond the threshold
// (better), inside +-equalWithin (equal) or neither (inconclusive), rankings that tie what they
// cannot separate; and its settings.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { alwaysValidHalfWidth, answerIsRight, compare, credibleSet, estimate, launchOffset, normalQuantile, rank } from "../../../components/verdict/rule";
import { normal, prng } from "../../../lib/prng";
import { DEFAULT_VERDICT, verdictSchema } from "../../../components/verdict/schema";

const launch = (value: number, requestSd = 0.04, requests = 3) => ({ value, requests, requestSd });

test("A/A: identical configurations are never a winner; inconclusive where the benchmark is short, equal within 2 % where it is long enough", () => {
  const one = estimate([launch(180)], DEFAULT_VERDICT);
  assert.equal(compare(one, one, DEFAULT_VERDICT).verdict, "inconclusive");
  const many = estimate([launch(180), launch(183), launch(177)], DEFAULT_VERDICT);
  const c = compare(many, many, DEFAULT_VERDICT);
  assert.deepEqual([c.verdict, c.ratio], ["inconclusive", 1]);
  // Twenty launches of 30 requests each, offset measured at 1.5 %: the interval fits inside +-2 %.
  const long = Array.from({ length: 20 }, (_, i) => launch(180 * (1 + 0.015 * (i % 2 ? 1 : -1)), 0.04, 30));
  const offset = launchOffset([long, long], DEFAULT_VERDICT);
  const e = estimate(long, DEFAULT_VERDICT, offset);
  const eq = compare(e, e, DEFAULT_VERDICT);
  assert.equal(eq.verdict, "equal", JSON.stringify(eq));
  assert.ok(eq.high <= 1.02 && eq.low >= 1 / 1.02);
  assert.ok(c.low < 1 && c.high > 1);
  const r = rank([{ key: "a", estimate: one }, { key: "b", estimate: one }], DEFAULT_VERDICT);
  assert.deepEqual(r, { kind: "tie", tied: ["a", "b"] });
});

test("one launch is never more certain than the launch prior; more launches are", () => {
  const one = estimate([launch(180, 0, 1000)], DEFAULT_VERDICT);
  assert.equal(one.relSe.toFixed(4), "0.0150");
  const four = estimate([launch(180, 0, 1000), launch(180, 0, 1000), launch(180, 0, 1000), launch(180, 0, 1000)], DEFAULT_VERDICT);
  assert.ok(four.relSe < one.relSe / 1.5, `${four.relSe}`);
});

test("better only when the whole interval lies beyond the threshold; a lone entry is a tie of one", () => {
  const a = estimate([launch(200)], DEFAULT_VERDICT);
  const b = estimate([launch(150)], DEFAULT_VERDICT);
  assert.equal(compare(a, b, DEFAULT_VERDICT).verdict, "better");
  assert.equal(compare(b, a, DEFAULT_VERDICT).verdict, "worse");
  // A threshold wider than the difference makes it none.
  assert.equal(compare(a, b, { ...DEFAULT_VERDICT, threshold: 0.4 }).verdict, "inconclusive");
  assert.deepEqual(rank([{ key: "a", estimate: a }], DEFAULT_VERDICT), { kind: "tie", tied: ["a"] });
  assert.equal(normalQuantile(0.975).toFixed(4), "1.9600");
});

test("the launch offset: twice the assumed one where nothing was relaunched; relaunches' spread pooled with it, never below the assumed one", () => {
  assert.deepEqual(launchOffset([[launch(180)], [launch(170)]], DEFAULT_VERDICT), { sd: 0.03, dof: 0 });
  // Many relaunches spread by 3 %: the offset measured is about 3 %, whatever was assumed.
  const wide = (n: number) => Array.from({ length: n }, (_, i) => launch(180 * (1 + 0.03 * (i % 2 ? 1 : -1)), 0, 1000));
  const o = launchOffset([wide(40), wide(40)], DEFAULT_VERDICT);
  assert.equal(o.dof, 78);
  assert.ok(Math.abs(o.sd - 0.03) < 0.002, JSON.stringify(o));
  // Relaunches that agree exactly: pooled down towards them, never below launchSd.
  const tight = Array.from({ length: 40 }, () => launch(180, 0, 1000));
  assert.equal(launchOffset([tight], DEFAULT_VERDICT).sd, 0.015);
});

test("the always-valid interval is wider than one look's fixed interval, and says what the benchmark could detect", () => {
  const v = 0.02 ** 2;
  const fixed = normalQuantile(0.975) * 0.02;
  assert.ok(alwaysValidHalfWidth(v, 0.95) > 1.4 * fixed && alwaysValidHalfWidth(v, 0.95) < 1.8 * fixed, String(alwaysValidHalfWidth(v, 0.95) / fixed));
  assert.equal(alwaysValidHalfWidth(0, 0.95), 0);
  const e = { value: 100, relSe: 0.02 / Math.SQRT2, launches: 1, requests: 3 };
  const c = compare(e, e, DEFAULT_VERDICT);
  // detectable: 1.005 x exp(half-width + 0.84 sd) - 1.
  assert.equal(c.detectable.toFixed(4), (1.005 * Math.exp(alwaysValidHalfWidth(v, 0.95) + normalQuantile(0.8) * 0.02) - 1).toFixed(4));
});

test("the rule's settings: defaults in one schema, unknown keys and bad values refused by name", () => {
  assert.deepEqual(verdictSchema.parse({}), { threshold: 0.005, confidence: 0.95, launchSd: 0.015, equalWithin: 0.02, maxAgeDays: 7 });
  assert.deepEqual(DEFAULT_VERDICT, verdictSchema.parse({}));
  const message = (input: unknown) => {
    const r = verdictSchema.safeParse(input);
    return r.success ? "" : r.error.issues.map((i) => i.message).join("; ");
  };
  assert.equal(message({ treshold: 0.01 }), 'verdict has unknown key(s) "treshold"; valid keys: threshold, confidence, launchSd, equalWithin, maxAgeDays');
  assert.equal(message({ equalWithin: 0 }), "verdict.equalWithin must be a number above 0 and at most 0.5 (0.02: 2 %)");
  assert.equal(message({ confidence: 1 }), "verdict.confidence must be a number above 0.5 and below 1 (0.95: 95 %)");
  assert.equal(message({ threshold: -0.1 }), "verdict.threshold must be a number from 0 to 0.5 (0.005: 0.5 %)");
  assert.equal(message({ maxAgeDays: 0 }), "verdict.maxAgeDays must be a positive number of days, at most 365");
  assert.equal(message({ maxAgeDays: 366 }), "verdict.maxAgeDays must be a positive number of days, at most 365");
});

test("an answer is right: one member within the tolerance; a tie holding the best, or all within it", () => {
  assert.equal(answerIsRight([true], false), true);
  assert.equal(answerIsRight([false], false), false);
  assert.equal(answerIsRight([true, false], false), false, "a near member beside a far one, the best elsewhere: it misleads");
  assert.equal(answerIsRight([false, false, true], true), true, "it holds the best");
  assert.equal(answerIsRight([true, true], false), true, "all within the tolerance");
});

test("the credible set's chance is a scored answer's: one within the tolerance of the best, or a tie that holds the best or is all within it", () => {
  // x (not launched) is often the best; a tie of a and b is right when one of them is the best,
  // or both are within 1 % of x: one of them within 1 % of x is not enough (the other misleads).
  const beliefs = [
    { key: "a", mean: 200, sd: 6, exists: 1, member: true },
    { key: "b", mean: 196, sd: 6, exists: 1, member: true },
    { key: "x", mean: 199, sd: 6, exists: 1, member: false },
  ];
  const set = credibleSet(beliefs, { tolerance: 0.01, confidence: 0.999, maxSize: 2 }, prng(3), 4000);
  const rand = prng(99);
  let right = 0;
  let anyWithin = 0;
  const draws = 20000;
  for (let d = 0; d < draws; d++) {
    const v = new Map(beliefs.map((b) => [b.key, b.mean + b.sd * normal(rand)]));
    const best = Math.max(...v.values());
    const within = set.keys.map((k) => v.get(k)! >= best * 0.99);
    const holds = set.keys.some((k) => v.get(k) === best);
    if (set.keys.length === 1 ? within[0] : holds || within.every(Boolean)) right++;
    if (within.some(Boolean)) anyWithin++;
  }
  assert.ok(Math.abs(set.chance - right / draws) < 0.03, `${set.keys.join(",")}: ${set.chance} against ${right / draws}`);
  assert.deepEqual(set.keys, ["a", "b"], "this case is a tie");
  assert.ok(set.chance < anyWithin / draws - 0.03, "a tie is not right merely because one member is near the best");
});

test("the credible set: one clear best alone; near equals together, at most maxSize; a competitor not launched lowers the chance, never joins", () => {
  const m = (key: string, mean: number, sd = 2) => ({ key, mean, sd, exists: 1, member: true });
  const s = { tolerance: 0.01, confidence: 0.95 };
  const clear = credibleSet([m("a", 200), m("b", 150), m("c", 140)], s, prng(1));
  assert.deepEqual(clear.keys, ["a"]);
  assert.ok(clear.chance > 0.99, String(clear.chance));
  const near = credibleSet([m("a", 200, 3), m("b", 199.5, 3), m("c", 199, 3), m("d", 198.5, 3), m("e", 150)], s, prng(1));
  assert.ok(near.keys.length >= 3 && !near.keys.includes("e"), near.keys.join(","));
  const capped = credibleSet([m("a", 200, 3), m("b", 199.5, 3), m("c", 199, 3), m("d", 198.5, 3)], { ...s, maxSize: 2 }, prng(1));
  assert.equal(capped.keys.length, 2);
  assert.ok(capped.chance < 0.95, `a capped set says it is less sure: ${capped.chance}`);
  // A configuration not launched may be faster: it competes for the chance, and is never in the answer.
  const unknown = credibleSet([m("a", 200), { key: "x", mean: 200, sd: 20, exists: 1, member: false }], s, prng(1));
  assert.deepEqual(unknown.keys, ["a"]);
  assert.ok(unknown.chance < 0.8, String(unknown.chance));
  assert.deepEqual(credibleSet([m("a", 200), m("b", 150)], s, prng(7)), credibleSet([m("a", 200), m("b", 150)], s, prng(7)), "seeded: the same draws, the same set");
});

test("the credible set states, per member, its chance to be the best and the regret of deploying it: expected and an upper percentile", () => {
  const m = (key: string, mean: number, sd = 2) => ({ key, mean, sd, exists: 1, member: true });
  const s = { tolerance: 0.01, confidence: 0.95 };
  const clear = credibleSet([m("a", 200), m("b", 150)], s, prng(1));
  assert.equal(clear.best.get("a"), 1);
  assert.deepEqual(clear.regret.get("a"), { expected: 0, upper: 0 });
  assert.ok(Math.abs(clear.regret.get("b")!.expected - 0.25) < 0.01, JSON.stringify(clear.regret.get("b")));
  // A competitor not launched, as likely as not better by up to ~10 %: the top's regret is a risk the set states.
  const unknown = credibleSet([m("a", 200), { key: "x", mean: 200, sd: 20, exists: 1, member: false }], s, prng(1), 4000);
  const r = unknown.regret.get("a")!;
  assert.ok(unknown.best.get("a")! > 0.4 && unknown.best.get("a")! < 0.6, String(unknown.best.get("a")));
  // E[max(0, 1 - 200 / X)] for X ~ N(200, 20): about 3 %; its 90th percentile about 11 %.
  assert.ok(r.expected > 0.02 && r.expected < 0.045 && r.upper > 0.08 && r.upper < 0.14, JSON.stringify(r));
  const higher = credibleSet([m("a", 200), { key: "x", mean: 200, sd: 20, exists: 1, member: false }], { ...s, regretQuantile: 0.97 }, prng(1), 4000);
  assert.ok(higher.regret.get("a")!.upper > r.upper, "a higher percentile is a looser bound");
});
