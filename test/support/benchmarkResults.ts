// Benchmark results as stacks and bench/history hold them, for tests of what is made of them
// (the report, the history): this benchmark's (format 2) with where it was measured, and an
// older one's (format 1, no `format`), built from the few figures a test names.
import type { BenchmarkResult, PhaseStats } from "../../components/benchmark/run";
import type { FormatOneResult, MeasuredOn } from "../../components/benchmark/compare";

/** One phase whose per-request decode rates spread `spread` either side of `decode`. */
export function phase(name: string, o: { decode: number; spread?: number; outputThroughput?: number; concurrency?: number; contextTokens?: number; ttftMs?: number; requests?: number }): PhaseStats {
  const spread = o.spread ?? 0;
  const requests = o.requests ?? 3;
  return {
    phase: name,
    concurrency: o.concurrency ?? 1,
    context_tokens: o.contextTokens ?? 128,
    prompt_tokens: o.contextTokens ?? 128,
    cached_tokens: 0,
    completed: requests,
    failed: 0,
    total_input_tokens: requests * (o.contextTokens ?? 128),
    total_output_tokens: requests * 256,
    duration: 5,
    request_throughput: requests / 5,
    output_throughput: o.outputThroughput ?? o.decode * 0.9,
    decode_tokens_per_s: o.decode,
    decode_tokens_per_s_min: o.decode - spread,
    decode_tokens_per_s_max: o.decode + spread,
    mean_ttft_ms: o.ttftMs ?? 69,
    median_ttft_ms: o.ttftMs ?? 69,
    p99_ttft_ms: (o.ttftMs ?? 69) + 10,
    mean_tpot_ms: 1000 / o.decode,
    median_tpot_ms: 1000 / o.decode,
    p99_tpot_ms: 1000 / (o.decode - spread || o.decode),
    mean_itl_ms: 1000 / o.decode,
    median_itl_ms: 1000 / o.decode,
    p99_itl_ms: 1000 / o.decode,
    median_chunk_itl_ms: 5000 / o.decode,
    p99_chunk_itl_ms: 6000 / o.decode,
    mean_e2e_latency_ms: 256_000 / o.decode,
    median_e2e_latency_ms: 256_000 / o.decode,
    p99_e2e_latency_ms: 256_000 / o.decode,
    accept_length: null,
    finish_reasons: { length: requests },
  };
}

export interface ResultSpec {
  /** Short-prompt decode tok/s (median) and the spread either side. */
  decode: number;
  spread?: number;
  /** Decode tok/s per long context. */
  long?: Record<number, number>;
  /** output_throughput per concurrency level. */
  concurrency?: Record<number, number>;
  accept?: number | null;
  /** [passed, tasks, extraction failed]; null: the check was off. */
  coding?: [number, number, number?] | null;
  warnings?: string[];
  /** Where it was measured; null: not recorded. */
  on?: Partial<MeasuredOn> | null;
}

export const H200 = { host: "10.0.0.5", gpu: "NVIDIA H200", gpuCount: 8, sglangVersion: "0.5.4.post1", mainPid: 4121 };

/** A format-2 result as the stack output `benchmark` holds it. */
export function resultOf(s: ResultSpec): BenchmarkResult & { measured_on?: MeasuredOn } {
  const short = { ...phase("short", { decode: s.decode, spread: s.spread }), accept_length: s.accept ?? null };
  const coding = s.coding === null ? null : (([passed, tasks, unextractable = 0]) => ({ tasks, passed, failed: tasks - passed - unextractable, extraction_failed: unextractable, timeouts: 0, results: [] }))(s.coding ?? [5, 5]);
  const long = Object.entries(s.long ?? {}).map(([ctx, decode]) => phase(`long-${ctx}`, { decode, spread: s.spread, contextTokens: Number(ctx) }));
  const concurrency = Object.entries(s.concurrency ?? {}).map(([level, tps]) => phase(`concurrency-${level}`, { decode: s.decode, outputThroughput: tps, concurrency: Number(level), requests: 4 * Number(level) }));
  const phases = [short, ...long, ...concurrency];
  return {
    format: 2,
    short,
    long,
    concurrency,
    accept_length: s.accept ?? null,
    accept_length_source: s.accept === null || s.accept === undefined ? "not reported (no speculative decoding: no spec_verify_ct)" : "completion_tokens / spec_verify_ct of the short phase's timed /generate requests",
    coding,
    completed: phases.reduce((a, p) => a + p.completed, 0),
    failed: 0,
    total_output_tokens: phases.reduce((a, p) => a + p.total_output_tokens, 0),
    duration: 60,
    chars_per_token: 4.1,
    prompt_nonce: "0123456789abcdef",
    context_length: 262144,
    warnings: s.warnings ?? [],
    ...(s.on === null ? {} : { measured_on: { ...H200, ...s.on } }),
  };
}

/** A format-1 result: output_throughput is the single-stream decode rate, with its min and max. */
export function formatOneResultOf(s: { decode: number; spread: number; long?: Record<number, number>; concurrency?: Record<number, number>; accept?: number }): FormatOneResult {
  const lat = (tps: number) => ({ prompt_tokens: 128, runs: 3, output_throughput: tps, output_throughput_min: tps - s.spread, output_throughput_max: tps + s.spread, mean_ttft_ms: 70, median_ttft_ms: 69, p99_ttft_ms: 80, mean_itl_ms: 30, median_itl_ms: 29, p99_itl_ms: 40 });
  return {
    short: lat(s.decode),
    long: Object.entries(s.long ?? {}).map(([ctx, tps]) => ({ ...lat(tps), context_tokens: Number(ctx) })),
    concurrency: Object.entries(s.concurrency ?? {}).map(([level, tps]) => ({ concurrency: Number(level), completed: Number(level), output_throughput: tps, request_throughput: 1, median_ttft_ms: 70, p99_ttft_ms: 80, median_itl_ms: 29, duration: 5 })),
    accept_length: s.accept ?? 6.5,
    accept_length_source: "two raw /generate calls",
    coding: { tasks: 5, passed: 5, failed: 0, extraction_failed: 0, timeouts: 0, results: [] },
  };
}

/** The fingerprints configurationOf gives the stacks the tests compare (one benchmark, one code version). */
export const SETTINGS = { benchmark: "6afe5e8f6155", benchmarkCode: "00fecfdfc67e" };
/** Every deployment setting but the speculative ones, as configurationOf records them (deploymentSettingsOf), alike for every stack. */
export const DEPLOYED = {
  "model.contextLength": null,
  "model.extraArgs": [],
  "model.memFractionStatic": 0.85,
  "model.path": "/models/Kimi-K2.6",
  "model.quantization": null,
  "model.tpSize": 8,
  "service.environment": "none",
  "service.python": "/usr/bin/python3",
  nodes: 0,
  sglangBuild: "ddtree-fork",
};
const COMMON = { sglangBuild: "ddtree-fork", model: "/models/Kimi-K2.6", tpSize: 8, deployment: "058039ea7b6e", deploymentSettings: DEPLOYED, ...SETTINGS };

/** A DDTree stack's configuration output. */
export function ddtree(stack: string, budget: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { stack, algorithm: "DDTREE", budget, topk: 4, draftWindowSize: 2048, compactCache: true, ...COMMON, ...extra };
}

/** The no-speculation baseline's configuration output. */
export function noSpeculation(stack = "baseline", extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { stack, algorithm: null, draftWindowSize: "none", compactCache: false, ...COMMON, ...extra };
}
