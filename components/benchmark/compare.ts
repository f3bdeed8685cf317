// Pure: a stored benchmark result's figures in one shape, whatever the benchmark that measured
// it (format 1 or 2), and where it was measured. What is made of them (which configuration is
// best, speedups, the review's differences) is components/verdict/'s. Imports nothing of this
// folder but run.ts's types, so that the handler, the history, the report and the verdict can
// all import it without a circle.
import type { BenchmarkResult, CodingStats, PhaseStats } from "./run";

/** Where and on what the numbers were taken. */
export interface MeasuredOn {
  host: string;
  gpu: string | null;
  gpuCount: number | null;
  sglangVersion: string | null;
  /** The server's main PID: a different one is a different server launch. */
  mainPid: number;
}

/** A single-stream phase of a format-1 result: its output_throughput was the median per-request decode rate. */
interface FormatOnePhase {
  prompt_tokens: number;
  runs: number;
  output_throughput: number;
  output_throughput_min: number;
  output_throughput_max: number;
  median_ttft_ms: number;
}

/** A result of the benchmark before bench_serving's formulas (it has no `format`), as still kept in state and bench/history. */
export interface FormatOneResult {
  format?: undefined;
  short: FormatOnePhase;
  long: (FormatOnePhase & { context_tokens: number })[];
  /** Its output_throughput: aggregate output tokens/s over one burst of `concurrency` requests. */
  concurrency: { concurrency: number; output_throughput: number }[];
  accept_length: number | null;
  accept_length_source: string;
  coding: CodingStats | null;
}

/** A benchmark output as stored: this benchmark's or an older one's, with where it was measured (absent before format 2). */
export type StoredResult = (BenchmarkResult | FormatOneResult) & { measured_on?: MeasuredOn };

/** Single-stream decode tokens/s per request: the median and its spread over the phase's requests. */
export interface DecodeRate {
  median: number;
  min: number;
  max: number;
  /** Requests behind it. */
  requests: number;
}

/** A row's figures in one shape, whatever the format that measured them. */
export interface Figures {
  format: 1 | 2;
  short: DecodeRate;
  shortPromptTokens: number;
  long: { contextTokens: number; decode: DecodeRate }[];
  /** Completion tokens / duration per concurrency level (format 1: aggregate tokens/s of one burst). */
  concurrency: { level: number; outputThroughput: number }[];
  medianTtftMs: number;
  acceptLength: number | null;
  acceptLengthSource: string;
  coding: CodingStats | null;
  warnings: string[];
}

/**
 * The stack output that holds a benchmark's full numbers (index.ts). Pulumi shows no output
 * whose name begins with "__" in `up` and `preview` (as it hides a dynamic resource's
 * `__provider`), so the terminal gets the short `benchmark` summary alone (summary.ts), while
 * `npx pulumi stack output __benchmarkResult --json` and every program still read the numbers.
 */
export const FULL_RESULT_OUTPUT = "__benchmarkResult";

const isStoredResult = (v: unknown): v is StoredResult => typeof v === "object" && v !== null && "short" in v && "long" in v;

/**
 * Pure: the full numbers of a stack's outputs as stored (plain values: `stack output --json`, or
 * the root resource's outputs in an exported state): FULL_RESULT_OUTPUT; in a state written
 * before it existed, `benchmark` itself (then the full result); null when nothing was measured.
 */
export function storedResultOf(outputs: Record<string, unknown>): StoredResult | null {
  if (FULL_RESULT_OUTPUT in outputs) return isStoredResult(outputs[FULL_RESULT_OUTPUT]) ? (outputs[FULL_RESULT_OUTPUT] as StoredResult) : null;
  return isStoredResult(outputs.benchmark) ? outputs.benchmark : null;
}

/** Pure: the same from the Automation API's outputs (`{ value, secret }` per name). */
export function storedResultOfOutputs(outputs: Record<string, { value: unknown } | undefined>): StoredResult | null {
  return storedResultOf(Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v?.value])));
}

/** Pure: a stored result's figures; a format-1 result's decode rate is its output_throughput and spread. */
export function figuresOf(r: StoredResult): Figures {
  const common = { acceptLength: r.accept_length, acceptLengthSource: r.accept_length_source, coding: r.coding, medianTtftMs: r.short.median_ttft_ms, shortPromptTokens: r.short.prompt_tokens };
  if (r.format === 2) {
    const rate = (p: PhaseStats): DecodeRate => ({ median: p.decode_tokens_per_s, min: p.decode_tokens_per_s_min, max: p.decode_tokens_per_s_max, requests: p.completed });
    return {
      ...common,
      format: 2,
      short: rate(r.short),
      long: r.long.map((l) => ({ contextTokens: l.context_tokens, decode: rate(l) })),
      concurrency: r.concurrency.map((c) => ({ level: c.concurrency, outputThroughput: c.output_throughput })),
      warnings: r.warnings ?? [],
    };
  }
  const rate = (p: FormatOnePhase): DecodeRate => ({ median: p.output_throughput, min: p.output_throughput_min, max: p.output_throughput_max, requests: p.runs });
  return {
    ...common,
    format: 1,
    short: rate(r.short),
    long: r.long.map((l) => ({ contextTokens: l.context_tokens, decode: rate(l) })),
    concurrency: r.concurrency.map((c) => ({ level: c.concurrency, outputThroughput: c.output_throughput })),
    warnings: [],
  };
}
