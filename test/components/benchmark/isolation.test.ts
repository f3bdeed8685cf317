// What keeps one run's measurement from another's (components/benchmark/run.ts, workload.ts),
// against the simulated SGLang and its radix cache: the prefix cache is flushed before every
// timed phase (concurrency phases too), a phase whose flush the server refused is marked in
// `warnings`, and a run's prompt nonce keeps its prompts from any earlier run's on the server.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { withServingSim } from "../../support/localSim";
import { runBenchmark } from "../../../components/benchmark/run";
import { benchmarkSchema } from "../../../components/benchmark/schema";
import { promptNonce } from "../../../components/benchmark/workload";

const args = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];
const SETTINGS = benchmarkSchema.parse({ runs: 2, warmupRuns: 1, maxTokens: 16, shortPromptTokens: 128, longContextTokens: [1024], concurrency: [2], coding: false });
const TIMED = ["short", "long-1024", "concurrency-2"];
const ep = (port: number) => ({ baseUrl: `http://127.0.0.1:${port}`, model: "m" });
const cacheWarnings = (w: string[]) => w.filter((x) => /came from the prefix cache/.test(x));

test("a run's prompt nonce: the same for the same run, another for another stack, runId or time", () => {
  const n = promptNonce("b16t4-w2048", "1", "2026-07-01T10:00:00.000Z");
  assert.match(n, /^[0-9a-f]{16}$/);
  assert.equal(promptNonce("b16t4-w2048", "1", "2026-07-01T10:00:00.000Z"), n, "rebuilt from the record");
  assert.notEqual(promptNonce("b16t4-w2048", "1", "2026-07-01T10:00:00.001Z"), n, "a re-run with the same runId");
  assert.notEqual(promptNonce("b16t4-w2048", "2", "2026-07-01T10:00:00.000Z"), n);
  assert.notEqual(promptNonce("b8t4-w2048", "1", "2026-07-01T10:00:00.000Z"), n);
});

test("the cache is flushed before every timed phase, the concurrency phases too, and nowhere else", async () => {
  await withServingSim({}, args, async ({ port, log }) => {
    const r = await runBenchmark(ep(port), SETTINGS, () => undefined, () => undefined, "flushed");
    assert.equal(r.prompt_nonce, "flushed");
    assert.deepEqual(r.warnings.filter((w) => /flush/.test(w)), []);
    // scheduler.py flush_cache logs each flush it does; the journal may trail the answers.
    const flushes = () => (log().match(/Cache flushed successfully!/g) ?? []).length;
    const deadline = Date.now() + 5000;
    while (flushes() < TIMED.length && Date.now() < deadline) await new Promise((res) => setTimeout(res, 25));
    assert.equal(flushes(), TIMED.length, log());
  });
});

test("where the server cannot flush, every timed phase says so; a new run's nonce still keeps it off the last run's prompts, the same nonce does not", async () => {
  // A server without /flush_cache (404): nothing empties its prefix cache between runs.
  await withServingSim({ removedEndpoints: ["/flush_cache"] }, args, async ({ port }) => {
    const first = await runBenchmark(ep(port), SETTINGS, () => undefined, () => undefined, promptNonce("s", "1", "2026-07-01T10:00:00.000Z"));
    assert.deepEqual(
      first.warnings.filter((w) => /did not flush/.test(w)),
      TIMED.map((p) => `${p}: the server did not flush its prefix cache before this phase; every request still has a prompt of its own`),
    );
    assert.deepEqual(cacheWarnings(first.warnings), []);
    // The same stack and runId again, later: its prompts are its own.
    const rerun = await runBenchmark(ep(port), SETTINGS, () => undefined, () => undefined, promptNonce("s", "1", "2026-07-01T10:05:00.000Z"));
    assert.deepEqual(cacheWarnings(rerun.warnings), [], "a re-run hits nothing the first run left in the cache");
    for (const p of [rerun.short, ...rerun.long, ...rerun.concurrency]) assert.ok(p.cached_tokens <= 16 * p.completed, `${p.phase}: ${p.cached_tokens} cached`);
    // The control: a run that repeats the first one's nonce repeats its prompts, and the cache serves them.
    const repeat = await runBenchmark(ep(port), SETTINGS, () => undefined, () => undefined, first.prompt_nonce);
    assert.ok(cacheWarnings(repeat.warnings).length > 0, `repeated prompts hit the cache: ${repeat.warnings.join("; ")}`);
  });
});
