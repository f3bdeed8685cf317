// The benchmark itself, against a live SGLang server: single-stream requests at short and
// long context, throughput at several concurrency levels, and the coding check. Timed
// requests use SGLang's native streaming /generate, as bench_serving's default `sglang`
// backend does, and every figure is computed with bench_serving's formulas over the raw
// per-request records (docs/benchmark.md maps every field to bench_serving and vLLM):
// - output_throughput: completion tokens / duration (of the phase);
// - TPOT per request: (e2e - TTFT) / (completion tokens - 1); decode_tokens_per_s = 1/TPOT;
// - ITL per token: a chunk's gap divided over the tokens it carried (bench_serving's sglang
//   backend); chunk ITL: the gap between chunks (a speculative chunk is one verify step);
// - accept_length: completion tokens / spec_verify_ct summed over the phase's timed requests;
// - percentiles linearly interpolated, as numpy's.
// The workload (./workload.ts) gives every request a document of its own, in this run and
// across runs (the run's prompt nonce is in every seed), so the prefix cache never turns a
// prefill into a hit (cached_tokens is recorded to show it); the cache is also flushed before
// every timed phase, and a phase whose flush the server refused says so in `warnings`.
import { contextLength, Endpoint, flushCache, GenerateResult, promptTokensOf, requestSignal, streamChat, streamGenerate } from "./client";
import { percentile, summarize } from "./stats";
import { CODING_TASKS, CodingOutcome, gradeAnswer } from "./coding";
import { checkFits, documentOf, lengthHeld, promptOf } from "./workload";
import type { BenchmarkSettings } from "./schema";

/** The figures of one phase, in bench_serving's names where the meaning is the same. */
export interface PhaseStats {
  /** "short", "long-8192", "concurrency-4". */
  phase: string;
  /** Requests in flight at once (1 for single-stream phases). */
  concurrency: number;
  /** Prompt length asked for, in the server's tokens. */
  context_tokens: number;
  /** Median prompt length the server counted (usage.prompt_tokens). */
  prompt_tokens: number;
  /** Prompt tokens served from the prefix cache, summed over the phase (near 0: no cache trap). */
  cached_tokens: number;
  completed: number;
  failed: number;
  total_input_tokens: number;
  total_output_tokens: number;
  /** Seconds from the phase's first request to its last answer. */
  duration: number;
  request_throughput: number;
  /** Completion tokens / duration (bench_serving's and vLLM's meaning). */
  output_throughput: number;
  /** Per-request decode rate, 1/TPOT: median, and its spread over the phase's requests. */
  decode_tokens_per_s: number;
  decode_tokens_per_s_min: number;
  decode_tokens_per_s_max: number;
  mean_ttft_ms: number;
  median_ttft_ms: number;
  p99_ttft_ms: number;
  mean_tpot_ms: number;
  median_tpot_ms: number;
  p99_tpot_ms: number;
  /** Per token: each chunk's gap divided over its tokens (bench_serving, sglang backend). */
  mean_itl_ms: number;
  median_itl_ms: number;
  p99_itl_ms: number;
  /** Per chunk: the gaps between chunks as they arrive (one speculative verify step each). */
  median_chunk_itl_ms: number;
  p99_chunk_itl_ms: number;
  mean_e2e_latency_ms: number;
  median_e2e_latency_ms: number;
  p99_e2e_latency_ms: number;
  /** Completion tokens / verify steps of this phase's timed requests; null without speculation. */
  accept_length: number | null;
  /** How the requests ended: { length: n, stop: n }. */
  finish_reasons: Record<string, number>;
}

export interface CodingStats {
  tasks: number;
  passed: number;
  failed: number;
  extraction_failed: number;
  timeouts: number;
  results: { task: string; outcome: CodingOutcome; detail: string }[];
}

export interface ServerIdentity {
  /** SGLang's version (/server_info). */
  version: string | null;
  /** sha256 of the server's public arguments (no secrets), before and after: the same server. */
  args_hash: string;
}

export interface BenchmarkResult {
  /** 2: this shape (1: before bench_serving's formulas; its output_throughput was a decode rate). */
  format: 2;
  short: PhaseStats;
  long: PhaseStats[];
  concurrency: PhaseStats[];
  /** The short phase's acceptance length (its timed requests). */
  accept_length: number | null;
  accept_length_source: string;
  coding: CodingStats | null;
  /** Over every phase. */
  completed: number;
  failed: number;
  total_output_tokens: number;
  duration: number;
  /** Server tokens per character of the workload's text, measured once. */
  chars_per_token: number;
  /** Mixed into every prompt's seed (workload.ts promptNonce): with it, this run's prompts can be rebuilt. */
  prompt_nonce: string;
  context_length: number | null;
  /** What a reader must know: prompts off their length, cache hits, failed requests. */
  warnings: string[];
}

/** One attempt of one request, as it happened: the raw record the figures are computed from. */
export interface RawRecord {
  phase: string;
  concurrency: number;
  context_tokens: number;
  kind: string;
  attempt: number;
  ok: boolean;
  error?: string;
  /** ms from the phase's start to this request's start. */
  start_ms?: number;
  /** A warm-up request: not counted in any figure. */
  warmup?: boolean;
  prompt_tokens?: number;
  cached_tokens?: number | null;
  output_tokens?: number;
  finish_reason?: string;
  ttft_ms?: number;
  e2e_ms?: number;
  /** Per chunk: ms since the previous chunk, and the tokens it carried (the first: since the request). */
  chunks?: [number, number][];
  spec_verify_ct?: number | null;
}

/** Tries per request: a failure is recorded and retried, up to this many attempts in all. */
export const MAX_ATTEMPTS = 3;
/** Prompt tokens per request that may match another prompt by chance (the first few words). */
const CACHED_ALLOWANCE = 16;
/** Pause before retry k: k times this. */
const RETRY_BACKOFF_MS = 500;

const round = (x: number, digits = 2) => (Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : NaN);

/** Pure: bench_serving's per-token ITL of one request (gaps after the first chunk, divided over their tokens). */
export function perTokenItl(chunks: [number, number][]): number[] {
  return chunks.slice(1).flatMap(([gap, tokens]) => Array.from({ length: tokens }, () => gap / tokens));
}

/** Pure: TPOT of one request in ms, as bench_serving: (latency - ttft) / (output_len - 1); NaN below 2 tokens. */
export function tpotMs(r: { e2e_ms: number; ttft_ms: number; output_tokens: number }): number {
  return r.output_tokens > 1 ? (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1) : NaN;
}

/** Pure: a phase's figures from its raw records (successful attempts; failures counted). */
export function phaseStats(phase: string, concurrency: number, contextTokens: number, records: RawRecord[], durationS: number): PhaseStats {
  const ok = records.filter((r) => r.ok) as Required<RawRecord>[];
  const failed = records.filter((r) => !r.ok && r.attempt === MAX_ATTEMPTS).length;
  if (ok.length === 0) throw new Error(`benchmark phase ${phase}: no request succeeded (${records.filter((r) => !r.ok).map((r) => r.error).slice(-1)[0] ?? "none sent"})`);
  const stat = (xs: number[]) => {
    const v = xs.filter((x) => Number.isFinite(x));
    if (v.length === 0) return { mean: NaN, median: NaN, p99: NaN, min: NaN, max: NaN };
    const s = summarize(v);
    return { mean: s.mean, median: s.median, p99: s.p99, min: s.min, max: s.max };
  };
  const ttft = stat(ok.map((r) => r.ttft_ms));
  const tpot = stat(ok.map((r) => tpotMs(r)));
  const decode = stat(ok.map((r) => 1000 / tpotMs(r)));
  const itl = stat(ok.flatMap((r) => perTokenItl(r.chunks)));
  const chunkItl = stat(ok.flatMap((r) => r.chunks.slice(1).map(([gap]) => gap)));
  const e2e = stat(ok.map((r) => r.e2e_ms));
  const out = ok.reduce((a, r) => a + r.output_tokens, 0);
  const steps = ok.every((r) => typeof r.spec_verify_ct === "number" && r.spec_verify_ct > 0) ? ok.reduce((a, r) => a + (r.spec_verify_ct as number), 0) : 0;
  const finish: Record<string, number> = {};
  for (const r of ok) finish[r.finish_reason] = (finish[r.finish_reason] ?? 0) + 1;
  return {
    phase,
    concurrency,
    context_tokens: contextTokens,
    prompt_tokens: Math.round(percentile([...ok.map((r) => r.prompt_tokens)].sort((a, b) => a - b), 50)),
    cached_tokens: ok.reduce((a, r) => a + (r.cached_tokens ?? 0), 0),
    completed: ok.length,
    failed,
    total_input_tokens: ok.reduce((a, r) => a + r.prompt_tokens, 0),
    total_output_tokens: out,
    duration: round(durationS, 3),
    request_throughput: round(ok.length / durationS, 3),
    output_throughput: round(out / durationS),
    decode_tokens_per_s: round(decode.median),
    decode_tokens_per_s_min: round(decode.min),
    decode_tokens_per_s_max: round(decode.max),
    mean_ttft_ms: round(ttft.mean),
    median_ttft_ms: round(ttft.median),
    p99_ttft_ms: round(ttft.p99),
    mean_tpot_ms: round(tpot.mean),
    median_tpot_ms: round(tpot.median),
    p99_tpot_ms: round(tpot.p99),
    mean_itl_ms: round(itl.mean),
    median_itl_ms: round(itl.median),
    p99_itl_ms: round(itl.p99),
    median_chunk_itl_ms: round(chunkItl.median),
    p99_chunk_itl_ms: round(chunkItl.p99),
    mean_e2e_latency_ms: round(e2e.mean),
    median_e2e_latency_ms: round(e2e.median),
    p99_e2e_latency_ms: round(e2e.p99),
    accept_length: steps > 0 ? round(out / steps, 3) : null,
    finish_reasons: finish,
  };
}

/** Runs `tasks` with at most `limit` at once (a semaphore), in order of start. */
async function pool<T>(limit: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, tasks.length) }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]();
      }
    }),
  );
  return results;
}

export async function runBenchmark(
  ep: Endpoint,
  s: BenchmarkSettings,
  progress: (message: string) => void,
  record: (r: RawRecord) => void,
  /** This run's (workload.ts promptNonce): no two runs send the same prompt. */
  promptNonce: string,
): Promise<BenchmarkResult> {
  const started = performance.now();
  const warnings: string[] = [];

  // Lengths in the server's own tokens: one calibration request, then every prompt is
  // built to its length and checked against what the server counted.
  progress("calibrating prompt lengths against the server's tokenizer");
  const sample = documentOf(8000, "calibration");
  const charsPerToken = sample.length / (await promptTokensOf(ep, sample));
  const limit = await contextLength(ep);
  checkFits(s.shortPromptTokens, s.maxTokens, limit, "benchmark.shortPromptTokens");
  for (const ctx of s.longContextTokens) checkFits(ctx, s.maxTokens, limit, "benchmark.longContextTokens");

  let seq = 0;
  /**
   * One request, recorded attempt by attempt, retried up to MAX_ATTEMPTS, each attempt with a
   * prompt of its own (a failed attempt may have left its prompt in the prefix cache);
   * undefined when every attempt failed. An answer too short to time is not retried: greedy
   * decoding would give the same.
   */
  const one = async (phase: string, concurrency: number, ctx: number, phaseStart: number, measured: boolean, records: RawRecord[]): Promise<GenerateResult | undefined> => {
    const index = seq++;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const { text, kind } = promptOf(ctx, `${promptNonce}-${phase}-${index}-${attempt}`, index, charsPerToken);
      const t0 = performance.now();
      const base = { phase, concurrency, context_tokens: ctx, kind, attempt, ...(measured ? {} : { warmup: true }), start_ms: round(t0 - phaseStart) };
      let final = false;
      try {
        const r = await streamGenerate(ep, text, { maxNewTokens: s.maxTokens });
        if (r.finishReason === "length" && r.outputTokens !== s.maxTokens) throw new Error(`finish_reason "length" after ${r.outputTokens} tokens, not the ${s.maxTokens} asked (benchmark.maxTokens)`);
        if (r.outputTokens < 2) {
          final = true;
          throw new Error(`only ${r.outputTokens} token(s) (finish_reason "${r.finishReason}"): no decode to time`);
        }
        if (measured) {
          const rec: RawRecord = { ...base, ok: true, prompt_tokens: r.promptTokens, cached_tokens: r.cachedTokens, output_tokens: r.outputTokens, finish_reason: r.finishReason, ttft_ms: round(r.ttftMs, 3), e2e_ms: round(r.e2eMs, 3), chunks: r.chunks.map((c) => [round(c.gapMs, 3), c.tokens]), spec_verify_ct: r.specVerifyCt };
          records.push(rec);
          record(rec);
        }
        return r;
      } catch (e) {
        if (ep.signal?.aborted) throw e;
        const rec: RawRecord = { ...base, ...(final ? { attempt: MAX_ATTEMPTS } : {}), ok: false, error: (e as Error).message.slice(0, 500) };
        if (measured) records.push(rec);
        record(rec);
        progress(`${phase}: request failed (attempt ${attempt} of ${MAX_ATTEMPTS}): ${rec.error}`);
        if (final) return undefined;
        // A moment before the next attempt (a server briefly overloaded or restarting).
        if (attempt < MAX_ATTEMPTS) await new Promise((r) => setTimeout(r, RETRY_BACKOFF_MS * attempt));
      }
    }
    return undefined;
  };

  const finish = (st: PhaseStats) => {
    if (st.failed) warnings.push(`${st.phase}: ${st.failed} request(s) failed ${MAX_ATTEMPTS} times (raw records)`);
    // A few tokens per request may match another prompt's first words; more is a cache hit.
    if (st.cached_tokens > CACHED_ALLOWANCE * st.completed) warnings.push(`${st.phase}: ${st.cached_tokens} of ${st.total_input_tokens} prompt tokens came from the prefix cache`);
    if (!lengthHeld(st.context_tokens, st.prompt_tokens)) warnings.push(`${st.phase}: prompts measured ${st.prompt_tokens} tokens, not the ${st.context_tokens} asked`);
    const stopped = st.finish_reasons.stop ?? 0;
    if (stopped > st.completed / 2) warnings.push(`${st.phase}: ${stopped} of ${st.completed} answers ended before benchmark.maxTokens (finish_reason "stop")`);
    return st;
  };

  /** bench_serving --flush-cache, before every timed phase: an empty prefix cache (refused while requests run), or the phase is marked. */
  const flushBefore = async (phase: string) => {
    if (!(await flushCache(ep))) warnings.push(`${phase}: the server did not flush its prefix cache before this phase; every request still has a prompt of its own`);
  };

  const singleStream = async (phase: string, ctx: number): Promise<PhaseStats> => {
    await flushBefore(phase);
    const t0 = performance.now();
    for (let i = 0; i < s.warmupRuns; i++) {
      progress(`${phase}: warm-up ${i + 1}/${s.warmupRuns}`);
      await one(phase, 1, ctx, t0, false, []);
    }
    const records: RawRecord[] = [];
    const m0 = performance.now();
    for (let i = 0; i < s.runs; i++) {
      const r = await one(phase, 1, ctx, m0, true, records);
      progress(`${phase}: run ${i + 1}/${s.runs}: ${r ? `${(((r.outputTokens - 1) * 1000) / (r.e2eMs - r.ttftMs)).toFixed(1)} tok/s decode, TTFT ${r.ttftMs.toFixed(0)} ms, ${r.promptTokens} prompt tokens (${r.cachedTokens ?? 0} cached)` : "failed"}`);
    }
    return finish(phaseStats(phase, 1, ctx, records, (performance.now() - m0) / 1000));
  };

  const short = await singleStream("short", s.shortPromptTokens);
  const long: PhaseStats[] = [];
  for (const ctx of s.longContextTokens) long.push(await singleStream(`long-${ctx}`, ctx));

  const concurrency: PhaseStats[] = [];
  for (const level of s.concurrency) {
    const phase = `concurrency-${level}`;
    const n = Math.max(4 * level, s.runs);
    progress(`${phase}: ${n} requests, ${level} at a time`);
    await flushBefore(phase);
    const records: RawRecord[] = [];
    const t0 = performance.now();
    await pool(level, Array.from({ length: n }, () => () => one(phase, level, s.shortPromptTokens, t0, true, records)));
    concurrency.push(finish(phaseStats(phase, level, s.shortPromptTokens, records, (performance.now() - t0) / 1000)));
  }

  let coding: CodingStats | null = null;
  if (s.coding) {
    const results: CodingStats["results"] = [];
    for (const task of CODING_TASKS) {
      progress(`coding check: ${task.id}`);
      // As a user asks: the chat template, and the model stops where it ends its answer. A
      // request that fails is that task's failure (recorded), not the end of the benchmark.
      try {
        const r = await streamChat(ep, task.prompt, s.codingMaxTokens);
        results.push({ task: task.id, ...gradeAnswer(task, r.text) });
      } catch (e) {
        if (ep.signal?.aborted) throw e;
        const error = (e as Error).message.slice(0, 500);
        record({ phase: "coding", concurrency: 1, context_tokens: 0, kind: task.id, attempt: 1, ok: false, error });
        results.push({ task: task.id, outcome: "fail", detail: `the request failed: ${error}` });
      }
    }
    const count = (o: CodingOutcome) => results.filter((r) => r.outcome === o).length;
    coding = { tasks: results.length, passed: count("pass"), failed: count("fail"), extraction_failed: count("extraction-failed"), timeouts: count("timeout"), results };
  }

  const phases = [short, ...long, ...concurrency];
  return {
    format: 2,
    short,
    long,
    concurrency,
    accept_length: short.accept_length,
    accept_length_source: short.accept_length === null ? "not reported (no speculative decoding: no spec_verify_ct)" : "completion_tokens / spec_verify_ct of the short phase's timed /generate requests",
    coding,
    completed: phases.reduce((a, p) => a + p.completed, 0),
    failed: phases.reduce((a, p) => a + p.failed, 0),
    total_output_tokens: phases.reduce((a, p) => a + p.total_output_tokens, 0),
    duration: round((performance.now() - started) / 1000),
    chars_per_token: round(charsPerToken, 4),
    prompt_nonce: promptNonce,
    context_length: limit ?? null,
    warnings,
  };
}

/**
 * SGLang's server info: /server_info, or the deprecated /get_server_info only when the
 * former answers 404 (older versions). Only internal_states is read from it: the body
 * also holds api_key and other secrets, and none of it is stored.
 */
export async function serverInfo(ep: { baseUrl: string; apiKey?: string; signal?: AbortSignal }): Promise<{ path: string; info: unknown }> {
  const headers: Record<string, string> = ep.apiKey ? { authorization: `Bearer ${ep.apiKey}` } : {};
  for (const path of ["/server_info", "/get_server_info"]) {
    const res = await fetch(`${ep.baseUrl}${path}`, { headers, signal: requestSignal(ep, 60_000) }).catch(() => undefined);
    if (res?.status === 404) continue;
    return { path, info: res?.ok ? await res.json().catch(() => ({})) : {} };
  }
  return { path: "/server_info", info: {} };
}
