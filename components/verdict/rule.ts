// Pure: the one rule by which this project says that one configuration is faster than another,
// that two are a tie, and how much faster one is. The report's "best", the review comment's
// benchmark lines and the adaptive sweep's answer all come from here.
//
// What a benchmark of a configuration measures is its true speed times a launch's persistent
// offset (a server start: its memory layout, clocks, kernel choices; repeated passes on one
// server cannot average it away) times each request's own noise. So a configuration's
// estimate is the mean of its launches' values, and its variance is the launches' spread over
// their number: with two or more launches, pooled from what they measured and a prior
// (`launchSd`); with one, from the prior and its requests' spread alone.
//
// A comparison is a ratio with a confidence interval on the log scale, and one configuration
// is better than another only when the whole interval lies beyond the noise threshold (a
// difference smaller than the threshold is no difference: hyperfine and criterion.rs report
// "no change" there); anything else is a tie, never a winner by a hair.
import { normal } from "../../lib/prng";

/** The rule's settings; every verdict says which it used. */
export interface RuleSettings {
  /** Relative: a true difference smaller than this is no difference (a tie). */
  threshold: number;
  /** Two-sided confidence of the intervals (0.95: 95 %). */
  confidence: number;
  /**
   * Relative standard deviation of one server launch's persistent offset: the prior where a
   * configuration has one launch, pooled with what its launches measured where it has more.
   */
  launchSd: number;
}

/** Degrees of freedom the prior `launchSd` weighs as, pooled with the launches' own spread. */
const PRIOR_WEIGHT = 3;

/** One launch of a configuration: the value it measured and the requests behind it. */
export interface LaunchMeasure {
  /** The launch's value (e.g. decode tok/s: the median, or mean, over its requests and passes). */
  value: number;
  /** Requests behind `value`. */
  requests: number;
  /** Relative standard deviation of one request's value on this launch. */
  requestSd: number;
}

/** A configuration's estimate: its value and relative standard error. */
export interface Estimate {
  value: number;
  /** Relative standard error of `value` (0.01: 1 %). */
  relSe: number;
  launches: number;
  requests: number;
}

/** Pure: the estimate of a configuration from its launches (at least one, each with a positive value). */
export function estimate(launches: readonly LaunchMeasure[], s: Pick<RuleSettings, "launchSd">): Estimate {
  if (launches.length === 0) throw new Error("estimate: a configuration needs at least one launch");
  if (launches.some((l) => !(l.value > 0) || !(l.requests >= 1))) throw new Error("estimate: every launch needs a positive value and at least one request");
  const k = launches.length;
  const value = launches.reduce((t, l) => t + l.value, 0) / k;
  // A launch's variance as the prior has it: its offset plus its requests' noise (a median's
  // variance is about pi/2 times a mean's; the requests' spread is the median's here).
  const requestVar = launches.reduce((t, l) => t + (Math.PI / 2) * (l.requestSd * l.requestSd) / l.requests, 0) / k;
  const priorVar = s.launchSd * s.launchSd + requestVar;
  let launchVar = priorVar;
  if (k >= 2) {
    const observed = launches.reduce((t, l) => t + (l.value / value - 1) ** 2, 0) / (k - 1);
    launchVar = (PRIOR_WEIGHT * priorVar + (k - 1) * observed) / (PRIOR_WEIGHT + k - 1);
  }
  return { value, relSe: Math.sqrt(launchVar / k), launches: k, requests: launches.reduce((t, l) => t + l.requests, 0) };
}

export type Verdict = "better" | "worse" | "tie";

/** A's value over B's, with its interval, and what the rule makes of it. */
export interface Comparison {
  verdict: Verdict;
  ratio: number;
  /** The interval of the ratio at the rule's confidence. */
  low: number;
  high: number;
}

/** Pure: the standard normal quantile (Acklam's rational approximation, relative error under 1.2e-9). */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new Error(`normalQuantile: p must lie strictly between 0 and 1 (got ${p})`);
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number) => (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/** Pure: A against B: better only when the whole interval of A/B lies above 1 + threshold, worse when below 1 / (1 + threshold). */
export function compare(a: Estimate, b: Estimate, s: Pick<RuleSettings, "threshold" | "confidence">): Comparison {
  const ratio = a.value / b.value;
  const half = normalQuantile(0.5 + s.confidence / 2) * Math.hypot(a.relSe, b.relSe);
  const low = ratio * Math.exp(-half);
  const high = ratio * Math.exp(half);
  const verdict: Verdict = low > 1 + s.threshold ? "better" : high < 1 / (1 + s.threshold) ? "worse" : "tie";
  return { verdict, ratio, low, high };
}

/** The best of several configurations: one that beats every other, or the set none of which the rule can separate from the top. */
export type Ranking<K> = { kind: "best"; best: K } | { kind: "tie"; tied: K[] };

/**
 * Pure: the best of `entries` by the rule: the one of highest value when it is better than
 * every other; else the tie of it and every entry it is not better than (highest first). A
 * single entry is a tie of one: "best" needs something it was better than.
 */
export function rank<K>(entries: readonly { key: K; estimate: Estimate }[], s: Pick<RuleSettings, "threshold" | "confidence">): Ranking<K> {
  if (entries.length === 0) throw new Error("rank: nothing to rank");
  const sorted = [...entries].sort((x, y) => y.estimate.value - x.estimate.value);
  const [top, ...rest] = sorted;
  const tied = rest.filter((e) => compare(top.estimate, e.estimate, s).verdict !== "better");
  if (rest.length > 0 && tied.length === 0) return { kind: "best", best: top.key };
  return { kind: "tie", tied: [top.key, ...tied.map((e) => e.key)] };
}

/** A configuration's value as a normal belief: measured (an estimate) or predicted (e.g. a surrogate's, with the chance it starts at all). */
export interface Belief<K> {
  key: K;
  mean: number;
  sd: number;
  /** The chance it exists (starts); 1 for a measured one. */
  exists: number;
  /** Whether it may be in the answer (measured and eligible); a predicted one only competes. */
  member: boolean;
}

/** The least a member must add to the set's chance to be in it. */
const MIN_GAIN = 0.02;

/** The answer a search gives from its beliefs: one member (a best) or a few it cannot separate (a tie), and the chance it holds. */
export interface CredibleSet<K> {
  keys: K[];
  /**
   * The chance, by the beliefs, that the answer is right: one member within the tolerance of
   * the true best; a tie holding the true best, or all of whose members are within the
   * tolerance of it (a tie whose members are not all as good names the best, or it misleads).
   */
  chance: number;
  /** Per member: the chance that it alone is within the tolerance of the true best. */
  each: Map<K, number>;
}

/**
 * Pure: whether an answer is right, given per member whether it is within the tolerance of the
 * best and whether one of them is the best: one member within it; a tie that holds the best or
 * is all within it. The chance credibleSet weighs answers by, and what bench/adaptive/evaluate.ts
 * scores against the truth.
 */
export function answerIsRight(within: readonly boolean[], holdsBest: boolean): boolean {
  return within.length === 1 ? within[0] : holdsBest || within.every(Boolean);
}

/**
 * Pure: the answer of a search that cannot tell its top configurations apart. It draws the
 * true values from the beliefs (`draws` times, seeded) and weighs answers of one to `maxSize`
 * members by the chance each is right (CredibleSet.chance): the likeliest one alone, then ties
 * grown greedily, a member at a time (the one that adds most to the tie's chance; not every
 * tie of that size is tried). It answers the first that reaches `confidence`; else the likeliest
 * of them, a larger one only where it adds at least 2 % to the chance of the answer so far (a tie
 * of more tells a user less). The chance is read off the same draws that chose the answer, so
 * it leans high by about their error (400 draws: about 2 %); calibration.ts maps it.
 */
export function credibleSet<K>(beliefs: readonly Belief<K>[], s: { tolerance: number; confidence: number; maxSize?: number }, rand: () => number, draws = 400): CredibleSet<K> {
  const members = beliefs.filter((b) => b.member);
  if (members.length === 0) return { keys: [], chance: 0, each: new Map() };
  const z = () => normal(rand);
  const memberIndex = members.map((m) => beliefs.indexOf(m));
  // Per draw: which members are within the tolerance of the draw's best, and which member is the best (-1: one not launched).
  const good: boolean[][] = [];
  const top: number[] = [];
  for (let d = 0; d < draws; d++) {
    const values = beliefs.map((b) => (b.exists >= 1 || rand() < b.exists ? b.mean + b.sd * z() : -Infinity));
    const best = Math.max(...values);
    good.push(memberIndex.map((j) => values[j] >= best * (1 - s.tolerance)));
    top.push(memberIndex.findIndex((j) => values[j] === best));
  }
  const each = members.map((_, i) => good.filter((g) => g[i]).length / draws);
  const right = (set: number[]) => good.filter((g, d) => answerIsRight(set.map((c) => g[c]), set.includes(top[d]))).length / draws;
  const first = members.map((_, i) => i).sort((a, b) => each[b] - each[a] || members[b].mean - members[a].mean)[0];
  let answer = { set: [first], chance: each[first] };
  let grown = answer;
  while (answer.chance < s.confidence && grown.set.length < Math.min(s.maxSize ?? Infinity, members.length)) {
    const next = members
      .map((_, i) => i)
      .filter((i) => !grown.set.includes(i))
      .map((i) => ({ set: [...grown.set, i], chance: right([...grown.set, i]) }))
      .sort((a, b) => b.chance - a.chance || members[b.set[b.set.length - 1]].mean - members[a.set[a.set.length - 1]].mean)[0];
    grown = next;
    // A tie that reaches the confidence is the answer. Short of it, a member that adds (almost)
    // nothing is not a tie: what the answer lacks is elsewhere (a configuration not launched may
    // be better), and the chance says so.
    if (grown.chance >= s.confidence || grown.chance >= answer.chance + MIN_GAIN) answer = grown;
  }
  return { keys: answer.set.map((i) => members[i].key), chance: answer.chance, each: new Map(members.map((m, i) => [m.key, each[i]])) };
}
