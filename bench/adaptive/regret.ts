// Pure: how a sweep's answer is scored by what a user deploys (issue 62): its top alone (no
// credit for a tie), by regret, 1 - the true value of the top / the true best (0: the best
// itself; an answer of nothing: 1). Beside it, always, the full grid measured once on the same
// surfaces, and the paired differences with 95 % intervals (a percentile bootstrap over the
// surfaces, seeded): the sweep's regret minus the grid's on the same surface.
import { prng } from "../../lib/prng";

/** Pure: regret of deploying `top`: 1 - truth(top) / the true best; 1 where there is no answer. */
export function regretOf(top: string | undefined, truth: ReadonlyMap<string, number>): number {
  const best = Math.max(...truth.values());
  if (top === undefined || !(best > 0)) return 1;
  return 1 - (truth.get(top) ?? 0) / best;
}

/** Pure: the q-quantile (0-1) of `xs`, linear between order statistics. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = q * (s.length - 1);
  const lo = Math.floor(i);
  return s[lo] + (s[Math.min(s.length - 1, lo + 1)] - s[lo]) * (i - lo);
}

const mean = (xs: readonly number[]) => xs.reduce((t, x) => t + x, 0) / xs.length;

/** The figures a regret sample is judged by. */
export interface RegretStats {
  n: number;
  meanRegret: number;
  p95Regret: number;
  /** Share of runs whose top is within 3 % of the true best (regret <= 0.03). */
  within3: number;
  /** Share within 1 %. */
  within1: number;
}

/** Pure: the figures of a sample of regrets. */
export function regretStats(regrets: readonly number[]): RegretStats {
  return {
    n: regrets.length,
    meanRegret: mean(regrets),
    p95Regret: quantile(regrets, 0.95),
    within3: regrets.filter((r) => r <= 0.03 + 1e-12).length / regrets.length,
    within1: regrets.filter((r) => r <= 0.01 + 1e-12).length / regrets.length,
  };
}

/** A paired difference (a minus b) with its 95 % bootstrap interval. */
export interface Paired {
  point: number;
  low: number;
  high: number;
}

/**
 * Pure: paired differences of the regret figures, `a` minus `b` surface by surface (the same
 * index is the same surface), each with a 95 % percentile bootstrap interval over the surfaces
 * (`replicates` resamples, seeded).
 */
export function pairedDifferences(a: readonly number[], b: readonly number[], seed: number, replicates = 2000): Record<"meanRegret" | "p95Regret" | "within3", Paired> {
  if (a.length !== b.length || a.length === 0) throw new Error(`pairedDifferences: needs two samples of the same surfaces (got ${a.length} and ${b.length})`);
  const n = a.length;
  const stat = (xs: readonly number[], ys: readonly number[]) => {
    const x = regretStats(xs);
    const y = regretStats(ys);
    return { meanRegret: x.meanRegret - y.meanRegret, p95Regret: x.p95Regret - y.p95Regret, within3: x.within3 - y.within3 };
  };
  const point = stat(a, b);
  const rand = prng(seed);
  const draws: ReturnType<typeof stat>[] = [];
  for (let r = 0; r < replicates; r++) {
    const xs: number[] = [];
    const ys: number[] = [];
    for (let i = 0; i < n; i++) {
      const j = Math.floor(rand() * n);
      xs.push(a[j]);
      ys.push(b[j]);
    }
    draws.push(stat(xs, ys));
  }
  const interval = (k: keyof ReturnType<typeof stat>): Paired => ({ point: point[k], low: quantile(draws.map((d) => d[k]), 0.025), high: quantile(draws.map((d) => d[k]), 0.975) });
  return { meanRegret: interval("meanRegret"), p95Regret: interval("p95Regret"), within3: interval("within3") };
}

/** Pure: the area under the ROC curve of `score` separating `positive` runs from the others (0.5: chance), ties counted half. */
export function auc(runs: readonly { score: number; positive: boolean }[]): number {
  const pos = runs.filter((r) => r.positive);
  const neg = runs.filter((r) => !r.positive);
  if (pos.length === 0 || neg.length === 0) return NaN;
  let wins = 0;
  for (const p of pos) for (const q of neg) wins += p.score > q.score ? 1 : p.score === q.score ? 0.5 : 0;
  return wins / (pos.length * neg.length);
}
