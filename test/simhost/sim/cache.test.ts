// SGLang's prefix cache (srt/mem_cache/radix_cache.py, RadixCache) in the simulator: the
// tree itself, and what a client sees of it: meta_info.cached_tokens, a time to first token
// that prefills only the uncached part, /flush_cache, --disable-radix-cache, and
// usage.prompt_tokens_details with --enable-cache-report
// (srt/entrypoints/openai/usage_processor.py). A benchmark that re-sends one prompt
// measures the cache, not the prefill: these tests make sure it would read so.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { RadixCache } from "../../../simhost/sim/sglang/radix_cache";
import { countTokens } from "../../../simhost/sim/sglang/perf";
import { generate, withServingSim } from "../../support/localSim";

test("RadixCache: longest common prefix in whole 4-character tokens; shared prefixes stored once", () => {
  const c = new RadixCache(1_000);
  assert.equal(c.match("anything"), 0);
  const system = "You are a helpful assistant. ".repeat(4); // 116 characters, 29 tokens
  c.insert(system + "First question?");
  assert.equal(c.match(system + "First question?"), countTokens(system + "First question?"));
  assert.equal(c.match(system + "Second question?"), 29, "the shared system prompt");
  c.insert(system + "Second question?");
  assert.equal(c.size, 29 + countTokens("First question?") + countTokens("Second question?"), "split at the common prefix");
  assert.equal(c.match(system + "Second"), 29 + 1, "'Seco' is a whole cached token, 'nd' is not");
  // A final partial token matches only itself.
  c.insert("abcdef");
  assert.equal(c.match("abcdef"), 2);
  assert.equal(c.match("abcdefgh"), 1);
  c.reset();
  assert.deepEqual([c.size, c.match(system + "First question?")], [0, 0]);
});

test("RadixCache: evicts the least recently used sequences first", () => {
  const c = new RadixCache(30);
  const seq = (x: string) => x.repeat(40); // 10 tokens each, nothing shared
  for (const x of "abc") c.insert(seq(x));
  assert.equal(c.size, 30);
  c.match(seq("a")); // now b is the oldest
  c.insert(seq("d"));
  assert.equal(c.size, 30);
  assert.deepEqual(["a", "b", "c", "d"].map((x) => c.match(seq(x))), [10, 0, 10, 10]);
});

const dflash = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];
/** About 8k tokens of varied text (distinct records), ending in a question. */
const longPrompt = (seed: string) => Array.from({ length: 600 }, (_, i) => `Record ${seed}-${i}: order ${(i * 7919) % 10007} shipped to depot ${(i * 31) % 97} on day ${i % 365}.`).join("\n") + "\nWhich depot got the most orders?";

// scheduler.py / schedule_batch.py: match_prefix at admission, cache_unfinished_req after the
// prefill, cache_finished_req at the end; flush_cache resets the tree when nothing runs.
// At speedScale 0.3 an 8k-token prefill takes about 1.4 s: the TTFT ratios below keep a margin
// of several hundred ms for HTTP and a loaded machine (at 1, about 0.45 s left a 100 ms stall to fail them).
test("the same 8k-token prompt twice: the second is served from the cache, fast; after /flush_cache it is slow again", async () => {
  await withServingSim({ speedScale: 0.3 }, dflash, async ({ port }) => {
    const prompt = longPrompt("a");
    const ask = () => generate(port, { text: prompt, sampling_params: { max_new_tokens: 4 }, stream: true });
    const first = await ask();
    const second = await ask();
    const promptTokens = first.events[0].meta_info!.prompt_tokens;
    assert.ok(promptTokens > 8000, String(promptTokens));
    assert.equal(first.events[0].meta_info!.cached_tokens, 0);
    assert.equal(second.events[0].meta_info!.cached_tokens, promptTokens - 1, "all but the last prompt token");
    assert.ok(second.ttftMs < first.ttftMs / 3, `TTFT ${second.ttftMs.toFixed(0)} ms after ${first.ttftMs.toFixed(0)} ms`);
    // A different question after the same records: the shared prefix is cached.
    const followUp = await generate(port, { text: prompt.replace(/Which depot.*$/, "Which day had the most orders?"), sampling_params: { max_new_tokens: 4 } });
    assert.ok(followUp.events[0].meta_info!.cached_tokens > promptTokens - 20);

    assert.equal((await fetch(`http://127.0.0.1:${port}/flush_cache`, { method: "POST" })).status, 200);
    const third = await ask();
    assert.equal(third.events[0].meta_info!.cached_tokens, 0);
    assert.ok(third.ttftMs > 2 * second.ttftMs, `TTFT ${third.ttftMs.toFixed(0)} ms after the flush`);
  });
});

test("/flush_cache is refused while a request runs", async () => {
  await withServingSim({ speedScale: 0.5 }, dflash, async ({ port }) => {
    const running = generate(port, { text: "hello", sampling_params: { max_new_tokens: 300, ignore_eos: true } });
    let refused = 0;
    while (refused === 0) {
      const status = (await fetch(`http://127.0.0.1:${port}/flush_cache`, { method: "POST" })).status;
      if (status === 400) refused++;
      else await new Promise((r) => setTimeout(r, 10)); // until the request is admitted
    }
    await running;
    assert.equal((await fetch(`http://127.0.0.1:${port}/flush_cache`, { method: "POST" })).status, 200);
  });
});

test("--disable-radix-cache never caches", async () => {
  await withServingSim({ speedScale: 0.3 }, (dir, port) => [...dflash(dir, port), "--disable-radix-cache"], async ({ port }) => {
    const prompt = longPrompt("b");
    const runs = [];
    for (let i = 0; i < 2; i++) runs.push(await generate(port, { text: prompt, sampling_params: { max_new_tokens: 4 }, stream: true }));
    assert.deepEqual(runs.map((r) => r.events[0].meta_info!.cached_tokens), [0, 0]);
    assert.ok(runs[1].ttftMs > runs[0].ttftMs / 2, `TTFT ${runs.map((r) => r.ttftMs.toFixed(0)).join(" then ")} ms`);
  });
});

test("chat usage.prompt_tokens_details: cached_tokens with --enable-cache-report, null without", async () => {
  const chat = async (port: number) =>
    ((await (await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ messages: [{ role: "user", content: longPrompt("c") }], max_tokens: 4 }) })).json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } | null } }).usage;
  await withServingSim({ speedScale: 10 }, (dir, port) => [...dflash(dir, port), "--enable-cache-report"], async ({ port }) => {
    assert.equal((await chat(port)).prompt_tokens_details, null, "nothing cached: no details (UsageProcessor._details_if_cached)");
    const again = await chat(port);
    assert.deepEqual(again.prompt_tokens_details, { cached_tokens: again.prompt_tokens - 1 });
  });
  await withServingSim({ speedScale: 10 }, dflash, async ({ port }) => {
    await chat(port);
    assert.equal((await chat(port)).prompt_tokens_details, null);
  });
});
