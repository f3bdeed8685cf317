// The benchmark against a simulated SGLang whose ground truth is known (simhost/sim/sglang/
// perf.ts): its radix cache and text-dependent acceptance are the two traps a naive
// benchmark falls into. The benchmark as it was until issue 24 (c96f514, run.ts
// singleStream: one repeated sentence as the prompt, the same prompt for the warm-up and
// every measured run, ignore_eos) is reproduced here to show each trap reads wrong, and the
// benchmark of today reads the ground truth.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import OpenAI from "openai";
import { freePort, launch, sandbox, status, until } from "../../support/localSim";
import { streamChat, streamGenerate } from "../../../components/benchmark/client";
import { MAX_ATTEMPTS, RawRecord, runBenchmark } from "../../../components/benchmark/run";
import { documentOf, promptOf, QUESTIONS } from "../../../components/benchmark/workload";
import { benchmarkSchema } from "../../../components/benchmark/schema";
import { acceptLength, generationDecodeRate, repetitionOf, specSettings, timeToFirstToken } from "../../../simhost/sim/sglang/perf";

let sb: ReturnType<typeof sandbox>;
let port: number;
let server: ReturnType<typeof launch>;
const args = () => ["--model-path", path.join(sb.dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--enable-metrics",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(sb.dir, "drafter"), "--speculative-draft-window-size", "2048"];
const ep = () => ({ baseUrl: `http://127.0.0.1:${port}`, model: "m" });
const SPEC = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});

/** The prompt of the benchmark until issue 24: one sentence repeated to the length. */
function oldPrompt(tokens: number, seed: string): string {
  const sentence = `Note ${seed}: speculative decoding drafts several tokens and verifies them in one pass. `;
  const body = sentence.repeat(Math.max(1, Math.ceil((tokens * 4) / sentence.length)));
  return `${body.slice(0, Math.max(0, tokens * 4 - 60))}\nSummarize the notes above in detail.`;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

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

test("the workload's documents do not repeat; the old prompt is one sentence repeated", () => {
  const doc = documentOf(60_000, "t");
  assert.ok(repetitionOf(doc) < 0.05, `repetition of a document: ${repetitionOf(doc)}`);
  assert.ok(repetitionOf(oldPrompt(8192, "t")) > 0.9);
  // Every request its own text: two seeds share no more than the log's first words.
  const [a, b] = [promptOf(4096, "long-1", 0, 4).text, promptOf(4096, "long-2", 1, 4).text];
  let common = 0;
  while (a[common] === b[common]) common++;
  assert.ok(common < 20, `two prompts share their first ${common} characters`);
  assert.equal(new Set(QUESTIONS.map((q) => q.kind)).size, 3);
});

test("single-stream decode rate (1/TPOT) is within 3% of the simulator's ground truth, short and long context", async () => {
  // The median of three streams: a client delayed by a busy machine (npm test runs two files
  // at once) sees a late first token, which reads as a faster decode for that one stream.
  for (const tokens of [128, 8192]) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await streamGenerate(ep(), promptOf(tokens, `rate-${tokens}-${i}`, 0, 4).text, { maxNewTokens: 300 }));
    for (const r of runs) assert.equal(r.outputTokens, 300);
    const rate = median(runs.map((r) => ((r.outputTokens - 1) * 1000) / (r.e2eMs - r.ttftMs)));
    const want = generationDecodeRate(SPEC, runs[0].promptTokens, 300);
    assert.ok(Math.abs(rate / want - 1) <= 0.03, `${tokens} tokens: measured ${rate.toFixed(1)} vs ${want}`);
  }
});

// Today's TTFT is compared with the prefill from below only: the simulator sleeps the prefill, so
// a reading under it is a cache hit, while the suite's own load can only add to it (CI read 942 ms
// against 884 ms under load, and a two-sided 5 % failed a green main; issue 42).
test("the cache trap: the old method's long-context TTFT is a prefix-cache hit; today's is a full prefill (at least the simulated prefill, nothing cached)", async () => {
  const ctx = 16384;
  // The old method: warm-up, then measured runs, all of the same prompt.
  const prompt = oldPrompt(ctx, `long-${ctx}`);
  await streamChat(ep(), prompt, 16, 600_000, true);
  const old = [];
  for (let i = 0; i < 2; i++) old.push(await streamGenerate(ep(), prompt, { maxNewTokens: 16, ignoreEos: true }));
  const prefillMs = timeToFirstToken(old[0].promptTokens, SPEC) * 1000;
  const oldTtft = median(old.map((r) => r.ttftMs));
  assert.ok(oldTtft < prefillMs * 0.3, `old method: TTFT ${oldTtft.toFixed(0)} ms against a prefill of ${prefillMs.toFixed(0)} ms`);
  assert.ok(old.every((r) => (r.cachedTokens ?? 0) > 0.9 * r.promptTokens), "the server says those prompts came from its cache");

  const r = await runBenchmark(ep(), benchmarkSchema.parse({ runs: 3, warmupRuns: 1, maxTokens: 16, shortPromptTokens: 128, longContextTokens: [ctx], concurrency: [], coding: false }), () => undefined, () => undefined, "long-context");
  const long = r.long[0];
  const truth = timeToFirstToken(long.prompt_tokens, SPEC) * 1000;
  assert.ok(long.median_ttft_ms >= truth * 0.97, `today: median TTFT ${long.median_ttft_ms} ms, below a prefill of ${truth.toFixed(0)} ms: a cache hit`);
  assert.ok(long.cached_tokens < 0.01 * long.total_input_tokens, `cached tokens: ${long.cached_tokens} of ${long.total_input_tokens}`);
  assert.ok(Math.abs(long.prompt_tokens / ctx - 1) <= 0.05, `prompt of ${long.prompt_tokens} tokens for ${ctx} asked`);
  assert.deepEqual(r.warnings, []);
});

test("the acceptance trap: repeated text and post-EOS text read far above the ground truth; today's varied prompts read it within 5%", async () => {
  const accept = (g: { outputTokens: number; specVerifyCt: number | null }[]) => g.reduce((a, x) => a + x.outputTokens, 0) / g.reduce((a, x) => a + (x.specVerifyCt ?? NaN), 0);
  const truth = acceptLength(SPEC, 128);
  // The old prompt: a repeated sentence, with ignore_eos.
  const repeated = [await streamGenerate(ep(), oldPrompt(128, "short"), { maxNewTokens: 200, ignoreEos: true })];
  assert.ok(accept(repeated) > truth * 1.2, `repeated sentence: ${accept(repeated).toFixed(2)} vs ${truth}`);
  // A short-answer question forced past its end: the post-EOS tail drafts easily.
  const postEos = [await streamGenerate(ep(), `${documentOf(400, "eos")}\n\nAnswer briefly: which vessel is named first?`, { maxNewTokens: 400, ignoreEos: true })];
  assert.ok(accept(postEos) > truth * 1.2, `post-EOS: ${accept(postEos).toFixed(2)} vs ${truth}`);

  const r = await runBenchmark(ep(), benchmarkSchema.parse({ runs: 3, warmupRuns: 0, maxTokens: 128, longContextTokens: [], concurrency: [], coding: false }), () => undefined, () => undefined, "accept-today");
  assert.ok(Math.abs(r.accept_length! / truth - 1) <= 0.05, `today: ${r.accept_length} vs ${truth}`);
  assert.match(r.accept_length_source, /spec_verify_ct/);
});

test("the official OpenAI client sees the same chat stream as ours", async () => {
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

test("a full benchmark: every phase's fields, 4 x level requests per concurrency level, raw records, coding passes", async () => {
  const settings = benchmarkSchema.parse({ runs: 2, warmupRuns: 1, maxTokens: 64, longContextTokens: [4096], concurrency: [1, 4], codingMaxTokens: 400 });
  const records: RawRecord[] = [];
  const r = await runBenchmark(ep(), settings, () => undefined, (x) => records.push(x), "full");
  assert.equal(r.format, 2);
  for (const p of [r.short, ...r.long, ...r.concurrency]) {
    for (const k of ["output_throughput", "decode_tokens_per_s", "median_ttft_ms", "median_tpot_ms", "median_itl_ms", "p99_itl_ms", "median_chunk_itl_ms", "median_e2e_latency_ms"] as const) assert.ok(p[k] > 0, `${p.phase} ${k}`);
    assert.ok(p.decode_tokens_per_s_min <= p.decode_tokens_per_s && p.decode_tokens_per_s <= p.decode_tokens_per_s_max, p.phase);
    assert.ok(p.accept_length! > 1, p.phase);
    assert.equal(p.failed, 0);
  }
  assert.deepEqual(r.concurrency.map((c) => c.completed), [4, 16]);
  assert.ok(r.concurrency[1].output_throughput > r.concurrency[0].output_throughput, "4 streams deliver more tokens/s in total than 1");
  // A speculative chunk carries several tokens: the per-chunk gap is longer than the per-token one.
  assert.ok(r.short.median_chunk_itl_ms > r.short.median_itl_ms * 1.5);
  assert.deepEqual({ ...r.coding, results: undefined }, { tasks: 5, passed: 5, failed: 0, extraction_failed: 0, timeouts: 0, results: undefined });
  assert.equal(records.filter((x) => x.ok).length, r.completed);
  assert.ok(r.context_length! > 4096 && r.chars_per_token > 1);
});

test("a prompt that does not fit the context length is refused before anything is measured, naming the setting", async () => {
  const sent: RawRecord[] = [];
  await assert.rejects(
    runBenchmark(ep(), benchmarkSchema.parse({ runs: 1, warmupRuns: 0, longContextTokens: [300_000], concurrency: [], coding: false }), () => undefined, (x) => sent.push(x), "too-long"),
    /benchmark\.longContextTokens: a prompt of 300000 tokens plus 256 output tokens \(benchmark\.maxTokens\) does not fit the server's context length of \d+ tokens/,
  );
  assert.equal(sent.length, 0);
});

test("a request that fails is recorded and retried; one that fails every attempt is counted, and the run goes on", async () => {
  // A proxy in front of the simulator that fails every other /generate of the measured phase.
  const http = await import("node:http");
  let n = 0;
  const proxy = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const measured = req.url === "/generate" && !body.includes('"max_new_tokens":1,');
      if (measured && n++ % 2 === 0) return void res.writeHead(503, { "content-type": "application/json" }).end('{"error":"overloaded"}');
      const up = await fetch(`${ep().baseUrl}${req.url}`, { method: req.method, headers: { "content-type": "application/json" }, body: req.method === "POST" ? body : undefined });
      res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
      for await (const c of up.body as unknown as AsyncIterable<Uint8Array>) res.write(c);
      res.end();
    });
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  try {
    const records: RawRecord[] = [];
    const url = `http://127.0.0.1:${(proxy.address() as import("node:net").AddressInfo).port}`;
    const r = await runBenchmark({ baseUrl: url, model: "m" }, benchmarkSchema.parse({ runs: 3, warmupRuns: 0, maxTokens: 16, longContextTokens: [], concurrency: [], coding: false }), () => undefined, (x) => records.push(x), "retries");
    assert.equal(r.short.completed, 3);
    assert.equal(r.short.failed, 0);
    const failures = records.filter((x) => !x.ok);
    assert.equal(failures.length, 3, "each measured request failed once, recorded, then succeeded");
    assert.ok(failures.every((f) => f.attempt === 1 && /HTTP 503/.test(f.error!)));
    assert.ok(MAX_ATTEMPTS >= 2);
  } finally {
    proxy.close();
  }
});

test("corrupt output counts as coding failures", async () => {
  fs.writeFileSync(path.join(sb.dir, "faults.json"), JSON.stringify({ corruptOutput: true }));
  try {
    const r = await runBenchmark(ep(), benchmarkSchema.parse({ runs: 1, warmupRuns: 0, maxTokens: 16, longContextTokens: [], concurrency: [1], codingMaxTokens: 300 }), () => undefined, () => undefined, "coding-fails");
    assert.equal(r.coding!.passed, 0);
    assert.equal(r.coding!.extraction_failed + r.coding!.failed, 5);
  } finally {
    fs.writeFileSync(path.join(sb.dir, "faults.json"), "{}");
  }
});
