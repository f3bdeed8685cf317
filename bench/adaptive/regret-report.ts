// The adaptive sweep scored by what a user deploys (issue 62), as bench/adaptive-sweep.ts
// writes it: per family and pooled, the answer's top by regret (regret.ts) beside the full grid
// measured once on the same surfaces, the paired differences with 95 % intervals against the
// targets, per feature, under other noise, and how far the stated confidence can be read.
import type { FamilyEvaluation, FamilyRun } from "./family-eval";
import { auc, pairedDifferences, quantile, regretStats, type Paired } from "./regret";
import { REGRET_BOUND_QUANTILE } from "../../components/sweep/adaptive/strategy";

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const pts = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(2)}`;
const interval = (p: Paired) => `${pts(p.point)} [${pts(p.low)}, ${pts(p.high)}]`;

/** The targets of issue 62, against the full grid measured once (the bound of the 95 % interval) and absolute. */
export const TARGETS = { meanRegretVsGrid: 0.0025, within3VsGrid: -0.02, p95RegretVsGrid: 0.0075, meanRegret: 0.01, within3: 0.92, medianGpu: 0.35, p90Gpu: 0.45, perFeatureWithin3: 0.8, boundCoverage: [0.88, 0.92] } as const;

/** Runs of one policy, ordered by surface; several evaluations side by side (surfaces of each kept apart by their family). */
const runsOf = (es: readonly FamilyEvaluation[], policy: string): FamilyRun[] => es.flatMap((e) => e.runs.filter((r) => r.policy === policy).sort((a, b) => a.surface - b.surface));

const yes = (ok: boolean) => (ok ? "holds" : "**does not hold**");

/** Pure: the regret sections of a set of families (pooled, and each). */
export function renderRegret(es: readonly FamilyEvaluation[], title: string, seed: number): { lines: string[]; json: Record<string, unknown> } {
  const policies = [...new Set(es.flatMap((e) => e.runs.map((r) => r.policy)))];
  const lines: string[] = [];
  const label = (e: FamilyEvaluation) => `seed ${e.seed}`;
  lines.push(
    `| sweep | families | surfaces | mean regret | 95th percentile regret | top within 3 % | top within 1 % | median GPU time / full grid | 90th percentile |`,
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
  );
  const groups: { name: string; es: readonly FamilyEvaluation[] }[] = [{ name: `all ${es.length}`, es }, ...(es.length > 1 ? es.map((e) => ({ name: label(e), es: [e] })) : [])];
  for (const g of groups) {
    for (const p of policies) {
      const rs = runsOf(g.es, p);
      const st = regretStats(rs.map((r) => r.regret));
      const fr = rs.map((r) => r.fraction);
      lines.push(`| ${p} | ${g.name} | ${st.n} | ${pct(st.meanRegret)} | ${pct(st.p95Regret)} | ${pct(st.within3)} | ${pct(st.within1)} | ${pct(quantile(fr, 0.5))} | ${pct(quantile(fr, 0.9))} |`);
    }
  }
  // Paired: the adaptive sweep minus the full grid, surface by surface.
  lines.push(
    "",
    `Paired on the same surfaces (${title}): the adaptive sweep minus the full grid measured once, in points (percentage points), each with its 95 % interval (a percentile bootstrap over the surfaces, 2000 resamples, seed ${seed}). Targets (issue 62), on the interval's bound: mean regret at most +${(TARGETS.meanRegretVsGrid * 100).toFixed(2)}, share within 3 % at most ${(-TARGETS.within3VsGrid * 100).toFixed(2)} lower, 95th-percentile regret at most +${(TARGETS.p95RegretVsGrid * 100).toFixed(2)}.`,
    "",
    "| families | mean regret | target | share within 3 % | target | 95th percentile regret | target |",
    "|---|---:|---|---:|---|---:|---|",
  );
  const paired: Record<string, unknown> = {};
  for (const g of groups) {
    const a = runsOf(g.es, "adaptive").map((r) => r.regret);
    const b = runsOf(g.es, "full grid").map((r) => r.regret);
    const d = pairedDifferences(a, b, seed);
    paired[g.name] = d;
    lines.push(`| ${g.name} | ${interval(d.meanRegret)} | ${yes(d.meanRegret.high <= TARGETS.meanRegretVsGrid)} | ${interval(d.within3)} | ${yes(d.within3.low >= TARGETS.within3VsGrid)} | ${interval(d.p95Regret)} | ${yes(d.p95Regret.high <= TARGETS.p95RegretVsGrid)} |`);
  }
  const all = regretStats(runsOf(es, "adaptive").map((r) => r.regret));
  const fr = runsOf(es, "adaptive").map((r) => r.fraction);
  lines.push(
    "",
    `Absolute (${title}, all ${runsOf(es, "adaptive").length} surfaces): mean regret ${pct(all.meanRegret)} (target ≤ ${pct(TARGETS.meanRegret)}: ${yes(all.meanRegret <= TARGETS.meanRegret)}); top within 3 % in ${pct(all.within3)} (target ≥ ${pct(TARGETS.within3)}: ${yes(all.within3 >= TARGETS.within3)}); GPU time median ${pct(quantile(fr, 0.5))} (target ≤ ${pct(TARGETS.medianGpu)}: ${yes(quantile(fr, 0.5) <= TARGETS.medianGpu)}), 90th percentile ${pct(quantile(fr, 0.9))} (target ≤ ${pct(TARGETS.p90Gpu)}: ${yes(quantile(fr, 0.9) <= TARGETS.p90Gpu)}).`,
    "",
  );
  // Per feature, side by side with the grid.
  const features = [...new Set(es.flatMap((e) => e.runs.flatMap((r) => r.features)))].sort();
  lines.push(
    `Per feature (${title}; a surface has several), target: top within 3 % in ≥ ${pct(TARGETS.perFeatureWithin3)}:`,
    "",
    "| feature | surfaces | adaptive: within 3 % | full grid: within 3 % | adaptive: mean regret | full grid: mean regret | adaptive: median GPU time | target |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
  );
  const perFeature: Record<string, unknown> = {};
  for (const f of features) {
    const a = runsOf(es, "adaptive").filter((r) => r.features.includes(f));
    const b = runsOf(es, "full grid").filter((r) => r.features.includes(f));
    const sa = regretStats(a.map((r) => r.regret));
    const sb = regretStats(b.map((r) => r.regret));
    perFeature[f] = { adaptive: sa, fullGrid: sb };
    lines.push(`| ${f} | ${a.length} | ${pct(sa.within3)} | ${pct(sb.within3)} | ${pct(sa.meanRegret)} | ${pct(sb.meanRegret)} | ${pct(quantile(a.map((r) => r.fraction), 0.5))} | ${yes(sa.within3 >= TARGETS.perFeatureWithin3)} |`);
  }
  // The stated confidence: does it separate good tops from bad ones?
  const ad = runsOf(es, "adaptive").filter((r) => r.confidence !== undefined);
  const a1 = auc(ad.map((r) => ({ score: r.confidence!, positive: r.regret <= 0.01 + 1e-12 })));
  const a3 = auc(ad.map((r) => ({ score: r.confidence!, positive: r.regret <= 0.03 + 1e-12 })));
  const base1 = ad.filter((r) => r.regret <= 0.01 + 1e-12).length / ad.length;
  const brier = ad.reduce((t, r) => t + (r.confidence! - (r.regret <= 0.01 + 1e-12 ? 1 : 0)) ** 2, 0) / ad.length;
  const brierConst = ad.reduce((t, r) => t + (base1 - (r.regret <= 0.01 + 1e-12 ? 1 : 0)) ** 2, 0) / ad.length;
  lines.push(
    "",
    `The sweep's chance that its answer is within 1 % of the best (calibration.ts; the report stated it before issue 62) against its top (${title}): it separates tops within 1 % from the others at AUC ${a1.toFixed(2)} and within 3 % at AUC ${a3.toFixed(2)} (0.5 is chance); Brier score against "top within 1 %" ${brier.toFixed(4)}, against ${brierConst.toFixed(4)} for always stating this family's own rate (${pct(base1)}). ${a1 < 0.7 || brier >= brierConst ? "It is not a per-run figure a user can act on, and the sweep's report no longer states it; the population figures above are (the top within 3 % of the best in " + pct(all.within3) + " of simulated runs, mean regret " + pct(all.meanRegret) + ")." : ""}`,
    "",
  );
  // The pick's stated regret: is its 90 % upper bound a bound 90 % of the time, and does the expected regret track the real one?
  const stated = ad.filter((r) => r.regretUpper90 !== undefined);
  const covered = stated.filter((r) => r.regret <= r.regretUpper90! + 1e-12).length / stated.length;
  const meanExpected = stated.reduce((t, r) => t + r.expectedRegret!, 0) / stated.length;
  const meanActual = stated.reduce((t, r) => t + r.regret, 0) / stated.length;
  const rho = spearman(stated.map((r) => r.expectedRegret!), stated.map((r) => r.regret));
  const calibrated = covered >= TARGETS.boundCoverage[0] && covered <= TARGETS.boundCoverage[1];
  lines.push(
    `The pick's stated regret, as the sweep's report states it (${title}, ${stated.length} runs with a pick; from the answer's draws, the bound their ${Math.round(REGRET_BOUND_QUANTILE * 100)}th percentile, chosen on the training families: strategy.ts REGRET_BOUND_QUANTILE): its 90 % upper bound held in ${pct(covered)} of runs (target ${pct(TARGETS.boundCoverage[0])}-${pct(TARGETS.boundCoverage[1])}: ${yes(calibrated)}); the expected regret averages ${pct(meanExpected)} against a real ${pct(meanActual)}, Spearman correlation ${rho.toFixed(2)} with the real regret run by run.${calibrated ? "" : " Not calibrated here: the population figures above are the ones to act on."}`,
    "",
  );
  return { lines, json: { paired, perFeature, confidence: { auc1: a1, auc3: a3, brier, brierConst, boundCoverage: covered, meanExpected, meanActual, spearman: rho } } };
}

/** Pure: Spearman's rank correlation (average ranks for ties). */
export function spearman(xs: readonly number[], ys: readonly number[]): number {
  const ranks = (v: readonly number[]) => {
    const order = v.map((x, i) => ({ x, i })).sort((a, b) => a.x - b.x);
    const r = new Array<number>(v.length);
    for (let k = 0; k < order.length; ) {
      let e = k;
      while (e + 1 < order.length && order[e + 1].x === order[k].x) e++;
      for (let j = k; j <= e; j++) r[order[j].i] = (k + e) / 2;
      k = e + 1;
    }
    return r;
  };
  const [a, b] = [ranks(xs), ranks(ys)];
  const mean = (v: number[]) => v.reduce((t, x) => t + x, 0) / v.length;
  const [ma, mb] = [mean(a), mean(b)];
  const cov = a.reduce((t, x, i) => t + (x - ma) * (b[i] - mb), 0);
  const va = a.reduce((t, x) => t + (x - ma) ** 2, 0);
  const vb = b.reduce((t, x) => t + (x - mb) ** 2, 0);
  return va > 0 && vb > 0 ? cov / Math.sqrt(va * vb) : NaN;
}

/** Pure: the robustness table: per noise variant, the adaptive sweep's mean regret against the full grid's on the same surfaces. */
export function renderRobustness(variants: { name: string; es: FamilyEvaluation[] }[], seed: number): { lines: string[]; json: Record<string, unknown> } {
  const lines = [
    "| noise (request sd / launch offset) | surfaces | adaptive: mean regret | full grid: mean regret | adaptive / full grid | adaptive minus full grid (95 % interval) | adaptive: within 3 % | full grid: within 3 % | adaptive: median GPU time | target: at most twice the grid's |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  const json: Record<string, unknown> = {};
  for (const v of variants) {
    const a = runsOf(v.es, "adaptive");
    const b = runsOf(v.es, "full grid");
    const sa = regretStats(a.map((r) => r.regret));
    const sb = regretStats(b.map((r) => r.regret));
    const d = pairedDifferences(a.map((r) => r.regret), b.map((r) => r.regret), seed);
    json[v.name] = { adaptive: sa, fullGrid: sb, paired: d };
    lines.push(`| ${v.name} | ${a.length} | ${pct(sa.meanRegret)} | ${pct(sb.meanRegret)} | ${(sa.meanRegret / sb.meanRegret).toFixed(2)} | ${interval(d.meanRegret)} | ${pct(sa.within3)} | ${pct(sb.within3)} | ${pct(quantile(a.map((r) => r.fraction), 0.5))} | ${yes(sa.meanRegret <= 2 * sb.meanRegret)} |`);
  }
  return { lines, json };
}
