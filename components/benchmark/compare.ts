// Pure comparison of the report's rows, which report.ts renders: each row's figures whatever
// the benchmark that measured them (format 1 or 2), where and when it was measured, which
// rows were measured under other settings, each configuration's speedup over the
// no-speculation baseline measured on its host, and which configuration is best, if one is
// beyond noise. Plain data in, plain data out.
import type { BenchmarkResult, CodingStats, PhaseStats } from "./run";
import type { MeasuredOn } from "./handler";
import type { ReportRow } from "./report";

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

/** Where and when a row was measured; undefined where unknown (results before format 2 name no GPU or version). */
export interface Provenance {
  host?: string;
  /** "NVIDIA H200 × 8". */
  gpu?: string;
  sglangVersion?: string;
  takenAt?: string;
}

/** Pure: a row's provenance, from its result's measured_on, else from the kept record of the same run (its host). */
export function provenanceOf(row: ReportRow): Provenance {
  const on = row.result?.measured_on;
  const kept = row.runs?.find((r) => r.takenAt === row.takenAt);
  return {
    host: on?.host ?? kept?.host,
    gpu: on?.gpu ? `${on.gpu}${on.gpuCount ? ` × ${on.gpuCount}` : ""}` : undefined,
    sglangVersion: on?.sglangVersion ?? undefined,
    takenAt: row.takenAt,
  };
}

/** A row without speculative decoding: the baseline speedups divide by. */
export function isBaseline(row: ReportRow): boolean {
  return Object.keys(row.configuration).length > 0 && (row.configuration.algorithm === null || row.configuration.algorithm === undefined);
}

type Measured = ReportRow & { result: StoredResult };
const measured = (rows: ReportRow[]): Measured[] => rows.filter((r): r is Measured => r.result !== null);
const hashOf = (row: ReportRow, key: "benchmark" | "benchmarkCode") => (typeof row.configuration[key] === "string" ? (row.configuration[key] as string) : undefined);

/** Pure: the value most rows have (ties: the one of the newest measurement, then the smaller); undefined for none. */
function mostCommon(rows: Measured[], value: (r: Measured) => string | undefined): string | undefined {
  const seen = new Map<string, { count: number; newest: string }>();
  for (const r of rows) {
    const v = value(r);
    if (v === undefined) continue;
    const s = seen.get(v) ?? { count: 0, newest: "" };
    seen.set(v, { count: s.count + 1, newest: (r.takenAt ?? "") > s.newest ? (r.takenAt ?? "") : s.newest });
  }
  return [...seen.entries()].sort(([a, x], [b, y]) => y.count - x.count || y.newest.localeCompare(x.newest) || a.localeCompare(b))[0]?.[0];
}

/**
 * Pure: the rows measured under other settings than most, each with why: a format-1 result
 * (another workload and other formulas), or benchmark settings or benchmark code (their
 * hashes in the configuration) other than the most common among the format-2 rows.
 */
export function otherSettings(rows: ReportRow[]): Map<string, string[]> {
  const all = measured(rows);
  const current = all.filter((r) => r.result.format === 2);
  const settings = mostCommon(current, (r) => hashOf(r, "benchmark"));
  const code = mostCommon(current, (r) => hashOf(r, "benchmarkCode"));
  const flagged = new Map<string, string[]>();
  for (const r of all) {
    const why: string[] = [];
    if (r.result.format !== 2) why.push("measured by an older benchmark (format 1): not comparable");
    else {
      const s = hashOf(r, "benchmark");
      const c = hashOf(r, "benchmarkCode");
      if (s !== settings) why.push(`other benchmark settings (${s ?? "unknown"}; most rows: ${settings})`);
      if (c !== code) why.push(`other benchmark code (${c ?? "unknown"}; most rows: ${code})`);
    }
    if (why.length > 0) flagged.set(r.stack, why);
  }
  return flagged;
}

/** A configuration's speedup over the baseline: per context ("short" or tokens) and per concurrency level. */
export interface Speedup {
  /** The baseline row divided by; absent when none could be used (see why). */
  baseline?: ReportRow;
  host?: string;
  why?: string;
  /** Decode tokens/s over the baseline's (medians), per context. */
  short?: number;
  long: Map<number, number>;
  /** output_throughput over the baseline's, per concurrency level. */
  concurrency: Map<number, number>;
}

/** Pure: why `base` cannot be the baseline of `row` (another model, format, settings or code), or undefined when it can. */
function unlike(row: Measured, base: Measured): string | undefined {
  const c = row.configuration;
  const b = base.configuration;
  if ((row.result.format === 2) !== (base.result.format === 2)) return "was measured by another benchmark format";
  if (c.model !== b.model || c.tpSize !== b.tpSize) return "serves another model or TP size";
  if (c.sglangBuild !== b.sglangBuild) return "runs another SGLang build";
  const [pr, pb] = [row.result.measured_on, base.result.measured_on];
  if (pr && pb && (pr.sglangVersion !== pb.sglangVersion || pr.gpu !== pb.gpu || pr.gpuCount !== pb.gpuCount)) return "was measured with another SGLang version or GPUs";
  if (hashOf(row, "benchmark") !== hashOf(base, "benchmark")) return "was measured under other benchmark settings";
  if (hashOf(row, "benchmarkCode") !== hashOf(base, "benchmarkCode")) return "was measured by other benchmark code";
  return undefined;
}

const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : undefined);

/**
 * Pure: per measured speculative row, its speedup over the no-speculation baseline measured on
 * the same host (the newest, when several), with the same model, benchmark format, settings and
 * code; a baseline on another host is never used. Rows without one say why.
 */
export function speedups(rows: ReportRow[]): Map<string, Speedup> {
  const all = measured(rows);
  const baselines = all.filter(isBaseline);
  const out = new Map<string, Speedup>();
  for (const row of all.filter((r) => !isBaseline(r))) {
    const host = provenanceOf(row).host;
    const none = (why: string) => out.set(row.stack, { host, why, long: new Map(), concurrency: new Map() });
    if (host === undefined) {
      none("the host it was measured on is unknown");
      continue;
    }
    const here = baselines.filter((b) => provenanceOf(b).host === host).sort((a, b) => (b.takenAt ?? "").localeCompare(a.takenAt ?? ""));
    const base = here.find((b) => unlike(row, b) === undefined);
    if (!base) {
      none(here.length === 0 ? `no baseline measured on ${host}` : `the baseline on ${host} (${here[0].stack}) ${unlike(row, here[0])}`);
      continue;
    }
    const f = figuresOf(row.result);
    const g = figuresOf(base.result);
    const long = new Map<number, number>();
    for (const l of f.long) {
      const x = ratio(l.decode.median, g.long.find((m) => m.contextTokens === l.contextTokens)?.decode.median);
      if (x !== undefined) long.set(l.contextTokens, x);
    }
    const concurrency = new Map<number, number>();
    for (const c of f.concurrency) {
      const x = ratio(c.outputThroughput, g.concurrency.find((d) => d.level === c.level)?.outputThroughput);
      if (x !== undefined) concurrency.set(c.level, x);
    }
    out.set(row.stack, { baseline: base, host, short: ratio(f.short.median, g.short.median), long, concurrency });
  }
  return out;
}

/** Requests a configuration's short-context spread needs before it can beat another's. */
export const MIN_REQUESTS = 3;

/** Which configuration is best: one beyond noise, a tie of those within it, or none (why); and who was not eligible. */
export type Choice = ({ kind: "winner"; stack: string } | { kind: "tie"; stacks: string[] } | { kind: "none"; why: string }) & {
  excluded: { stack: string; why: string }[];
};

/**
 * Pure: the best configuration by single-stream decode tokens/s with the short prompt, named
 * only when its slowest request (the spread's min) beat every other eligible configuration's
 * fastest (max); otherwise a tie of it and every configuration whose spread reaches its min.
 * Never the baseline; never a configuration that failed a coding task or was measured under
 * other settings (those are listed as excluded, with why).
 */
export function choose(rows: ReportRow[]): Choice {
  const flagged = otherSettings(rows);
  const excluded: Choice["excluded"] = [];
  const eligible: { stack: string; decode: DecodeRate }[] = [];
  const speculative = measured(rows).filter((r) => !isBaseline(r));
  for (const r of speculative) {
    const f = figuresOf(r.result);
    if (f.coding && f.coding.passed < f.coding.tasks) excluded.push({ stack: r.stack, why: `coding check ${f.coding.passed}/${f.coding.tasks} passed` });
    else if (flagged.has(r.stack)) excluded.push({ stack: r.stack, why: flagged.get(r.stack)!.join("; ") });
    else if (![f.short.median, f.short.min, f.short.max].every(Number.isFinite)) excluded.push({ stack: r.stack, why: "no short-context decode rate" });
    else eligible.push({ stack: r.stack, decode: f.short });
  }
  if (eligible.length === 0) {
    const why = speculative.length === 0 ? "no speculative configuration has a benchmark" : "every measured speculative configuration is excluded";
    return { kind: "none", why, excluded };
  }
  // Raw rates from different hosts or GPUs are not comparable: say so rather than rank them.
  const machines = new Set(eligible.map((e) => { const p = provenanceOf(rows.find((r) => r.stack === e.stack)!); return `${p.host ?? "?"}/${p.gpu ?? "?"}`; }));
  if (machines.size > 1) return { kind: "none", why: `the configurations were measured on different hosts or GPUs (${[...machines].sort().join(", ")}); compare each host's rows, or their speedups against each host's baseline`, excluded };
  eligible.sort((a, b) => b.decode.median - a.decode.median || a.stack.localeCompare(b.stack));
  const [top, ...rest] = eligible;
  const within = rest.filter((e) => e.decode.max >= top.decode.min);
  // A spread needs samples: below MIN_REQUESTS a difference is never "beyond noise".
  const few = eligible.filter((e) => e.decode.requests < MIN_REQUESTS);
  if (within.length === 0 && (rest.length === 0 || few.length === 0)) return { kind: "winner", stack: top.stack, excluded };
  if (within.length === 0) return { kind: "tie", stacks: eligible.map((e) => e.stack), excluded };
  return { kind: "tie", stacks: [top.stack, ...within.map((e) => e.stack)], excluded };
}
