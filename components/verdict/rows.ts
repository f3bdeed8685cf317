// Pure: the report's rows as the rule sees them: where and when each was measured, which were
// measured under other settings than most, which carry warnings, whether two rows were
// deployed alike but for speculation, and a row's launches (the rule's unit of noise) from
// its result and the kept runs of the same unit. Plain data in, plain data out.
import { figuresOf, type DecodeRate, type Figures, type StoredResult } from "../benchmark/compare";
import type { HistoryRecord } from "../benchmark/history";
import { normalQuantile, type LaunchMeasure } from "./rule";
import type { VerdictSettings } from "./schema";

export interface ReportRow {
  stack: string;
  configuration: Record<string, unknown>;
  /** The stack's benchmark output (format 1 or 2), or null when it has none. */
  result: StoredResult | null;
  takenAt?: string;
  /** Seconds of the last restart (drain + stop + GPU release + load-to-ready). */
  restartSeconds?: number;
  /**
   * deployed: the stack's outputs; destroyed: its outputs are gone (or the stack too) and the
   * numbers are the last ones kept (history.ts); never deployed: a stack with no outputs and
   * nothing kept. Absent: deployed.
   */
  status?: "deployed" | "destroyed" | "never deployed";
  /** Every kept run of the stack, oldest first (history.ts). */
  runs?: HistoryRecord[];
}

/** Where and when a row was measured; undefined where unknown (results before format 2 name no GPU or version). */
export interface Provenance {
  host?: string;
  /** "NVIDIA H200 × 8". */
  gpu?: string;
  sglangVersion?: string;
  takenAt?: string;
}

/** The kept record of the run a row shows (the one taken when the row was), if kept. */
const ownRun = (row: ReportRow) => row.runs?.find((r) => r.takenAt === row.takenAt);

/** Pure: a row's provenance, from its result's measured_on, else from the kept record of the same run (its host). */
export function provenanceOf(row: ReportRow): Provenance {
  const on = row.result?.measured_on;
  return {
    host: on?.host ?? ownRun(row)?.host,
    gpu: on?.gpu ? `${on.gpu}${on.gpuCount ? ` × ${on.gpuCount}` : ""}` : undefined,
    sglangVersion: on?.sglangVersion ?? undefined,
    takenAt: row.takenAt,
  };
}

/** A row without speculative decoding: the baseline speedups divide by. */
export function isBaseline(row: ReportRow): boolean {
  return Object.keys(row.configuration).length > 0 && (row.configuration.algorithm === null || row.configuration.algorithm === undefined);
}

export type Measured = ReportRow & { result: StoredResult };
export const measured = (rows: readonly ReportRow[]): Measured[] => rows.filter((r): r is Measured => r.result !== null);
export const hashOf = (row: { configuration: Record<string, unknown> }, key: "benchmark" | "benchmarkCode") => (typeof row.configuration[key] === "string" ? (row.configuration[key] as string) : undefined);

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

/**
 * Pure: why a result's numbers cannot take part in a verdict (neither best nor baseline), or
 * undefined: every warning of its benchmark (prefix-cache hits, failed requests, answers that
 * stopped early, prompts off their length, a cache that was not flushed) counts.
 */
export function warned(result: StoredResult): string | undefined {
  const w = figuresOf(result).warnings;
  return w.length === 0 ? undefined : `its benchmark warned: ${w.join("; ")}`;
}

const settingText = (v: unknown) => (v === undefined ? "not recorded" : JSON.stringify(v));

/**
 * Pure: the deployment setting (every one but the speculative ones: configurationOf's
 * `deploymentSettings`) in which `base` differs from `row`, said with both values; or
 * undefined when they are the same. A row measured before the settings were recorded cannot
 * be shown alike, and says so.
 */
export function deployedUnlike(row: ReportRow, base: ReportRow): string | undefined {
  const a = row.configuration.deploymentSettings as Record<string, unknown> | undefined;
  const b = base.configuration.deploymentSettings as Record<string, unknown> | undefined;
  if (!b || typeof b !== "object") return "does not record its deployment settings (measured before the report compared them): measure it again";
  if (!a || typeof a !== "object") return `cannot be compared: ${row.stack} does not record its deployment settings (measured before the report compared them)`;
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const differ = keys.filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
  if (differ.length === 0) return undefined;
  return `was deployed with another ${differ.map((k) => `${k} (${settingText(b[k])}; ${row.stack}: ${settingText(a[k])})`).join(", another ")}`;
}

const DAY_MS = 86_400_000;

/** Pure: days between two measurements (ISO times), or undefined when either is unknown. */
export function daysApart(a: string | undefined, b: string | undefined): number | undefined {
  const [x, y] = [Date.parse(a ?? ""), Date.parse(b ?? "")];
  return Number.isFinite(x) && Number.isFinite(y) ? Math.abs(x - y) / DAY_MS : undefined;
}

/**
 * Pure: the expected range of `n` standard normal draws over its standard deviation (d2):
 * exact for 2 and 3, Blom's approximation from 4 (within 1 % of the tables).
 */
function expectedRange(n: number): number {
  if (n === 2) return 1.128;
  if (n === 3) return 1.693;
  return 2 * normalQuantile((n - 0.375) / (n + 0.25));
}

/**
 * Pure: one launch's measure of a decode rate: its median over the requests, and the
 * requests' relative spread from their range (range / d2 / median; none from one request,
 * where the launch prior alone speaks).
 */
export function rateLaunch(d: DecodeRate): LaunchMeasure {
  const requestSd = d.requests >= 2 && d.median > 0 && d.max >= d.min ? (d.max - d.min) / expectedRange(d.requests) / d.median : 0;
  return { value: d.median, requests: Math.max(1, d.requests), requestSd };
}

/** Pure: one launch's measure of a throughput over a whole phase (one figure, no spread: the launch prior speaks). */
export function throughputLaunch(value: number): LaunchMeasure {
  return { value, requests: 1, requestSd: 0 };
}

/** Pure: launches of one server start merged: its requests pooled (requests-weighted value and variance). */
function pool(parts: LaunchMeasure[]): LaunchMeasure {
  const requests = parts.reduce((t, p) => t + p.requests, 0);
  const value = parts.reduce((t, p) => t + p.value * p.requests, 0) / requests;
  const requestSd = Math.sqrt(parts.reduce((t, p) => t + p.requestSd * p.requestSd * p.requests, 0) / requests);
  return { value, requests, requestSd };
}

/** What a row measured, launch by launch, for one figure: the launches, and how many kept runs they pooled. */
export interface RowLaunches {
  launches: LaunchMeasure[];
  runs: number;
}

/**
 * Pure: a row's launches for one figure (`pick`: e.g. the short-context decode rate). A row
 * is one launch, the result it shows; where its kept runs hold other runs of the same unit
 * (the same configuration, unit hash), on the same host, benchmark settings and code, without
 * warnings, measured within `maxAgeDays` of it, each other server start among them (another
 * main PID) is a launch of its own, and runs of one server start (a `benchmark.runId` change
 * re-measures without a restart) are one launch with their requests pooled: a launch's offset
 * is the same for every pass on it.
 */
export function launchesOf(row: Measured, pick: (f: Figures) => LaunchMeasure | undefined, s: Pick<VerdictSettings, "maxAgeDays">): RowLaunches | undefined {
  const own = pick(figuresOf(row.result));
  if (!own) return undefined;
  const mine = ownRun(row);
  // A row whose server start is unknown cannot be told apart from its other runs: one launch.
  const pid = row.result.measured_on?.mainPid;
  if (!mine || row.result.format !== 2 || !pid) return { launches: [own], runs: 1 };
  const same = (row.runs ?? []).filter(
    (r) =>
      r !== mine &&
      r.unitHash === mine.unitHash &&
      r.host === mine.host &&
      r.result.format === 2 &&
      hashOf(r, "benchmark") === hashOf(row, "benchmark") &&
      hashOf(r, "benchmarkCode") === hashOf(row, "benchmarkCode") &&
      warned(r.result) === undefined &&
      (daysApart(r.takenAt, row.takenAt) ?? Infinity) <= s.maxAgeDays,
  );
  const byStart = new Map<number, LaunchMeasure[]>([[pid, [own]]]);
  let runs = 1;
  for (const r of same) {
    const m = pick(figuresOf(r.result));
    if (!m) continue;
    const p = r.result.measured_on?.mainPid;
    // A run whose server start is unknown cannot be told apart from another: not pooled.
    if (p === undefined || p === 0) continue;
    byStart.set(p, [...(byStart.get(p) ?? []), m]);
    runs += 1;
  }
  return { launches: [...byStart.values()].map(pool), runs };
}

/** The figures the rule compares: the short-context decode rate, each long context's, each concurrency level's output throughput. */
export const shortRate = (f: Figures): LaunchMeasure | undefined => (Number.isFinite(f.short.median) && f.short.median > 0 ? rateLaunch(f.short) : undefined);
export const longRate = (context: number) => (f: Figures): LaunchMeasure | undefined => {
  const l = f.long.find((x) => x.contextTokens === context);
  return l && Number.isFinite(l.decode.median) && l.decode.median > 0 ? rateLaunch(l.decode) : undefined;
};
export const levelThroughput = (level: number) => (f: Figures): LaunchMeasure | undefined => {
  const c = f.concurrency.find((x) => x.level === level);
  return c && Number.isFinite(c.outputThroughput) && c.outputThroughput > 0 ? throughputLaunch(c.outputThroughput) : undefined;
};
