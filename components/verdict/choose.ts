// Pure: the report's verdicts by the one rule (rule.ts): which configuration is best (or which
// tie, or why none), and each configuration's speedup over the no-speculation baseline, with
// its interval. A row's estimate comes from its launches (rows.ts: launchesOf), with the launch
// offset measured by the relaunches of every row the report holds (rule.ts launchOffset; twice
// the assumed one where none was relaunched). Best means better by the rule than every other eligible
// configuration and than the baseline; rows with warnings are neither best nor a baseline;
// a baseline is one deployed alike but for speculation, measured on the same host within
// verdict.maxAgeDays of the row, and every refusal names the setting or the age.
import { figuresOf } from "../benchmark/compare";
import { compare, estimate, launchOffset, rank, type Comparison, type Estimate, type LaunchMeasure, type LaunchOffset } from "./rule";
import { daysApart, deployedUnlike, hashOf, isBaseline, launchesOf, levelThroughput, longRate, measured, otherSettings, provenanceOf, shortRate, warned, type Measured, type ReportRow } from "./rows";
import type { Figures } from "../benchmark/compare";
import { DEFAULT_VERDICT, type VerdictSettings } from "./schema";
import { comparisonWord } from "./words";

/** Pure: why `base` cannot be the baseline of `row` (another model, format, settings, code, deployment, age, or warnings), or undefined when it can. */
function unlike(row: Measured, base: Measured, s: VerdictSettings): string | undefined {
  const c = row.configuration;
  const b = base.configuration;
  if ((row.result.format === 2) !== (base.result.format === 2)) return "was measured by another benchmark format";
  if (c.model !== b.model || c.tpSize !== b.tpSize) return "serves another model or TP size";
  if (c.sglangBuild !== b.sglangBuild) return "runs another SGLang build";
  const [pr, pb] = [row.result.measured_on, base.result.measured_on];
  if (pr && pb && (pr.sglangVersion !== pb.sglangVersion || pr.gpu !== pb.gpu || pr.gpuCount !== pb.gpuCount)) return "was measured with another SGLang version or GPUs";
  if (hashOf(row, "benchmark") !== hashOf(base, "benchmark")) return "was measured under other benchmark settings";
  if (hashOf(row, "benchmarkCode") !== hashOf(base, "benchmarkCode")) return "was measured by other benchmark code";
  const w = warned(base.result);
  if (w) return `is not used: ${w}`;
  const deployed = deployedUnlike(row, base);
  if (deployed) return deployed;
  const days = daysApart(row.takenAt, base.takenAt);
  if (days === undefined) return "has no date of measurement to check its age against";
  if (days > s.maxAgeDays) return `was measured ${days.toFixed(1)} days ${(base.takenAt ?? "") < (row.takenAt ?? "") ? "before" : "after"} ${row.stack} (more than verdict.maxAgeDays, ${s.maxAgeDays})`;
  return undefined;
}

/** The baseline a row is compared with, or why there is none. */
export interface BaselineUse {
  baseline?: Measured;
  host?: string;
  why?: string;
}

/**
 * Pure: the baseline of `row`: the newest no-speculation row measured on the same host that
 * `unlike` does not refuse; a baseline on another host is never used. Without one, why: every
 * baseline on the host with the reason it was refused.
 */
export function baselineFor(row: Measured, rows: readonly ReportRow[], s: VerdictSettings = DEFAULT_VERDICT): BaselineUse {
  const host = provenanceOf(row).host;
  if (host === undefined) return { why: "the host it was measured on is unknown" };
  const here = measured(rows)
    .filter((b) => isBaseline(b) && provenanceOf(b).host === host)
    .sort((a, b) => (b.takenAt ?? "").localeCompare(a.takenAt ?? ""));
  if (here.length === 0) return { host, why: `no baseline measured on ${host}` };
  const base = here.find((b) => unlike(row, b, s) === undefined);
  if (base) return { baseline: base, host };
  return { host, why: here.map((b) => `the baseline on ${host} (${b.stack}) ${unlike(row, b, s)}`).join("; ") };
}

/**
 * Pure: the launch offset of one figure as every row's relaunches measure it (rows whose
 * benchmark warned do not count); twice the assumed offset where none was relaunched.
 */
export function offsetOf(rows: readonly ReportRow[], pick: (f: Figures) => LaunchMeasure | undefined, s: VerdictSettings = DEFAULT_VERDICT): LaunchOffset {
  const groups = measured(rows)
    .filter((r) => warned(r.result) === undefined)
    .map((r) => launchesOf(r, pick, s)?.launches)
    .filter((l): l is LaunchMeasure[] => l !== undefined);
  return launchOffset(groups, s);
}

/** Pure: a row's estimate of one figure from its launches (undefined where it did not measure it) and `offset` (offsetOf), and how many kept runs it pooled. */
export function estimateOf(row: Measured, pick: (f: Figures) => LaunchMeasure | undefined, offset: LaunchOffset, s: VerdictSettings = DEFAULT_VERDICT): { estimate: Estimate; runs: number } | undefined {
  const l = launchesOf(row, pick, s);
  return l ? { estimate: estimate(l.launches, s, offset), runs: l.runs } : undefined;
}

/** A configuration's speedup over its baseline, per figure, each a ratio with its interval and the rule's verdict (faster, slower, equal within X % or inconclusive). */
export interface Speedup {
  /** The baseline row divided by; absent when none could be used (see why). */
  baseline?: ReportRow;
  host?: string;
  why?: string;
  /** Short-context decode tok/s over the baseline's. */
  short?: Comparison;
  /** Per long context (tokens). */
  long: Map<number, Comparison>;
  /** output_throughput over the baseline's, per concurrency level. */
  concurrency: Map<number, Comparison>;
}

/** Pure: A's figure against B's by the rule, from each row's launches; undefined where either lacks it. */
function compareRows(a: Measured, b: Measured, pick: (f: Figures) => LaunchMeasure | undefined, rows: readonly ReportRow[], s: VerdictSettings): Comparison | undefined {
  const offset = offsetOf(rows, pick, s);
  const [x, y] = [estimateOf(a, pick, offset, s), estimateOf(b, pick, offset, s)];
  return x && y ? compare(x.estimate, y.estimate, s) : undefined;
}

/**
 * Pure: per measured speculative row, its speedup over its baseline (baselineFor) at the short
 * context, each long context and each concurrency level, with intervals; rows without a
 * baseline say why.
 */
export function speedups(rows: ReportRow[], s: VerdictSettings = DEFAULT_VERDICT): Map<string, Speedup> {
  const out = new Map<string, Speedup>();
  for (const row of measured(rows).filter((r) => !isBaseline(r))) {
    const use = baselineFor(row, rows, s);
    if (!use.baseline) {
      out.set(row.stack, { host: use.host, why: use.why, long: new Map(), concurrency: new Map() });
      continue;
    }
    const base = use.baseline;
    const f = figuresOf(row.result);
    const long = new Map<number, Comparison>();
    for (const l of f.long) {
      const c = compareRows(row, base, longRate(l.contextTokens), rows, s);
      if (c) long.set(l.contextTokens, c);
    }
    const concurrency = new Map<number, Comparison>();
    for (const c of f.concurrency) {
      const x = compareRows(row, base, levelThroughput(c.level), rows, s);
      if (x) concurrency.set(c.level, x);
    }
    out.set(row.stack, { baseline: base, host: use.host, short: compareRows(row, base, shortRate, rows, s), long, concurrency });
  }
  return out;
}

/** A row the rule compared, with its estimate. */
export interface Estimated {
  stack: string;
  estimate: Estimate;
  /** Kept runs its launches pooled. */
  runs: number;
}

/** One comparison of the verdict: against whom, and what the rule made of it. */
export interface Against {
  stack: string;
  comparison: Comparison;
}

/**
 * Which configuration is best, by the rule: one better than every other eligible
 * configuration and than its baseline; a tie of those the rule cannot separate from the
 * top; or none (why). With the estimates of the eligible rows, and who was not eligible.
 */
export type Choice = (
  | { kind: "winner"; stack: string; runnerUp?: Against; baseline: Against }
  | { kind: "tie"; stacks: string[]; against: Against[]; baseline?: Against; baselineWhy?: string }
  | { kind: "none"; why: string }
) & {
  excluded: { stack: string; why: string }[];
  estimates: Estimated[];
  settings: VerdictSettings;
};

/** Pure: a comparison as the report and the review say it: "1.04x (1.01-1.07)". */
export function ratioText(c: Comparison): string {
  return `${c.ratio.toFixed(2)}x (${c.low.toFixed(2)}-${c.high.toFixed(2)})`;
}

/**
 * Pure: the best configuration by single-stream decode tokens/s with the short prompt, by the
 * rule (see the file's head). Never a baseline; never a configuration that failed a coding
 * task, was measured under other settings, or whose benchmark warned (listed as excluded, with
 * why); no ranking of rows measured on different hosts or GPUs.
 */
export function choose(rows: ReportRow[], s: VerdictSettings = DEFAULT_VERDICT): Choice {
  const flagged = otherSettings(rows);
  const excluded: Choice["excluded"] = [];
  const eligible: (Estimated & { row: Measured })[] = [];
  const speculative = measured(rows).filter((r) => !isBaseline(r));
  const offset = offsetOf(rows, shortRate, s);
  for (const r of speculative) {
    const f = figuresOf(r.result);
    const w = warned(r.result);
    const e = estimateOf(r, shortRate, offset, s);
    if (f.coding && f.coding.passed < f.coding.tasks) excluded.push({ stack: r.stack, why: `coding check ${f.coding.passed}/${f.coding.tasks} passed` });
    else if (flagged.has(r.stack)) excluded.push({ stack: r.stack, why: flagged.get(r.stack)!.join("; ") });
    else if (w) excluded.push({ stack: r.stack, why: w });
    else if (!e) excluded.push({ stack: r.stack, why: "no short-context decode rate" });
    else eligible.push({ stack: r.stack, row: r, ...e });
  }
  const estimates = eligible.map(({ stack, estimate, runs }) => ({ stack, estimate, runs }));
  const none = (why: string): Choice => ({ kind: "none", why, excluded, estimates, settings: s });
  if (eligible.length === 0) return none(speculative.length === 0 ? "no speculative configuration has a benchmark" : "every measured speculative configuration is excluded");
  // Raw rates from different hosts or GPUs are not comparable: say so rather than rank them.
  const machines = new Set(eligible.map((e) => { const p = provenanceOf(e.row); return `${p.host ?? "?"}/${p.gpu ?? "?"}`; }));
  if (machines.size > 1) return none(`the configurations were measured on different hosts or GPUs (${[...machines].sort().join(", ")}); compare each host's rows, or their speedups against each host's baseline`);
  const ranking = rank(eligible.map((e) => ({ key: e, estimate: e.estimate })), s);
  const top = ranking.kind === "best" ? ranking.best : ranking.tied[0];
  const others = eligible.filter((e) => e !== top);
  const use = baselineFor(top.row, rows, s);
  const base = use.baseline ? compareRows(top.row, use.baseline, shortRate, rows, s) : undefined;
  const baseline = use.baseline && base ? { stack: use.baseline.stack, comparison: base } : undefined;
  if (baseline && baseline.comparison.verdict !== "better") {
    const said = baseline.comparison.verdict === "worse" ? "slower than" : "not faster than";
    return none(`${top.stack}, the fastest eligible configuration, is ${said} ${baseline.stack} (the baseline: ${ratioText(baseline.comparison)}, ${comparisonWord(baseline.comparison)})`);
  }
  const against = (e: Estimated): Against => ({ stack: e.stack, comparison: compare(top.estimate, e.estimate, s) });
  if (ranking.kind === "tie" && ranking.tied.length > 1) {
    return { kind: "tie", stacks: ranking.tied.map((e) => e.stack), against: ranking.tied.slice(1).map(against), baseline, baselineWhy: baseline ? undefined : use.why, excluded, estimates, settings: s };
  }
  if (!baseline) {
    const alone = others.length === 0 ? `${top.stack} is the only eligible configuration` : `${top.stack} is faster than every other eligible configuration`;
    return none(`${alone}, but no baseline shows that it beats no speculation: ${use.why ?? `the baseline ${use.baseline?.stack} has no short-context decode rate`}`);
  }
  const closest = others.map(against).sort((x, y) => x.comparison.low - y.comparison.low)[0];
  return { kind: "winner", stack: top.stack, runnerUp: closest, baseline, excluded, estimates, settings: s };
}
