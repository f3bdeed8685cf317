// SGLang's start-up memory checks (sgl-project/sglang python/sglang/srt/model_executor/
// model_runner.py init_torch_distributed and the memory pool set-up) as the simulator
// applies them to what the simulated GPUs show.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { planMemory } from "../../../simhost/sim/sglang/memory";

const TOTAL = 97887;
const gpus = (used: number[]) => used.map((usedMiB, index) => ({ index, usedMiB, totalMiB: TOTAL }));
const base = { weightsPerRankMiB: 75_000, memFractionStatic: 0.88, tpSize: 8, strictBalance: false };

test("free GPUs: weights plus the KV cache within mem_fraction_static", () => {
  const p = planMemory({ ...base, ranks: gpus(new Array(8).fill(0)) });
  assert.equal(p.kind, "ok");
  if (p.kind === "ok") assert.equal(p.perRankMiB, Math.floor(TOTAL * 0.88));
});

test("the old process's memory still held on every GPU: torch's CUDA OOM while loading weights", () => {
  const p = planMemory({ ...base, ranks: gpus(new Array(8).fill(Math.floor(TOTAL * 0.88))) });
  assert.equal(p.kind === "fail" && p.stage, "weights");
  if (p.kind === "fail") assert.match(p.error, /^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ GiB\. GPU 0 has a total capacity of 95\.59 GiB/);
});

test("weights fit but nothing is left for the KV cache: Not enough memory", () => {
  const p = planMemory({ ...base, ranks: gpus(new Array(8).fill(14_000)) });
  assert.equal(p.kind === "fail" && p.stage, "kv-cache");
  if (p.kind === "fail") assert.equal(p.error, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88");
});

test("one GPU busier than the others: unbalanced (a warning, an error when the check is enforced)", () => {
  const ranks = gpus([0, 0, 0, 20_000, 0, 0, 0, 0]);
  const lax = planMemory({ ...base, weightsPerRankMiB: 40_000, ranks });
  assert.equal(lax.kind, "ok");
  assert.match(lax.warnings[0], /^The memory capacity is unbalanced\. Some GPUs may be occupied by other processes\. pre_model_load_memory=/);
  const strict = planMemory({ ...base, weightsPerRankMiB: 40_000, ranks, strictBalance: true });
  assert.equal(strict.kind === "fail" && strict.stage, "balance");
  if (strict.kind === "fail") assert.match(strict.error, /^RuntimeError: The memory capacity is unbalanced\./);
});

test("GPU 0 itself the busy one: the other ranks see the gap (each rank compares the minimum with its own)", () => {
  const p = planMemory({ ...base, weightsPerRankMiB: 40_000, ranks: gpus([20_000, 0, 0, 0, 0, 0, 0, 0]), strictBalance: true });
  assert.equal(p.kind === "fail" && p.stage, "balance");
  if (p.kind === "fail") assert.match(p.error, /pre_model_load_memory=76\.06, local_gpu_memory=95\.59/);
});
