// The headline evaluation of the adaptive sweep: a generated family of surfaces
// (bench/adaptive/family.ts), drawn from a recorded seed, replayed at the simulator's
// per-request noise plus a launch-to-launch offset, beside random search, successive halving
// (bench/adaptive/baselines.ts) at the same GPU time on the same surface, and the full grid
// under the same noise. It also checks the stated confidence: a reliability table and the
// Brier score against the constant predictor (always quoting the base hit rate).
import type { GridPoint } from "../../components/sweep/adaptive/space";
import { Policy, ReplayCosts, replay, replayPolicy } from "../../components/sweep/adaptive/replay";
import { Conclusion, StrategyOptions } from "../../components/sweep/adaptive/strategy";
import { FamilyOptions, drawFamily, toReplayTable, truthOf } from "./family";
import { MAX_TIED, score } from "./evaluate";
import { fullGrid, randomSearch, successiveHalving } from "./baselines";
import { regretOf } from "./regret";

export interface FamilyRun {
  surface: number;
  features: string[];
  policy: string;
  /** The answer holds the best: a best within the tolerance, or a tie of at most MAX_TIED holding it (evaluate.ts). */
  hit: boolean;
  /** The answer's top alone is within the tolerance of the true best: the same question for every sweep. */
  topHit: boolean;
  tied: number;
  ratio: number;
  /** 1 - the true value of the answer's top / the true best (regret.ts): what a user who deploys the top loses. */
  regret: number;
  fraction: number;
  confidence?: number;
  /** The adaptive sweep's own expected regret of its pick, and its 90 % upper bound (strategy.ts Belief90). */
  expectedRegret?: number;
  regretUpper90?: number;
}

export interface FamilyEvaluation {
  seed: number;
  surfaces: number;
  options: FamilyOptions;
  runs: FamilyRun[];
}

/** Baselines run at a GPU budget: each gets what the adaptive sweep spent on the same surface. */
export type BaselineFactory = (budgetSeconds: number, seed: number) => Policy;

/** Random search and successive halving at the adaptive sweep's spend, and the full grid, expecting the replay's costs. */
export function baselinesAt(costs: ReplayCosts, launchSeconds: number): Record<string, BaselineFactory> {
  const expected = { launchSeconds, shortPassSeconds: costs.shortPassSeconds, fullPassSeconds: costs.fullPassSeconds };
  return {
    "random search": (budgetSeconds, seed) => randomSearch({ budgetSeconds, seed, costs: expected }),
    "successive halving": (budgetSeconds, seed) => successiveHalving({ budgetSeconds, seed, costs: expected }),
    "full grid": () => fullGrid(),
  };
}

/** The pick's expected regret and 90 % bound as the sweep states them (none without a pick). */
function pickBelief(c: Conclusion): { expectedRegret?: number; regretUpper90?: number } {
  const b = c.chosen ? c.beliefs.get(c.chosen.point.name) : undefined;
  return b ? { expectedRegret: b.expectedRegret, regretUpper90: b.regretUpper90 } : {};
}

/** Replays the adaptive strategy (and each baseline at its spend) on `n` surfaces drawn from `seed`. */
export function evaluateFamily(points: GridPoint[], seed: number, n: number, family: FamilyOptions, costs: ReplayCosts, launchSeconds: number, strategy: Omit<StrategyOptions, "seed">, baselines: Record<string, BaselineFactory>, hosts: number): FamilyEvaluation {
  const runs: FamilyRun[] = [];
  drawFamily(points, seed, n, family).forEach((surface, i) => {
    const table = toReplayTable(surface, launchSeconds);
    const truth = truthOf(surface);
    const runSeed = (surface.seed % 100000) + 1;
    const a = replay(points, table, costs, { ...strategy, seed: runSeed }, hosts);
    const s = score(a.conclusion.tied, truth, strategy.tolerance);
    const top = score(a.conclusion.tied.slice(0, 1), truth, strategy.tolerance);
    runs.push({ surface: i, features: surface.features, policy: "adaptive", hit: s.hit, topHit: top.hit, tied: s.tied, ratio: s.ratio, regret: regretOf(a.conclusion.chosen?.point.name, truth), fraction: a.gpuSeconds / a.fullGridGpuSeconds, confidence: a.conclusion.confidence, ...pickBelief(a.conclusion) });
    for (const [name, make] of Object.entries(baselines)) {
      const b = replayPolicy(points, table, costs, make(a.gpuSeconds, runSeed), hosts, runSeed);
      // A baseline's answer is its own authors' rule: its top by measured mean, alone.
      const t = score(b.answer.chosen ? [b.answer.chosen] : [], truth, strategy.tolerance);
      runs.push({ surface: i, features: surface.features, policy: name, hit: t.hit, topHit: t.hit, tied: t.tied, ratio: t.ratio, regret: regretOf(b.answer.chosen, truth), fraction: b.gpuSeconds / b.fullGridGpuSeconds, confidence: b.answer.confidence });
    }
  });
  return { seed, surfaces: n, options: family, runs };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** The share of runs that hit, with a 95 % Wilson interval. */
export function hitRate(runs: FamilyRun[]): { hits: number; n: number; rate: number; low: number; high: number } {
  const n = runs.length;
  const hits = runs.filter((r) => r.hit).length;
  const p = hits / n;
  const z = 1.96;
  const centre = (p + (z * z) / (2 * n)) / (1 + (z * z) / n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n);
  return { hits, n, rate: p, low: centre - half, high: centre + half };
}

/** Brier score of the stated confidences, and of always stating `constant`. */
export function brier(runs: FamilyRun[], constant: number): { stated: number; constant: number } {
  const r = runs.filter((x) => x.confidence !== undefined);
  const sq = (p: number, hit: boolean) => (p - (hit ? 1 : 0)) ** 2;
  return { stated: r.reduce((s, x) => s + sq(x.confidence!, x.hit), 0) / r.length, constant: r.reduce((s, x) => s + sq(constant, x.hit), 0) / r.length };
}

/** Markdown: per policy, hits and GPU time; the adaptive sweep per feature; the reliability table. */
export function renderFamily(e: FamilyEvaluation, title: string, constantFrom?: number): string[] {
  const policies = [...new Set(e.runs.map((r) => r.policy))];
  const lines = [
    `| sweep | its answer holds the best (95 % interval) | its top alone within 1 % | single answers | tie sets (≤ ${MAX_TIED} / larger) | median GPU time / full grid | 90th percentile | worst top / true best |`,
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const p of policies) {
    const rs = e.runs.filter((r) => r.policy === p);
    const h = hitRate(rs);
    const single = rs.filter((r) => r.tied === 1).length;
    const small = rs.filter((r) => r.tied > 1 && r.tied <= MAX_TIED).length;
    const top = rs.filter((r) => r.topHit).length;
    lines.push(`| ${p} | ${h.hits}/${h.n} (${pct(h.rate)}; ${pct(h.low)}-${pct(h.high)}) | ${top}/${rs.length} | ${single} | ${small} / ${rs.length - single - small} | ${pct(median(rs.map((r) => r.fraction)))} | ${pct(quantile(rs.map((r) => r.fraction), 0.9))} | ${pct(Math.min(...rs.map((r) => r.ratio)))} |`);
  }
  const adaptive = e.runs.filter((r) => r.policy === "adaptive");
  const features = [...new Set(adaptive.flatMap((r) => r.features))].sort();
  lines.push("", `Adaptive sweep per feature (${title}; a surface has several):`, "", "| feature | surfaces | hits | median GPU time |", "|---|---:|---:|---:|");
  for (const f of features) {
    const rs = adaptive.filter((r) => r.features.includes(f));
    lines.push(`| ${f} | ${rs.length} | ${rs.filter((r) => r.hit).length} (${pct(rs.filter((r) => r.hit).length / rs.length)}) | ${pct(median(rs.map((r) => r.fraction)))} |`);
  }
  const base = constantFrom ?? hitRate(adaptive).rate;
  const b = brier(adaptive, base);
  lines.push("", `Stated confidence of the adaptive sweep (${title}): Brier score ${b.stated.toFixed(4)} against ${b.constant.toFixed(4)} for always stating ${pct(base)}${constantFrom === undefined ? " (this family's own hit rate: the best constant there is)" : " (the hit rate of the training families the confidence was fitted on, components/sweep/adaptive/calibration.json)"}; ${b.stated < b.constant ? "below it" : "**not below it**"}.`, "");
  lines.push("| stated confidence | runs | hits | observed |", "|---|---:|---:|---:|");
  const bins = [0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0001];
  for (let i = 0; i < bins.length - 1; i++) {
    const rs = adaptive.filter((r) => r.confidence! >= bins[i] && r.confidence! < bins[i + 1]);
    if (rs.length === 0) continue;
    lines.push(`| ${pct(bins[i])}-${pct(Math.min(1, bins[i + 1]))} | ${rs.length} | ${rs.filter((r) => r.hit).length} | ${pct(rs.filter((r) => r.hit).length / rs.length)} |`);
  }
  return lines;
}
