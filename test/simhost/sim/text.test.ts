// The simulated model's answers (simhost/sim/sglang/text.ts): every answer has a natural
// end where the model emits EOS, and SGLang stops there unless ignore_eos
// (srt/managers/schedule_batch.py, Req.check_finished: max_new_tokens first, then EOS).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { completionText } from "../../../simhost/sim/sglang/text";

test("an answer stops at its natural end ('stop') unless max tokens come first ('length')", () => {
  const short = completionText("hi", 1000, false);
  assert.ok(short.naturalEnd >= 48 && short.naturalEnd < 208, String(short.naturalEnd));
  assert.deepEqual([short.tokens.length, short.finishReason], [short.naturalEnd, "stop"]);
  const cut = completionText("hi", 20, false);
  assert.deepEqual([cut.tokens.length, cut.finishReason], [20, "length"]);
  assert.deepEqual(cut.tokens, short.tokens.slice(0, 20), "the same answer, cut");
  const exact = completionText("hi", short.naturalEnd, false);
  assert.equal(exact.finishReason, "length", "max_new_tokens is checked before EOS");
});

test("with ignore_eos the model writes max tokens, past its natural end", () => {
  const r = completionText("hi", 1000, false, true);
  assert.deepEqual([r.tokens.length, r.finishReason], [1000, "length"]);
  assert.deepEqual(r.tokens.slice(0, r.naturalEnd), completionText("hi", 1000, false).tokens);
});

test("natural lengths: long for 'in detail' and friends, the code for coding prompts, deterministic", () => {
  for (const p of ["Summarize the notes above in detail.", "Write an essay on caches.", "Explain it step by step", "A detailed report, please"]) {
    assert.equal(completionText(p, 10, false).naturalEnd, 4096, p);
  }
  const coding = completionText("Write a Python function `def fizzbuzz(n)` that returns a list.", 4000, false);
  assert.equal(coding.finishReason, "stop");
  assert.match(coding.tokens.join(""), /def fizzbuzz\(n\):[\s\S]*```\n$/, "ends after the code block");
  assert.deepEqual(completionText("hello there", 300, false), completionText("hello there", 300, false));
  const lengths = new Set(["a", "b", "c", "d", "e", "f"].map((p) => completionText(p, 1000, false).naturalEnd));
  assert.ok(lengths.size > 3, "the natural length varies by prompt");
});

test("corrupt output keeps the lengths and finish reasons", () => {
  const r = completionText("hi", 1000, true);
  assert.deepEqual([r.tokens.length, r.finishReason], [completionText("hi", 1000, false).naturalEnd, "stop"]);
  assert.ok(r.tokens.every((t) => t.startsWith("\ufffd")));
});
