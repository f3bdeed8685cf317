import { test } from "node:test";
import * as assert from "node:assert/strict";
import { SpecSettings, acceptLength, acceptancePerToken, countTokens, effectiveAcceptLength, perfAt, repetitionOf, specSettings, timeToFirstToken, windowRepetitions } from "../../../simhost/sim/sglang/perf";

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

// Acceptance depends on the text: what a drafter sees in its window, and whether the model
// is past its natural end (ignore_eos). A benchmark on repetitive or post-EOS text reads high.
const sentence = "Note t: speculative decoding drafts several tokens and verifies them in one pass. ";
const records = (n: number) => Array.from({ length: n }, (_, i) => `Record ${i}: customer ${(i * 31) % 977} bought ${i % 13} items of sku-${i * 17} in city-${i % 50} on day ${i % 365}.`).join("\n");
const dflash = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});

test("repetitionOf: a repeated sentence is about 1, varied text and distinct records about 0", () => {
  assert.ok(repetitionOf(sentence.repeat(100)) > 0.98);
  assert.equal(repetitionOf(records(500)), 0);
  assert.equal(repetitionOf("the model drafts a block of tokens and the target verifies them in one pass"), 0);
  assert.equal(repetitionOf(""), 0);
  // Half new, half a copy of it: half of the 6-grams were seen before.
  const half = repetitionOf(records(200) + "\n" + records(200));
  assert.ok(half > 0.45 && half < 0.55, String(half));
});

test("repetitionOf is fast on 200 KB of text (it runs on every request's context)", () => {
  const text = (records(3000) + sentence.repeat(400)).slice(0, 200_000);
  repetitionOf(text);
  const t0 = performance.now();
  repetitionOf(text);
  assert.ok(performance.now() - t0 < 250, `${performance.now() - t0} ms`);
});

test("windowRepetitions is repetitionOf of each window, in one pass", () => {
  const text = records(40) + "\n" + sentence.repeat(30) + records(40);
  const starts = [...text.matchAll(/\S+/g)].map((m) => m.index!);
  const windows = starts.slice(0, -60).map((s, i) => [s, starts[i + 60] - 1] as const).filter((_, i) => i % 5 === 0);
  const got = windowRepetitions(text, windows);
  windows.forEach(([from, to], i) => assert.equal(got[i], repetitionOf(text.slice(from, to)), `window ${i}`));
  // 60 words over a 13-word sentence: the first period is new, the rest repeats it.
  assert.ok(Math.max(...got) > 0.7 && Math.min(...got) === 0, "the windows pass over the repeated part");
  assert.throws(() => windowRepetitions(text, [[10, 50], [5, 60]]), /moves back/);
});

test("effectiveAcceptLength: acceptLength for natural text; higher for repetitive and post-EOS text; capped by the block", () => {
  for (const s of [dflash, ddtree(8), ddtree(16, 4, null), specSettings({ speculative_algorithm: "EAGLE" }, {})]) {
    for (const ctx of [100, 4096, 32768]) {
      const natural = acceptLength(s, ctx);
      assert.equal(effectiveAcceptLength(s, ctx, { repetition: 0, postEos: false }), natural);
      const repetitive = effectiveAcceptLength(s, ctx, { repetition: 0.99, postEos: false });
      const postEos = effectiveAcceptLength(s, ctx, { repetition: 0, postEos: true });
      assert.ok(repetitive > 1.3 * natural && postEos > 1.3 * natural, `${s.algorithm} at ${ctx}: ${natural} ${repetitive} ${postEos}`);
      const cap = s.algorithm === "EAGLE" ? s.steps + 1 : s.blockSize;
      assert.ok(effectiveAcceptLength(s, ctx, { repetition: 1, postEos: true }) <= cap);
    }
  }
  const plain = specSettings({ speculative_algorithm: null }, {});
  assert.equal(effectiveAcceptLength(plain, 100, { repetition: 1, postEos: true }), 1, "no speculation: one token per step");
});

test("acceptancePerToken: the drafter sees its window; past the natural end the text is post-EOS", () => {
  const prompt = sentence.repeat(120); // ~2400 tokens, all repetition
  const output = Array.from({ length: 3000 }, (_, i) => ` w${(i * 7919) % 100003}`); // varied
  const tau = acceptancePerToken(dflash, prompt, "", output, 2500);
  assert.ok(tau[0] > 1.5 * acceptLength(dflash, countTokens(prompt)), "a window of repetition");
  // After 2048 varied tokens the 2048-token window holds output only: natural again.
  assert.equal(tau[2400], acceptLength(dflash, countTokens(prompt) + 2400));
  assert.ok(tau[2600] > 1.5 * tau[2400], "post-EOS");
  // Without a window the drafter still sees the repeated prompt.
  const whole = acceptancePerToken({ ...dflash, window: null }, prompt, "", output, 2500);
  assert.ok(whole[2400] > 1.1 * acceptLength({ ...dflash, window: null }, countTokens(prompt) + 2400));
});

// srt/managers/schedule_batch.py: only the tokens after the cached prefix are prefilled.
test("timeToFirstToken prefills only the uncached part of the prompt", () => {
  const cold = timeToFirstToken(8192, dflash);
  const warm = timeToFirstToken(8192, dflash, 1, 8191);
  assert.ok(warm < cold / 4, `${warm} vs ${cold}`);
  assert.equal(timeToFirstToken(8192, dflash, 1, 0), cold);
  assert.ok(warm > timeToFirstToken(1, dflash) * 0.9, "the fixed overhead and the first step stay");
});
