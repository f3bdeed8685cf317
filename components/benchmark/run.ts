// The benchmark itself, against a live OpenAI-compatible server: single-stream decode at
// short and long context, throughput at several concurrency levels, acceptance length of
// this benchmark's own requests, and the coding check. Field names follow
// `sglang.bench_serving` where they fit.
import { Endpoint, nativeAcceptLength, requestSignal, streamChat, StreamResult } from "./client";
import { summarize } from "./stats";
import { CODING_TASKS, CodingOutcome, gradeAnswer } from "./coding";
import type { BenchmarkSettings } from "./schema";

export interface LatencyStats {
  prompt_tokens: number;
  runs: number;
  /** Median single-stream decode tokens/s, and its spread over the runs. */
  output_throughput: number;
  output_throughput_min: number;
  output_throughput_max: number;
  mean_ttft_ms: number;
  median_ttft_ms: number;
  p99_ttft_ms: number;
  mean_itl_ms: number;
  median_itl_ms: number;
  p99_itl_ms: number;
}

export interface ConcurrencyStats {
  concurrency: number;
  completed: number;
  /** Aggregate output tokens/s over the batch. */
  output_throughput: number;
  request_throughput: number;
  median_ttft_ms: number;
  p99_ttft_ms: number;
  median_itl_ms: number;
  duration: number;
}

export interface CodingStats {
  tasks: number;
  passed: number;
  failed: number;
  extraction_failed: number;
  timeouts: number;
  results: { task: string; outcome: CodingOutcome; detail: string }[];
}

export interface BenchmarkResult {
  short: LatencyStats;
  long: (LatencyStats & { context_tokens: number })[];
  concurrency: ConcurrencyStats[];
  accept_length: number | null;
  accept_length_source: string;
  coding: CodingStats | null;
  completed: number;
  total_output_tokens: number;
  duration: number;
}

export interface RawRecord {
  phase: string;
  context_tokens?: number;
  concurrency?: number;
  ttft_ms: number;
  e2e_ms: number;
  output_tokens: number;
  decode_tokens_per_second: number;
  median_itl_ms: number;
}

/** Filler text of about `tokens` tokens (4 characters each), then a question. */
export function promptOfTokens(tokens: number, seed: string): string {
  const sentence = `Note ${seed}: speculative decoding drafts several tokens and verifies them in one pass. `;
  const body = sentence.repeat(Math.max(1, Math.ceil((tokens * 4) / sentence.length)));
  return `${body.slice(0, Math.max(0, tokens * 4 - 60))}\nSummarize the notes above in detail.`;
}

function latencyStats(results: StreamResult[], promptTokens: number): LatencyStats {
  const tps = summarize(results.map((r) => r.decodeTokensPerSecond));
  const ttft = summarize(results.map((r) => r.ttftMs));
  const itl = summarize(results.flatMap((r) => (r.itlMs.length ? r.itlMs : [0])));
  return {
    prompt_tokens: promptTokens,
    runs: results.length,
    output_throughput: round(tps.median),
    output_throughput_min: round(tps.min),
    output_throughput_max: round(tps.max),
    mean_ttft_ms: round(ttft.mean),
    median_ttft_ms: round(ttft.median),
    p99_ttft_ms: round(ttft.p99),
    mean_itl_ms: round(itl.mean),
    median_itl_ms: round(itl.median),
    p99_itl_ms: round(itl.p99),
  };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

export async function runBenchmark(
  ep: Endpoint,
  s: BenchmarkSettings,
  progress: (message: string) => void,
  record: (r: RawRecord) => void,
): Promise<BenchmarkResult> {
  const started = performance.now();
  let completed = 0;
  let totalTokens = 0;
  const raw = (phase: string, r: StreamResult, extra: Partial<RawRecord> = {}) => {
    completed++;
    totalTokens += r.outputTokens;
    const itl = r.itlMs.length ? summarize(r.itlMs).median : 0;
    record({ phase, ...extra, ttft_ms: round(r.ttftMs), e2e_ms: round(r.e2eMs), output_tokens: r.outputTokens, decode_tokens_per_second: round(r.decodeTokensPerSecond), median_itl_ms: round(itl) });
  };

  const singleStream = async (phase: string, promptTokens: number): Promise<LatencyStats> => {
    const prompt = promptOfTokens(promptTokens, phase);
    for (let i = 0; i < s.warmupRuns; i++) {
      progress(`${phase}: warm-up ${i + 1}/${s.warmupRuns}`);
      await streamChat(ep, prompt, s.maxTokens);
    }
    const results: StreamResult[] = [];
    for (let i = 0; i < s.runs; i++) {
      const r = await streamChat(ep, prompt, s.maxTokens);
      results.push(r);
      raw(phase, r, { context_tokens: promptTokens });
      progress(`${phase}: run ${i + 1}/${s.runs}: ${r.decodeTokensPerSecond.toFixed(1)} tok/s, TTFT ${r.ttftMs.toFixed(0)} ms`);
    }
    return latencyStats(results, results[0].promptTokens || promptTokens);
  };

  const short = await singleStream("short", s.shortPromptTokens);
  const long: BenchmarkResult["long"] = [];
  for (const ctx of s.longContextTokens) long.push({ context_tokens: ctx, ...(await singleStream(`long-${ctx}`, ctx)) });

  const concurrency: ConcurrencyStats[] = [];
  for (const level of s.concurrency) {
    progress(`concurrency ${level}: ${level} streams at once`);
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: level }, (_, i) => streamChat(ep, promptOfTokens(s.shortPromptTokens, `c${level}-${i}`), s.maxTokens)));
    const seconds = (performance.now() - t0) / 1000;
    for (const r of results) raw("concurrency", r, { concurrency: level });
    const tokens = results.reduce((a, r) => a + r.outputTokens, 0);
    concurrency.push({
      concurrency: level,
      completed: results.length,
      output_throughput: round(tokens / seconds),
      request_throughput: round(results.length / seconds),
      median_ttft_ms: round(summarize(results.map((r) => r.ttftMs)).median),
      p99_ttft_ms: round(summarize(results.map((r) => r.ttftMs)).p99),
      median_itl_ms: round(summarize(results.flatMap((r) => (r.itlMs.length ? r.itlMs : [0]))).median),
      duration: round(seconds),
    });
  }

  progress("acceptance length of this benchmark's requests");
  const native = await nativeAcceptLength(ep, [promptOfTokens(s.shortPromptTokens, "accept-a"), promptOfTokens(s.shortPromptTokens, "accept-b")], s.maxTokens);
  let acceptLength: number | null = native ?? null;
  let source = "completion_tokens / spec_verify_ct of this benchmark's /generate requests";
  if (native === undefined) {
    const { path: infoPath, info } = await serverInfo(ep);
    acceptLength = (info as { internal_states?: { avg_spec_accept_length?: number }[] }).internal_states?.[0]?.avg_spec_accept_length ?? null;
    source = acceptLength === null ? "not reported by this server" : `${infoPath} avg_spec_accept_length (server average, not this benchmark's alone)`;
  }

  let coding: CodingStats | null = null;
  if (s.coding) {
    const results: CodingStats["results"] = [];
    for (const task of CODING_TASKS) {
      progress(`coding check: ${task.id}`);
      const r = await streamChat(ep, task.prompt, s.codingMaxTokens);
      raw("coding", r);
      const graded = gradeAnswer(task, r.text);
      results.push({ task: task.id, ...graded });
    }
    const count = (o: CodingOutcome) => results.filter((r) => r.outcome === o).length;
    coding = { tasks: results.length, passed: count("pass"), failed: count("fail"), extraction_failed: count("extraction-failed"), timeouts: count("timeout"), results };
  }

  return {
    short,
    long,
    concurrency,
    accept_length: acceptLength === null ? null : Math.round(acceptLength * 1000) / 1000,
    accept_length_source: source,
    coding,
    completed,
    total_output_tokens: totalTokens,
    duration: round((performance.now() - started) / 1000),
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
