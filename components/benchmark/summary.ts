// Pure: what a stack says of its benchmark where people read it (issue 63). Pulumi prints every
// stack output in full after each `up` (and a changed one in `preview`), and a failed `up` lists
// them all again as removed, so the full numbers (about 300 lines) buried the cause of a failure.
// The stack output `benchmark` is now this short summary, one line per field in the terminal:
// decode and output tokens/s, TTFT, acceptance length, coding check, warnings, the verdict
// against the stack's previous run, when, and where the full numbers are. Those are the stack
// output `__benchmarkResult` (compare.ts FULL_RESULT_OUTPUT), which `up` and `preview` do not
// show and `npx pulumi stack output __benchmarkResult --json` prints.
import { figuresOf, FULL_RESULT_OUTPUT, type StoredResult } from "./compare";
import { compare, estimate, launchOffset, type Comparison } from "../verdict/rule";
import { shortRate } from "../verdict/rows";
import { ratioText } from "../verdict/choose";
import { comparisonWord } from "../verdict/words";
import { DEFAULT_VERDICT, type VerdictSettings } from "../verdict/schema";

/** The stack output `benchmark`: every field a scalar or a list of lines, so that each shows as one line. */
export interface BenchmarkSummary {
  /** Single-stream decode tokens/s: the median over the phase's requests (min-max), short prompt then each long context. */
  decodeTokensPerS: string;
  /** Output tokens/s per concurrency level (completion tokens / phase duration); null without concurrency levels. */
  outputTokensPerS: string | null;
  /** Median time to first token in ms, short prompt then each long context. */
  ttftMs: string;
  /** Completion tokens per verify step of the short phase; null without speculation. */
  acceptLength: number | null;
  /** The coding check ("5/5 passed"); null when it was off. */
  coding: string | null;
  /** What a reader must know of the run (prompts off their length, cache hits, failed requests). */
  warnings: string[];
  /** Against the stack's previous run, by the report's rule; null for a first run. */
  versusPrevious: string | null;
  takenAt: string;
  /** The command that prints the full numbers. */
  fullNumbers: string;
  /** The raw per-request records, relative to the project folder of whoever ran it. */
  rawRecords: string;
}

/** What the benchmark stored of the run before this one: enough to say whether this one is faster. */
export type VersusPrevious = { takenAt: string; unitHash: string; sameUnit: boolean } & ({ comparison: Comparison } | { notCompared: string });

/** A run as the provider has it, this one or the previous. */
export interface RunOf {
  result: StoredResult;
  takenAt: string;
  unitHash: string;
  /** The configuration output (configurationOf): its `benchmark` and `benchmarkCode` fingerprints say whether two runs compare. */
  configuration: Record<string, unknown>;
}

/**
 * Pure: this run against the previous one of the stack, by the rule of the report (one launch
 * each): their short-context decode tok/s, or why they do not compare (other benchmark
 * settings or code, another host or GPU, the older format). Null without a previous run.
 */
export function versusPrevious(now: RunOf, before: RunOf | undefined | null, s: VerdictSettings = DEFAULT_VERDICT): VersusPrevious | null {
  if (!before?.result) return null;
  const head = { takenAt: before.takenAt, unitHash: before.unitHash, sameUnit: before.unitHash === now.unitHash };
  const differs = (key: string) => typeof before.configuration[key] === "string" && before.configuration[key] !== now.configuration[key];
  const a = now.result.measured_on;
  const b = before.result.measured_on;
  const why = differs("benchmark")
    ? "it was measured under other benchmark settings"
    : differs("benchmarkCode")
      ? "it was measured by other benchmark code"
      : (now.result.format ?? 1) !== (before.result.format ?? 1)
        ? "it was measured by the older benchmark format"
        : a && b && a.host !== b.host
          ? `it was measured on another host (${b.host})`
          : a && b && (a.gpu !== b.gpu || a.gpuCount !== b.gpuCount)
            ? `it was measured on other GPUs (${b.gpuCount ?? "?"} x ${b.gpu ?? "?"})`
            : undefined;
  if (why) return { ...head, notCompared: why };
  const mine = shortRate(figuresOf(now.result));
  const theirs = shortRate(figuresOf(before.result));
  if (!mine || !theirs) return { ...head, notCompared: "one of the two has no short-context decode rate" };
  return { ...head, comparison: compare(estimate([mine], s, launchOffset([[mine], [theirs]], s)), estimate([theirs], s, launchOffset([[mine], [theirs]], s)), s) };
}

const fmt = (x: number | null | undefined, digits = 1) => (x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(digits));
const minute = (iso: string) => `${iso.slice(0, 16).replace("T", " ")} UTC`;

/** Pure: the verdict against the previous run in words, the verdict first. */
export function versusText(v: VersusPrevious): string {
  const which = `the previous run (${minute(v.takenAt)}, ${v.sameUnit ? "the same unit" : `unit ${v.unitHash.slice(0, 12)}`})`;
  if ("notCompared" in v) return `not compared with ${which}: ${v.notCompared}`;
  return `${comparisonWord(v.comparison)}: ${ratioText(v.comparison)} the short-context decode tok/s of ${which}`;
}

/** Pure: the summary of a stored result (either format), with when it was taken, where its numbers are and the verdict against the previous run. */
export function benchmarkSummary(result: StoredResult, o: { stack: string; takenAt: string; resultsPath: string; versusPrevious?: VersusPrevious | null }): BenchmarkSummary {
  const f = figuresOf(result);
  const spread = (d: { median: number; min: number; max: number }) => `${fmt(d.median)} (${fmt(d.min)}-${fmt(d.max)})`;
  const longTtft = (context: number) => result.long.find((l) => l.context_tokens === context)?.median_ttft_ms;
  const c = f.coding;
  const codingNotes = c ? [c.extraction_failed ? `${c.extraction_failed} without extractable code` : "", c.timeouts ? `${c.timeouts} timed out` : ""].filter(Boolean) : [];
  return {
    decodeTokensPerS: [`${spread(f.short)} short`, ...f.long.map((l) => `${spread(l.decode)} at ${l.contextTokens} tokens`)].join(", "),
    outputTokensPerS: f.concurrency.length ? f.concurrency.map((l) => `${fmt(l.outputThroughput)} at ${l.level} concurrent`).join(", ") : null,
    ttftMs: [`${fmt(f.medianTtftMs, 0)} short`, ...f.long.map((l) => `${fmt(longTtft(l.contextTokens), 0)} at ${l.contextTokens} tokens`)].join(", "),
    acceptLength: f.acceptLength,
    coding: c ? `${c.passed}/${c.tasks} passed${codingNotes.length ? ` (${codingNotes.join(", ")})` : ""}` : null,
    warnings: f.warnings,
    versusPrevious: o.versusPrevious ? versusText(o.versusPrevious) : null,
    takenAt: o.takenAt,
    fullNumbers: `npx pulumi stack output ${FULL_RESULT_OUTPUT} --json --stack ${o.stack}`,
    rawRecords: o.resultsPath,
  };
}

/** Pure: the verdict against the previous run in a few words ("faster against the previous run (1.08x)"). */
function versusWords(v: VersusPrevious | null | undefined): string {
  if (!v) return "";
  return "notCompared" in v ? "not compared with the previous run" : `${comparisonWord(v.comparison)} against the previous run (${v.comparison.ratio.toFixed(2)}x)`;
}

/** Pure: the summary on one line (the demo's). */
export function summaryLine(s: BenchmarkSummary, v?: VersusPrevious | null): string {
  return [
    `decode tok/s ${s.decodeTokensPerS}`,
    s.outputTokensPerS ? `output tok/s ${s.outputTokensPerS}` : "",
    `TTFT ms ${s.ttftMs}`,
    s.acceptLength === null ? "" : `accept length ${s.acceptLength}`,
    s.coding ? `coding ${s.coding}` : "",
    s.warnings.length ? `${s.warnings.length} warning(s)` : "",
    versusWords(v),
  ]
    .filter(Boolean)
    .join("; ");
}

/**
 * Pure: the benchmark's last progress line, a status that a log repeats as its step ends:
 * the decode rates, the acceptance length and the verdict, and where the rest is.
 */
export function headline(result: StoredResult, v?: VersusPrevious | null): string {
  const f = figuresOf(result);
  return [
    `measured: decode tok/s ${[`${fmt(f.short.median)} short`, ...f.long.map((l) => `${fmt(l.decode.median)} at ${l.contextTokens} tokens`)].join(", ")}`,
    f.acceptLength === null ? "" : `accept length ${f.acceptLength}`,
    f.warnings.length ? `${f.warnings.length} warning(s)` : "",
    versusWords(v),
    "the rest: stack output `benchmark`",
  ]
    .filter(Boolean)
    .join("; ");
}

/** The benchmark's stack outputs: what index.ts exports of it. */
export interface BenchmarkStackOutputs {
  /** The summary (null when no benchmark ran). */
  benchmark: BenchmarkSummary | null;
  /** The full numbers (FULL_RESULT_OUTPUT; null when no benchmark ran). */
  result: StoredResult | null;
  /** When the numbers were taken: null when no benchmark ran (benchmark.enabled false), whatever an older state recorded. */
  takenAt: string | null;
  /** Their raw records: null when no benchmark ran. */
  resultsPath: string | null;
}

/** Pure: the benchmark's stack outputs from what its resource holds (this version's state or an older one's). */
export function benchmarkStackOutputs(stack: string, run: { result: StoredResult | null | undefined; takenAt: string | null | undefined; resultsPath: string; versusPrevious?: VersusPrevious | null }): BenchmarkStackOutputs {
  if (!run.result || !run.takenAt) return { benchmark: null, result: null, takenAt: null, resultsPath: null };
  return {
    benchmark: benchmarkSummary(run.result, { stack, takenAt: run.takenAt, resultsPath: run.resultsPath, versusPrevious: run.versusPrevious }),
    result: run.result,
    takenAt: run.takenAt,
    resultsPath: run.resultsPath,
  };
}
