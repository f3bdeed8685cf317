// Pure: the sweeps the adaptive one is compared with at the same GPU budget (random search,
// successive halving) and the full grid, as policies a replay drives: the driver asks
// `decide` for a launch whenever a host is free, `firstPass` for the pass a launch that
// started gets, `nextPass` after each pass, and `conclude` at the end. Every decision reads
// only what was measured (the records), so a policy's answer is what a user would get.
//
// Answers: each policy's own rule picks `chosen` (the highest measured mean, as its authors
// define it); `tied` is the project's decision rule (components/verdict/rule.ts `rank`,
// threshold 1 %, confidence 95 %, a 1.5 % launch-offset prior) over the policy's candidates:
// the chosen configuration and every candidate it cannot tell from it (chosen first).
import type { GridPoint } from "../../components/sweep/adaptive/space";
import type { Policy } from "../../components/sweep/adaptive/replay";
import { launchValue, LaunchRecord, pooledNoise, ruledOut, spentSeconds } from "../../components/sweep/adaptive/strategy";
import { estimate, LaunchMeasure, rank, RuleSettings } from "../../components/verdict/rule";
import { mix, prng } from "../../lib/prng";

/** What one launch is expected to cost (GPU seconds): the policies plan with it and never pass their budget by it. */
export interface ExpectedCosts {
  /** A launch that starts (its load). */
  launchSeconds: number;
  shortPassSeconds: number;
  fullPassSeconds: number;
}

export interface BudgetedOptions {
  /** GPU seconds not to pass (the adaptive sweep's median spend, for a comparison at the same budget). */
  budgetSeconds: number;
  seed: number;
  costs: ExpectedCosts;
}

/** The decision rule's settings for the tie sets. */
export const TIE_RULE: RuleSettings = { threshold: 0.01, confidence: 0.95, launchSd: 0.015, equalWithin: 0.02 };

const SHORT = { kind: "short", longWeight: 0 } as const;


/** Pure: per configuration that worked, its launches' measures (for the rule) and their mean. */
function measures(records: LaunchRecord[]): Map<string, { launches: LaunchMeasure[]; mean: number }> {
  const requestSd = pooledNoise(records, SHORT);
  const out = new Map<string, { launches: LaunchMeasure[]; mean: number }>();
  for (const r of records) {
    const v = launchValue(r, SHORT);
    if (!v || !(v.value > 0)) continue;
    const m = out.get(r.point) ?? { launches: [], mean: 0 };
    m.launches.push({ value: v.value, requests: v.requests, requestSd });
    m.mean = m.launches.reduce((s, l) => s + l.value, 0) / m.launches.length;
    out.set(r.point, m);
  }
  return out;
}

/** Pure: the answer among `candidates` (configurations that worked): the highest mean over its launches, and the rule's tie set around it. */
function answer(records: LaunchRecord[], candidates?: Set<string>): { chosen?: string; tied: string[] } {
  const all = [...measures(records)].filter(([name]) => !candidates || candidates.has(name));
  if (all.length === 0) return { tied: [] };
  all.sort((a, b) => b[1].mean - a[1].mean || a[0].localeCompare(b[0]));
  const chosen = all[0][0];
  const ranking = rank(all.map(([key, m]) => ({ key, estimate: estimate(m.launches, TIE_RULE) })), TIE_RULE);
  return { chosen, tied: ranking.kind === "best" ? [chosen] : ranking.tied };
}

/**
 * Pure: whether another launch fits the budget: what is spent, plus what the launches in
 * flight and this one may cost (the expected cost, or the dearest launch so far where that is
 * more), stays within it.
 */
function fits(records: LaunchRecord[], inFlight: string[], o: BudgetedOptions, passSeconds: number): boolean {
  const dearest = Math.max(o.costs.launchSeconds + passSeconds, ...records.map((r) => spentSeconds([r])));
  return spentSeconds(records) + dearest * (inFlight.length + 1) <= o.budgetSeconds;
}

/** Pure: the points in a seeded random order (Fisher-Yates). */
function shuffled(points: GridPoint[], seed: number): GridPoint[] {
  const rand = prng(mix(seed, 0));
  const out = [...points];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

function checkBudget(o: BudgetedOptions, who: string): void {
  if (!(o.budgetSeconds > 0)) throw new Error(`${who}: budgetSeconds must be positive, got ${o.budgetSeconds}`);
  for (const [k, v] of Object.entries(o.costs)) if (!(v >= 0)) throw new Error(`${who}: costs.${k} must be a number >= 0, got ${v}`);
}

/**
 * Random search: distinct configurations in a seeded random order, one full pass each, until
 * the next launch could pass the budget; a configuration a launch that ran out of memory rules
 * out (space.ts needsAtLeast) is skipped, as any sweep that reads its failures would. Its
 * answer: the highest measured value.
 */
export function randomSearch(o: BudgetedOptions): Policy {
  checkBudget(o, "randomSearch");
  return {
    name: "random search",
    decide(points, records, inFlight) {
      const taken = new Set([...records.map((r) => r.point), ...inFlight, ...ruledOut(points, records).keys()]);
      const next = shuffled(points, o.seed).find((p) => !taken.has(p.name));
      if (!next) return { kind: "stop", why: "every configuration is launched, in flight or ruled out" };
      if (!fits(records, inFlight, o, o.costs.fullPassSeconds)) return { kind: "stop", why: `another launch could pass the budget of ${o.budgetSeconds.toFixed(0)} GPU s (${spentSeconds(records).toFixed(0)} spent)` };
      return { kind: "launch", point: next.name, why: "the next in random order" };
    },
    firstPass: () => "full",
    nextPass: () => "done",
    conclude: (_points, records) => answer(records),
  };
}

export interface HalvingPlan {
  /** Configurations per rung: rung 0 gets n0 launches with a short pass, rung r > 0 the top n0 / eta^r again with a full pass. */
  rungs: number[];
  /** The GPU seconds the plan is expected to cost, every launch starting. */
  expectedSeconds: number;
}

/**
 * Pure: the largest successive-halving plan that fits the budget: the most configurations
 * in rung 0 such that rung 0 (short passes) and every later rung (a new launch of the top
 * 1/eta, a full pass) fit together; rungs go on while a rung keeps two or more (the last is
 * ranked by the mean of its launches, so one alone would be a launch that decides nothing).
 */
export function halvingPlan(points: number, budgetSeconds: number, costs: ExpectedCosts, eta: number): HalvingPlan {
  const plan = (n0: number): HalvingPlan => {
    const rungs = [n0];
    while (Math.floor(rungs[rungs.length - 1] / eta) >= 2) rungs.push(Math.floor(rungs[rungs.length - 1] / eta));
    const expectedSeconds = rungs.reduce((s, n, r) => s + n * (costs.launchSeconds + (r === 0 ? costs.shortPassSeconds : costs.fullPassSeconds)), 0);
    return { rungs, expectedSeconds };
  };
  let best = plan(1);
  for (let n0 = 2; n0 <= points; n0++) {
    const p = plan(n0);
    if (p.expectedSeconds <= budgetSeconds) best = p;
  }
  return best;
}

/**
 * Successive halving (Jamieson & Talwalkar 2016; Hyperband's inner loop) for a sweep whose
 * unit is a launch and whose launches differ: rung 0 launches n0 random configurations, each
 * with a short pass; each later rung keeps the top 1/eta of the one before (by the mean of
 * their launches so far) and launches each survivor again, with a full pass (a new server,
 * not more requests on the same: a second pass on one server cannot see its launch offset).
 * A rung starts when the one before has finished. n0 is the largest that fits the budget
 * (halvingPlan); the budget is also checked before every launch, so costs above the expected
 * cut the last rungs short rather than pass it. A configuration ruled out by a launch that ran
 * out of memory is not drawn; one that fails is out of its rung. The answer: the top of the
 * last rung reached (the configurations launched most) by the mean of its launches.
 */
export function successiveHalving(o: BudgetedOptions & { eta?: number }): Policy {
  checkBudget(o, "successiveHalving");
  const eta = o.eta ?? 3;
  if (!(Number.isInteger(eta) && eta >= 2)) throw new Error(`successiveHalving: eta must be a whole number >= 2, got ${eta}`);
  return {
    name: `successive halving (eta ${eta})`,
    decide(points, records, inFlight) {
      const plan = halvingPlan(points.length, o.budgetSeconds, o.costs, eta);
      const launch = (point: string, why: string) =>
        fits(records, inFlight, o, o.costs.fullPassSeconds) ? ({ kind: "launch", point, why } as const) : ({ kind: "stop", why: `another launch could pass the budget of ${o.budgetSeconds.toFixed(0)} GPU s (${spentSeconds(records).toFixed(0)} spent)` } as const);
      const finished = (name: string) => records.filter((r) => r.point === name);
      // A point's launch in flight is its rung `finished(point).length`.
      const rungInFlight = (rung: number) => inFlight.some((p) => finished(p).length === rung);
      const rung0 = new Set([...records.map((r) => r.point), ...inFlight]);
      if (rung0.size < plan.rungs[0]) {
        const out = ruledOut(points, records);
        const next = shuffled(points, o.seed).find((p) => !rung0.has(p.name) && !out.has(p.name));
        if (next) return launch(next.name, `rung 0: ${rung0.size + 1} of ${plan.rungs[0]} (random, a short pass)`);
      }
      for (let rung = 1; rung < plan.rungs.length; rung++) {
        if (rungInFlight(rung - 1)) return { kind: "stop", why: `waiting for rung ${rung - 1} to finish` };
        // The survivors of rung - 1: its top by the mean of their first `rung` launches (the
        // launches of this rung do not change who survived it).
        const survivors = [...measures(records.filter((r, i) => records.slice(0, i).filter((q) => q.point === r.point).length < rung))]
          .filter(([name]) => finished(name).length >= rung)
          .sort((a, b) => b[1].mean - a[1].mean || a[0].localeCompare(b[0]))
          .slice(0, plan.rungs[rung])
          .map(([name]) => name);
        const pending = survivors.filter((p) => finished(p).length === rung && !inFlight.includes(p));
        if (pending.length > 0) return launch(pending[0], `rung ${rung}: ${survivors.length - pending.length + 1} of ${survivors.length}, a survivor of rung ${rung - 1} launched again (a full pass)`);
      }
      if (inFlight.length > 0) return { kind: "stop", why: "waiting for the last rung to finish" };
      return { kind: "stop", why: `the last rung (${plan.rungs.length - 1}) is done` };
    },
    firstPass: (_points, records, record) => (records.filter((r) => r.point === record.point).length > 1 ? "full" : "short"),
    nextPass: () => "done",
    conclude(_points, records) {
      const m = measures(records);
      const most = Math.max(0, ...[...m.values()].map((x) => x.launches.length));
      return answer(records, new Set([...m].filter(([, x]) => x.launches.length === most).map(([name]) => name)));
    },
  };
}

/** The full grid: every configuration launched once (stack-name order), one full pass each, no budget; the highest measured value. */
export function fullGrid(): Policy {
  return {
    name: "full grid",
    decide(points, records, inFlight) {
      const taken = new Set([...records.map((r) => r.point), ...inFlight]);
      const next = points.find((p) => !taken.has(p.name));
      return next ? { kind: "launch", point: next.name, why: "the next of the grid" } : { kind: "stop", why: "every configuration is launched" };
    },
    firstPass: () => "full",
    nextPass: () => "done",
    conclude: (_points, records) => answer(records),
  };
}
