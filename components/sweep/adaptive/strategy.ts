// Pure: the decisions of an adaptive sweep, from what it measured so far. The expensive unit
// is a server launch (minutes of weight loading); a benchmark on a server already up is
// cheap. So:
// 1. a first design of a few launches (five by default): a seeded start near the centre, then
//    each the farthest from those chosen, pulled toward the middle of budget x topk;
// 2. each launch gets a short pass (a few requests); only a configuration that can still be
//    the best (within noise) gets the full pass (more requests and the coding check), on the
//    same server, right away: no second launch;
// 3. a surrogate (surrogate.ts) of the objective over the grid; the next launch is, first, a
//    grid neighbour of the incumbent with a real chance (10 %) to be better than it at all,
//    else the one of largest expected improvement over the best measured; a configuration the
//    surrogate gives no real chance of beating the best by the tolerance is never launched;
// 4. a launch that ran out of memory rules out every configuration that needs at least its
//    memory (space.ts needsAtLeast), without launching them;
// 5. a full pass within noise of the best is repeated (same server) until its standard error
//    is a third of the tolerance (or at the repeats' cap), compared with the incumbent of that
//    moment: a repeat costs a benchmark, and a configuration is never launched twice;
// 6. it stops by itself once no configuration left has more than a small chance (25 % at 2 %
//    per-request noise, proportionally less when the measured noise is larger) of beating the
//    best by the tolerance (or at the budget), and says how sure it is: the joint chance that
//    nothing, launched or not, beats its choice by the tolerance.
// The chance is the surrogate's, from measurements only: the true best is known only in
// simulation (bench/adaptive-sweep.ts checks it there).
import { GridPoint, needsAtLeast } from "./space";
import { normalCdf, Observation, surrogate } from "./surrogate";

/** A phase's single-stream decode rate as a benchmark output gives it (compare.ts DecodeRate). */
export interface PhaseFigure {
  median: number;
  min: number;
  max: number;
  requests: number;
}

export interface PassFigures {
  short: PhaseFigure;
  /** The long context the objective reads (null: not measured). */
  long: PhaseFigure | null;
  acceptLength: number | null;
  /** The coding check passed (every task), failed, or was not run (null). */
  codingPassed: boolean | null;
  /** The benchmark's duration (GPU seconds of this pass). */
  benchmarkSeconds: number;
}

export type PassKind = "short" | "full";

export interface LaunchRecord {
  point: string;
  host: string;
  /**
   * GPU seconds of the launch: the stack's restartTimings (drain, stop, GPU release, load to
   * serving); a failed launch has none: its attempt's wall time (the engine's own time in it).
   */
  launchSeconds: number;
  /** Wall seconds of every `up` of this launch (restart, benchmarks and the engine's own time); absent in a replay. */
  wallSeconds?: number;
  /** The stack's restartTimings (drain + stop + GPU release + load to ready), as reported; absent for a failed launch. */
  restartSeconds?: number;
  failure?: { cause: string; outOfMemory: boolean };
  /** heldSeconds: the GPU seconds the pass added: its benchmark (a replay may add the engine's time of a later pass's `up`). */
  passes: { kind: PassKind; figures: PassFigures; heldSeconds: number }[];
}

export interface Objective {
  /** short: decode tok/s at short context; long: at the long context; mix: (1 - w) short + w long. */
  kind: "short" | "long" | "mix";
  longWeight: number;
}

export interface StrategyOptions {
  objective: Objective;
  /** Stop before a launch would pass either. */
  budget: { gpuSeconds?: number; launches?: number };
  /** Relative: a configuration within this of the best is as good. Defaults to 0.01. */
  tolerance: number;
  /**
   * Stop once no configuration left has this chance to beat the best by the tolerance, where the
   * measured per-request noise is at most `stopNoise`; above it, the chance shrinks in proportion
   * (noisier measurements make the surrogate's chances less trustworthy, so it asks for less).
   */
  stopChance: number;
  /** Relative per-request noise up to which `stopChance` applies as it is. */
  stopNoise: number;
  /** Launches of the first design. */
  initialLaunches: number;
  /** Full passes of one launch at most (the first and its repeats). */
  maxFullPasses: number;
  /** A contender is measured again (same server) while its relative standard error is above this. */
  repeatSe: number;
  /** Before stopping, a grid neighbour of the incumbent with this chance to be better than it at all is launched. */
  neighbourChance: number;
  seed: number;
}

/**
 * Tuned on the replay of bench/adaptive-sweep.ts (seeds 1-20 of five surfaces, 2 % noise);
 * measured there on seeds 101-140. Repeats to a third of the tolerance (a repeat costs a
 * benchmark, a second launch is not possible), a first design of five pulled toward the
 * centre, the incumbent's neighbours checked, so the stop itself can be laxer (25 % at 2 %
 * noise, less when noisier). On seeds 101-140 at 2 % noise: 97-100 % hits and 26-31 % of the
 * full grid's GPU time (median) on four surfaces; noisy 90 % hits at 33 %.
 */
export const DEFAULT_STRATEGY: Omit<StrategyOptions, "objective" | "budget" | "seed"> = {
  tolerance: 0.01,
  stopChance: 0.25,
  stopNoise: 0.02,
  initialLaunches: 5,
  maxFullPasses: 6,
  repeatSe: 0.0033,
  neighbourChance: 0.1,
};

/** Pure: the objective's value of one pass, or undefined where it lacks the phase. */
export function objectiveOf(f: PassFigures, o: Objective): { value: number; requests: number; relSpread: number } | undefined {
  const rel = (p: PhaseFigure) => (p.median > 0 ? (p.max - p.min) / p.median : 0);
  if (o.kind === "short") return { value: f.short.median, requests: f.short.requests, relSpread: rel(f.short) };
  if (!f.long) return undefined;
  if (o.kind === "long") return { value: f.long.median, requests: f.long.requests, relSpread: rel(f.long) };
  const w = o.longWeight;
  return { value: (1 - w) * f.short.median + w * f.long.median, requests: Math.min(f.short.requests, f.long.requests), relSpread: (1 - w) * rel(f.short) + w * rel(f.long) };
}

/** Expected range of n standard normal draws, in standard deviations (d2 of control charts). */
const RANGE_IN_SD = [0, 0, 1.128, 1.693, 2.059, 2.326, 2.534, 2.704, 2.847, 2.97, 3.078];

export interface Measured {
  point: GridPoint;
  /** Mean of its passes' values, weighted by requests. */
  value: number;
  /** Standard error of `value`. */
  se: number;
  requests: number;
  fullPasses: number;
  codingPassed: boolean | null;
  acceptLength: number | null;
  short: number;
  long: number | null;
}

/** Pure: the relative per-request noise, pooled over every pass (the median of each pass's range / d2), at least 0.3 %. */
export function pooledNoise(records: LaunchRecord[], o: Objective): number {
  const estimates: number[] = [];
  for (const r of records) for (const p of r.passes) {
    const v = objectiveOf(p.figures, o);
    if (v && v.requests >= 2) estimates.push(v.relSpread / RANGE_IN_SD[Math.min(v.requests, RANGE_IN_SD.length - 1)]);
  }
  estimates.sort((a, b) => a - b);
  const median = estimates.length ? estimates[Math.floor(estimates.length / 2)] : 0.02;
  return Math.max(0.003, median);
}

/** Pure: what each launched, working configuration measured, combined over its passes. */
export function measuredPoints(points: GridPoint[], records: LaunchRecord[], o: Objective): Measured[] {
  const noise = pooledNoise(records, o);
  const out: Measured[] = [];
  for (const r of records) {
    if (r.failure) continue;
    const point = points.find((p) => p.name === r.point);
    const values = r.passes.map((p) => ({ pass: p, v: objectiveOf(p.figures, o) })).filter((p) => p.v !== undefined);
    if (!point || values.length === 0) continue;
    const requests = values.reduce((s, p) => s + p.v!.requests, 0);
    const value = values.reduce((s, p) => s + p.v!.value * p.v!.requests, 0) / requests;
    const last = r.passes[r.passes.length - 1].figures;
    const full = r.passes.filter((p) => p.kind === "full");
    const coding = full.map((p) => p.figures.codingPassed).filter((c): c is boolean => c !== null);
    out.push({
      point,
      value,
      se: (value * noise) / Math.sqrt(Math.max(1, requests)),
      requests,
      fullPasses: full.length,
      codingPassed: coding.length ? coding.every(Boolean) : null,
      acceptLength: last.acceptLength,
      short: last.short.median,
      long: last.long?.median ?? null,
    });
  }
  return out;
}

/** Pure: the configurations a launch that ran out of memory rules out, each with the launch that did. */
export function ruledOut(points: GridPoint[], records: LaunchRecord[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of records) {
    if (!r.failure?.outOfMemory) continue;
    const oom = points.find((p) => p.name === r.point);
    if (!oom) continue;
    for (const p of points) if (p.name !== oom.name && needsAtLeast(p, oom) && !out.has(p.name)) out.set(p.name, oom.name);
  }
  return out;
}

/**
 * Pure: the chance that a configuration not launched starts at all (the constraint learned from
 * failures, as SCOOT learns its crash/OOM constraints, here in its simplest form): 1 where a
 * launch that started needs at least its memory, 0 where one that ran out needs at most; in
 * between, by where its tree (log2 of budget x topk, half an octave more without a window)
 * lies between the largest tree that started and the smallest that ran out. 1 while nothing
 * ran out of memory.
 */
export function feasibility(p: GridPoint, points: GridPoint[], records: LaunchRecord[]): number {
  const byName = new Map(points.map((q) => [q.name, q]));
  const oom = records.filter((r) => r.failure?.outOfMemory).map((r) => byName.get(r.point)!).filter(Boolean);
  if (oom.length === 0) return 1;
  const ok = records.filter((r) => !r.failure).map((r) => byName.get(r.point)!).filter(Boolean);
  if (ok.some((q) => needsAtLeast(q, p))) return 1;
  if (oom.some((q) => needsAtLeast(p, q))) return 0;
  const tree = (q: GridPoint) => Math.log2(q.budget * q.topk) + (q.window === "none" ? 0.5 : 0);
  const fits = Math.max(...ok.map(tree), -Infinity);
  const fails = Math.min(...oom.map(tree));
  const t = tree(p);
  if (t <= fits) return 0.9;
  if (t >= fails) return 0.1;
  return 0.9 - (0.8 * (t - fits)) / (fails - fits);
}

export interface Chance {
  point: string;
  /** The chance that it starts (feasibility). */
  starts: number;
  /** The chance that it starts and beats the incumbent by more than the tolerance. */
  beats: number;
  /** The chance that it starts and is better than the incumbent at all. */
  better: number;
  mean: number;
  sd: number;
}

export interface Assessment {
  measured: Measured[];
  /** The best candidate: full-passed, not failing the coding check, of the highest surrogate mean at its own point
   * (its measurement, steadied by its neighbours': the highest raw mean of many noisy ones is biased up). */
  incumbent?: Measured;
  /** The surrogate's mean and standard deviation at each measured point. */
  smoothed: Map<string, { mean: number; sd: number }>;
  /** Every configuration not launched, ruled out or in flight: its chance to beat the incumbent. */
  open: Chance[];
  ruledOut: Map<string, string>;
}

/** Pure: what the sweep knows: the measured points, the incumbent, and the chances of the rest. */
export function assess(points: GridPoint[], records: LaunchRecord[], inFlight: string[], o: StrategyOptions): Assessment {
  const measured = measuredPoints(points, records, o.objective);
  const launched = new Set(records.map((r) => r.point));
  const out = ruledOut(points, records);
  const candidates = points.filter((p) => !launched.has(p.name) && !out.has(p.name) && !inFlight.includes(p.name));
  const smoothed = new Map<string, { mean: number; sd: number }>();
  const unknown = () => candidates.map((p) => ({ point: p.name, starts: feasibility(p, points, records), beats: 1, better: 1, mean: NaN, sd: NaN }));
  if (measured.length === 0) return { measured, smoothed, open: unknown(), ruledOut: out };
  const scale = Math.max(...measured.map((m) => m.value));
  const predict = surrogate(measured.map((m) => ({ x: m.point.x, y: m.value / scale, sd: m.se / scale }) satisfies Observation));
  for (const m of measured) {
    const p = predict(m.point.x);
    smoothed.set(m.point.name, { mean: p.mean * scale, sd: p.sd * scale });
  }
  const incumbent = measured
    .filter((m) => m.fullPasses > 0 && m.codingPassed !== false)
    .sort((a, b) => smoothed.get(b.point.name)!.mean - smoothed.get(a.point.name)!.mean || a.point.name.localeCompare(b.point.name))[0];
  if (!incumbent) return { measured, smoothed, open: unknown(), ruledOut: out };
  const level = smoothed.get(incumbent.point.name)!.mean / scale;
  const threshold = level * (1 + o.tolerance);
  return {
    measured,
    incumbent,
    smoothed,
    ruledOut: out,
    open: candidates.map((p) => {
      const { mean, sd } = predict(p.x);
      const starts = feasibility(p, points, records);
      return { point: p.name, starts, beats: starts * (1 - normalCdf((threshold - mean) / sd)), better: starts * (1 - normalCdf((level - mean) / sd)), mean: mean * scale, sd: sd * scale };
    }),
  };
}

/** How much the first design prefers points near the centre of budget x topk over far ones (per unit of distance). */
const DESIGN_CENTRE_PULL = 0.5;

/**
 * Pure: the launches of the first design: a seeded start near the grid's centre, then each the
 * farthest from those chosen, less a pull toward the centre of budget x topk (the corners are
 * rarely the best and the surrogate reaches them from inside; the pull spends the design on
 * both windows' middles, where two separate peaks are found).
 */
export function initialDesign(points: GridPoint[], n: number, seed: number): GridPoint[] {
  const dist = (a: GridPoint, b: GridPoint) => Math.hypot(...a.x.map((v, i) => v - b.x[i]));
  const centre = [0.5, 0.5, 0.5];
  const byCentre = [...points].sort((a, b) => Math.hypot(...a.x.map((v, i) => v - centre[i])) - Math.hypot(...b.x.map((v, i) => v - centre[i])) || a.name.localeCompare(b.name));
  const near = byCentre.slice(0, Math.min(4, byCentre.length));
  const chosen = [near[Math.abs(Math.floor(seed)) % near.length]];
  while (chosen.length < Math.min(n, points.length)) {
    const next = points
      .filter((p) => !chosen.includes(p))
      .map((p) => ({ p, d: Math.min(...chosen.map((c) => dist(p, c))) - DESIGN_CENTRE_PULL * Math.hypot(p.x[0] - 0.5, p.x[1] - 0.5) }))
      .sort((a, b) => b.d - a.d || a.p.name.localeCompare(b.p.name))[0];
    chosen.push(next.p);
  }
  return chosen;
}

/** GPU seconds spent so far: every launch and every pass, on every host. */
export function spentSeconds(records: LaunchRecord[]): number {
  return records.reduce((s, r) => s + r.launchSeconds + r.passes.reduce((t, p) => t + p.heldSeconds, 0), 0);
}

/** GPU seconds per host. */
export function spentPerHost(records: LaunchRecord[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of records) out.set(r.host, (out.get(r.host) ?? 0) + spentSeconds([r]));
  return out;
}

/** Pure: the chance under which it stops: `stopChance`, shrunk in proportion where the measured per-request noise is above `stopNoise`. */
export function stopChanceOf(records: LaunchRecord[], o: StrategyOptions): number {
  return o.stopChance * Math.min(1, o.stopNoise / pooledNoise(records, o.objective));
}

/** Pure: the configurations one grid step from `p` along one axis (the next budget or topk up or down, the other window). */
export function gridNeighbours(points: GridPoint[], p: GridPoint): GridPoint[] {
  const values = <T>(f: (q: GridPoint) => T) => [...new Set(points.map(f))];
  const budgets = values((q) => q.budget).sort((a, b) => a - b);
  const topks = values((q) => q.topk).sort((a, b) => a - b);
  const windows = values((q) => (q.window === "none" ? Infinity : q.window)).sort((a, b) => a - b);
  const w = (q: GridPoint) => (q.window === "none" ? Infinity : q.window);
  const steps = (q: GridPoint) => [Math.abs(budgets.indexOf(q.budget) - budgets.indexOf(p.budget)), Math.abs(topks.indexOf(q.topk) - topks.indexOf(p.topk)), Math.abs(windows.indexOf(w(q)) - windows.indexOf(w(p)))];
  return points.filter((q) => steps(q).reduce((s, v) => s + v, 0) === 1);
}

export type Decision = { kind: "launch"; point: string; why: string } | { kind: "stop"; why: string };

/** Pure: the next launch, or why there is none. */
export function decide(points: GridPoint[], records: LaunchRecord[], inFlight: string[], o: StrategyOptions): Decision {
  const launched = new Set([...records.map((r) => r.point), ...inFlight]);
  const launches = launched.size;
  if (o.budget.launches !== undefined && launches >= o.budget.launches) return { kind: "stop", why: `the budget of ${o.budget.launches} launches is spent` };
  if (o.budget.gpuSeconds !== undefined && records.length > 0) {
    const spent = spentSeconds(records);
    const perLaunch = records.reduce((s, r) => s + r.launchSeconds + (r.passes[0]?.heldSeconds ?? 0), 0) / records.length;
    if (spent + perLaunch * (inFlight.length + 1) > o.budget.gpuSeconds) return { kind: "stop", why: `another launch would pass the budget of ${(o.budget.gpuSeconds / 3600).toFixed(2)} GPU-hours (${(spent / 3600).toFixed(2)} spent)` };
  }
  const { incumbent, open, ruledOut: out, smoothed } = assess(points, records, inFlight, o);
  const design = initialDesign(points, o.initialLaunches, o.seed).filter((p) => !launched.has(p.name) && !out.has(p.name));
  if (design.length > 0 && launches < o.initialLaunches) return { kind: "launch", point: design[0].name, why: "first design (space-filling)" };
  if (open.length === 0) return { kind: "stop", why: "every configuration is launched, in flight or ruled out" };
  if (!incumbent) {
    // Nothing full-measured works yet: keep exploring where the design left the largest gap.
    const next = initialDesign(points, launches + 1, o.seed).find((p) => !launched.has(p.name) && !out.has(p.name)) ?? points.find((p) => open.some((c) => c.point === p.name))!;
    return { kind: "launch", point: next.name, why: "no working configuration measured yet" };
  }
  // The incumbent's grid neighbours first: one with a real chance to be better at all (not
  // only by the tolerance) is launched. The surrogate smooths a peak at the grid's edge or
  // between two launches away; a neighbour is where a better configuration most often hides.
  const near = new Set(gridNeighbours(points, incumbent.point).map((p) => p.name));
  const neighbour = open.filter((c) => near.has(c.point) && c.starts >= 0.5 && c.better >= o.neighbourChance).sort((a, b) => b.better - a.better || a.point.localeCompare(b.point))[0];
  if (neighbour) return { kind: "launch", point: neighbour.point, why: `a grid neighbour of ${incumbent.point.name} with a ${(neighbour.better * 100).toFixed(1)} % chance to be better` };
  const likeliest = Math.max(...open.map((c) => c.beats));
  const stopChance = stopChanceOf(records, o);
  if (likeliest < stopChance) return { kind: "stop", why: `no configuration left has a ${(stopChance * 100).toFixed(0)} % chance to beat ${incumbent.point.name} by ${(o.tolerance * 100).toFixed(0)} % (the likeliest: ${(likeliest * 100).toFixed(1)} %)` };
  const best = smoothed.get(incumbent.point.name)!.mean;
  const ei = (c: Chance) => {
    const z = (c.mean - best) / c.sd;
    return c.starts * ((c.mean - best) * normalCdf(z) + (c.sd * Math.exp(-(z * z) / 2)) / Math.sqrt(2 * Math.PI));
  };
  const next = [...open].sort((a, b) => ei(b) - ei(a) || a.point.localeCompare(b.point))[0];
  return { kind: "launch", point: next.point, why: `expected improvement ${ei(next).toFixed(2)} tok/s over ${incumbent.point.name} (chance to beat it by ${(o.tolerance * 100).toFixed(0)} %: ${(next.beats * 100).toFixed(1)} %)` };
}

/**
 * Pure: after a pass on a launched server, whether to measure it (again) in full while it is
 * up: a short pass that could be the best, or within the tolerance of it; a full pass within
 * noise of the best (and not beyond the repeats).
 */
export function nextPass(points: GridPoint[], records: LaunchRecord[], point: string, o: StrategyOptions): PassKind | "done" {
  const { measured, incumbent: leader } = assess(points, records, [], o);
  const me = measured.find((m) => m.point.name === point);
  if (!me) return "done";
  const incumbent = leader && leader.point.name !== point ? leader : assess(points, records.filter((r) => r.point !== point), [], o).incumbent;
  if (me.fullPasses === 0) return !incumbent || me.value + 2 * me.se >= incumbent.value * (1 - o.tolerance) ? "full" : "done";
  if (me.fullPasses >= o.maxFullPasses || me.codingPassed === false) return "done";
  // A contender (it could be the best, or within the tolerance of it) is measured until its
  // relative standard error is under `repeatSe` (a third of the tolerance by default), while its
  // server is up: a repeat costs a benchmark, separating two contenders later would cost a
  // launch, and a configuration is never launched twice.
  const contender = !incumbent || me.value + 2 * me.se >= incumbent.value * (1 - o.tolerance);
  return contender && me.se > o.repeatSe * me.value ? "full" : "done";
}

export interface Conclusion {
  chosen?: Measured;
  /** The chance that no other configuration (launched or not) beats the chosen one by the tolerance. */
  confidence: number;
  /** Launched configurations within noise of the chosen one (two standard errors). */
  withinNoise: string[];
  ruledOut: Map<string, string>;
  measured: Measured[];
}

/** Pure: the configuration the sweep recommends and how sure it is. */
export function conclude(points: GridPoint[], records: LaunchRecord[], o: StrategyOptions): Conclusion {
  const { measured, incumbent: chosen, ruledOut: out, open } = assess(points, records, [], o);
  if (!chosen) return { confidence: 0, withinNoise: [], ruledOut: out, measured };
  let confidence = open.reduce((s, c) => s * (1 - c.beats), 1);
  const withinNoise: string[] = [];
  for (const m of measured) {
    if (m === chosen || m.codingPassed === false) continue;
    const sd = Math.hypot(m.se, chosen.se);
    confidence *= normalCdf((chosen.value * (1 + o.tolerance) - m.value) / sd);
    if (Math.abs(m.value - chosen.value) < 2 * sd) withinNoise.push(m.point.name);
  }
  return { chosen, confidence, withinNoise, ruledOut: out, measured };
}
