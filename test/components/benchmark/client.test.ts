// The benchmark client against a simulated server whose ground truth is known, against
// the official OpenAI client's view of the same stream, and under a corrupt-output fault.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import OpenAI from "openai";
import { freePort, launch, sandbox, status, until } from "../../support/localSim";
import { streamChat } from "../../../components/benchmark/client";
import { promptOfTokens, runBenchmark } from "../../../components/benchmark/run";
import { benchmarkSchema } from "../../../components/benchmark/schema";
import { generationDecodeRate, perfAt, specSettings } from "../../../simhost/sim/sglang/perf";

let sb: ReturnType<typeof sandbox>;
let port: number;
let server: ReturnType<typeof launch>;
const args = () => ["--model-path", path.join(sb.dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--enable-metrics",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(sb.dir, "drafter"), "--speculative-draft-window-size", "2048"];
const ep = () => ({ baseUrl: `http://127.0.0.1:${port}`, model: "m" });
const SPEC = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});
const truth = (promptTokens: number) => perfAt(SPEC, promptTokens);

before(async () => {
  sb = sandbox({});
  port = await freePort();
  server = launch(sb.env, args());
  await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
});

after(async () => {
  server.child.kill("SIGTERM");
  await server.exited;
  sb.cleanup();
});

test("single-stream decode tokens/s is within 3% of the simulator's ground truth, short and long context", async () => {
  // The median of three streams: a client delayed by a busy machine (npm test runs two files
  // at once) sees a late first token, which reads as a faster decode for that one stream.
  for (const tokens of [128, 8192]) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await streamChat(ep(), promptOfTokens(tokens, "t"), 400));
    const want = generationDecodeRate(SPEC, runs[0].promptTokens, 400);
    for (const r of runs) assert.equal(r.outputTokens, 400);
    const rates = runs.map((r) => r.decodeTokensPerSecond).sort((a, b) => a - b);
    assert.ok(Math.abs(rates[1] / want - 1) <= 0.03, `${tokens} tokens: measured ${rates.map((x) => x.toFixed(1)).join(", ")} (median ${rates[1].toFixed(1)}) vs ${want}`);
  }
});

test("the official OpenAI client sees the same stream as ours", async () => {
  const client = new OpenAI({ baseURL: `${ep().baseUrl}/v1`, apiKey: "unused" });
  const stream = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hello there" }], max_tokens: 40, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let usage: { completion_tokens: number } | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  const ours = await streamChat(ep(), "hello there", 40);
  assert.equal(ours.text, text);
  assert.equal(ours.outputTokens, usage?.completion_tokens);
});

test("a full benchmark: bench_serving field names, acceptance of its own requests, coding passes", async () => {
  const settings = benchmarkSchema.parse({ runs: 2, warmupRuns: 1, maxTokens: 128, longContextTokens: [4096], concurrency: [1, 4], codingMaxTokens: 400 });
  const records: unknown[] = [];
  const r = await runBenchmark(ep(), settings, () => undefined, (x) => records.push(x));
  assert.ok(Math.abs(r.short.output_throughput / truth(r.short.prompt_tokens).decodeTokensPerSecond - 1) <= 0.03);
  assert.ok(r.short.output_throughput_min <= r.short.output_throughput && r.short.output_throughput <= r.short.output_throughput_max);
  for (const k of ["median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms"] as const) assert.ok(r.short[k] > 0, k);
  assert.equal(r.long[0].context_tokens, 4096);
  assert.ok(r.concurrency[1].output_throughput > r.concurrency[0].output_throughput, "4 streams deliver more tokens/s in total than 1");
  // Integer verify steps per request: equal to the simulator's acceptance length within 2%.
  assert.ok(Math.abs(r.accept_length! / truth(128).acceptLength - 1) <= 0.02, `${r.accept_length} vs ${truth(128).acceptLength}`);
  assert.match(r.accept_length_source, /spec_verify_ct/);
  assert.deepEqual({ ...r.coding, results: undefined }, { tasks: 5, passed: 5, failed: 0, extraction_failed: 0, timeouts: 0, results: undefined });
  assert.equal(records.length, r.completed);
});

test("corrupt output counts as coding failures", async () => {
  const fs = await import("node:fs");
  fs.writeFileSync(path.join(sb.dir, "faults.json"), JSON.stringify({ corruptOutput: true }));
  try {
    const r = await runBenchmark(ep(), benchmarkSchema.parse({ runs: 1, warmupRuns: 0, maxTokens: 16, longContextTokens: [], concurrency: [1], codingMaxTokens: 300 }), () => undefined, () => undefined);
    assert.equal(r.coding!.passed, 0);
    assert.equal(r.coding!.extraction_failed + r.coding!.failed, 5);
  } finally {
    fs.writeFileSync(path.join(sb.dir, "faults.json"), "{}");
  }
});
