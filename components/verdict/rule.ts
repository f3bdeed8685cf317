// Pure: the one rule by which this project says that one configuration is faster than another,
// that two are equal within a stated margin or that it cannot tell, and how much faster one is.
// The report's "best", the review comment's benchmark lines and the adaptive sweep's answer all
// come from here.
//
// What a benchmark of a configuration measures is its true speed times a launch's persistent
// offset (a server start: its memory layout, clocks, kernel choices; repeated passes on one
// server cannot average it away) times each request's own noise. So a configuration's
// estimate is the mean of its launches' values, and its variance is the launch offset's plus
// its requests', over its launches. The launch offset is estimated from the relaunches of every
// configuration compared (`launchOffset`): where none was relaunched it cannot be measured, and
// the rule assumes twice `launchSd` (so that it stays sound where the true offset is up to
// twice the assumed one); with relaunches their spread is pooled with that assumption, never
// below `launchSd` itself.
//
// A comparison is a ratio with an always-valid interval on the log scale (a normal-mixture
// confidence sequence, Robbins 1970; Howard et al. 2021): its coverage holds however often the
// benchmark is re-run and the report read again (rows.ts pools every kept run), which a fixed
// 95 % interval does not. One configuration is better than another only when the whole
// interval lies beyond the noise threshold; "equal" when it lies inside +-`equalWithin`;
// else "inconclusive": the benchmark cannot tell. Each comparison also says the smallest
// difference its measurements could detect (80 % of the time, at the next look).
import { normal } from "../../lib/prng";

/** The rule's settings; every verdict says which it used. */
export interface RuleSettings {
  /** Relative: a true difference smaller than this is no difference (never "better"). */
  threshold: number;
  /** Two-sided confidence of the intervals (0.95: 95 %), valid over any number of looks. */
  confidence: number;
  /**
   * Relative standard deviation of one server launch's persistent offset, as assumed: the rule
   * takes twice it where no configuration was relaunched, pools it with the relaunches' spread
   * where some were, and never goes below it.
   */
  launchSd: number;
  /** Relative: "equal" when the whole interval of the ratio lies inside +-this. */
  equalWithin: number;
}

/** Degrees of freedom the prior `launchSd` weighs as, pooled with a configuration's own launches (estimate without an offset: the adaptive sweep's bookkeeping). */
const PRIOR_WEIGHT = 3;
/** Degrees of freedom the assumed offset (twice launchSd) weighs as in launchOffset, pooled with every configuration's relaunches. */
const OFFSET_PRIOR_WEIGHT = 3;
/** Where no configuration was relaunched, the rule assumes an offset this many times launchSd. */
export const UNMEASURED_OFFSET_FACTOR = 2;
/**
 * The mixture's scale (relative): the confidence sequence is tightest where the comparison's
 * standard error is about a third of it, and within about 10 % of that from standard errors of
 * 1 % to 6 % (one launch of a few requests to many launches of many). Fixed before any data.
 */
const MIXTURE_SD = 0.1;
/** The power at which `detectable` is stated. */
const DETECT_POWER = 0.8;

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

/** The launch offset the rule uses: its relative sd, whether relaunches measured it, and with how many degrees of freedom. */
export interface LaunchOffset {
  sd: number;
  /** Degrees of freedom of the relaunches behind it (0: none; the offset is assumed). */
  dof: number;
  /** The relaunches' own estimate (relative sd), where there were any. */
  measuredSd?: number;
}

/** A launch's variance from its requests: a median's variance is about pi/2 times a mean's. */
const requestVariance = (l: LaunchMeasure) => ((Math.PI / 2) * l.requestSd * l.requestSd) / l.requests;

/**
 * Pure: the launch offset from every configuration's launches (`groups`, one per configuration
 * compared): the spread of each relaunched configuration's launch values about its mean, less
 * what its requests explain, pooled over them; pooled with the assumed offset (twice
 * `launchSd`, PRIOR_WEIGHT degrees of freedom) and never below `launchSd`. With no relaunch:
 * twice `launchSd`, assumed.
 */
export function launchOffset(groups: readonly (readonly LaunchMeasure[])[], s: Pick<RuleSettings, "launchSd">): LaunchOffset {
  let sum = 0;
  let dof = 0;
  for (const g of groups) {
    if (g.length < 2) continue;
    const mean = g.reduce((t, l) => t + l.value, 0) / g.length;
    const spread = g.reduce((t, l) => t + (l.value / mean - 1) ** 2, 0);
    const requests = g.reduce((t, l) => t + requestVariance(l), 0) / g.length;
    sum += spread - (g.length - 1) * requests;
    dof += g.length - 1;
  }
  const assumed = (UNMEASURED_OFFSET_FACTOR * s.launchSd) ** 2;
  if (dof === 0) return { sd: Math.sqrt(assumed), dof: 0 };
  const observed = Math.max(0, sum / dof);
  const pooled = (OFFSET_PRIOR_WEIGHT * assumed + dof * observed) / (OFFSET_PRIOR_WEIGHT + dof);
  return { sd: Math.sqrt(Math.max(s.launchSd * s.launchSd, pooled)), dof, measuredSd: Math.sqrt(observed) };
}

/**
 * Pure: the estimate of a configuration from its launches (at least one, each with a positive
 * value). With `offset` (launchOffset over every configuration compared): its launches' mean,
 * its variance that offset's plus its requests', over its launches. Without (the adaptive
 * sweep's own bookkeeping): the configuration's own launches pooled with `launchSd`.
 */
export function estimate(launches: readonly LaunchMeasure[], s: Pick<RuleSettings, "launchSd">, offset?: LaunchOffset): Estimate {
  if (launches.length === 0) throw new Error("estimate: a configuration needs at least one launch");
  if (launches.some((l) => !(l.value > 0) || !(l.requests >= 1))) throw new Error("estimate: every launch needs a positive value and at least one request");
  const k = launches.length;
  const value = launches.reduce((t, l) => t + l.value, 0) / k;
  const requestVar = launches.reduce((t, l) => t + requestVariance(l), 0) / k;
  let launchVar: number;
  if (offset) launchVar = offset.sd * offset.sd + requestVar;
  else {
    const priorVar = s.launchSd * s.launchSd + requestVar;
    launchVar = priorVar;
    if (k >= 2) {
      const observed = launches.reduce((t, l) => t + (l.value / value - 1) ** 2, 0) / (k - 1);
      launchVar = (PRIOR_WEIGHT * priorVar + (k - 1) * observed) / (PRIOR_WEIGHT + k - 1);
    }
  }
  return { value, relSe: Math.sqrt(launchVar / k), launches: k, requests: launches.reduce((t, l) => t + l.requests, 0) };
}

/**
 * better / worse: the whole interval beyond the threshold; equal: the whole interval inside
 * +-equalWithin; inconclusive: neither (the benchmark cannot tell).
 */
export type Verdict = "better" | "worse" | "equal" | "inconclusive";

/** A's value over B's, with its interval, and what the rule makes of it. */
export interface Comparison {
  verdict: Verdict;
  ratio: number;
  /** The always-valid interval of the ratio at the rule's confidence. */
  low: number;
  high: number;
  /** The margin "equal" was judged against (RuleSettings.equalWithin). */
  equalWithin: number;
  /**
   * Relative: the smallest true difference these measurements would call better 80 % of the
   * time (at this many launches and requests, looked at once more).
   */
  detectable: number;
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

/**
 * Pure: the half-width, on the log scale, of the always-valid interval of an estimate of
 * variance `v` at two-sided confidence `confidence`: the normal mixture boundary
 * sqrt(v (1 + v / t^2) (2 ln(1 / alpha) + ln(1 + t^2 / v))), t = MIXTURE_SD. Valid at every
 * look while the measurements accumulate (Ville's inequality on the mixture martingale).
 */
export function alwaysValidHalfWidth(v: number, confidence: number): number {
  if (!(v >= 0)) throw new Error(`alwaysValidHalfWidth: a variance is never negative (got ${v})`);
  if (v === 0) return 0;
  const t2 = MIXTURE_SD * MIXTURE_SD;
  return Math.sqrt(v * (1 + v / t2) * (2 * Math.log(1 / (1 - confidence)) + Math.log(1 + t2 / v)));
}

/**
 * Pure: A against B: better only when the whole interval of A/B lies above 1 + threshold,
 * worse when below 1 / (1 + threshold); equal when inside 1 +- equalWithin (on the log scale);
 * else inconclusive.
 */
export function compare(a: Estimate, b: Estimate, s: Pick<RuleSettings, "threshold" | "confidence" | "equalWithin">): Comparison {
  const ratio = a.value / b.value;
  const v = a.relSe * a.relSe + b.relSe * b.relSe;
  const half = alwaysValidHalfWidth(v, s.confidence);
  const low = ratio * Math.exp(-half);
  const high = ratio * Math.exp(half);
  const verdict: Verdict =
    low > 1 + s.threshold ? "better" : high < 1 / (1 + s.threshold) ? "worse" : low >= 1 / (1 + s.equalWithin) && high <= 1 + s.equalWithin ? "equal" : "inconclusive";
  const detectable = (1 + s.threshold) * Math.exp(half + normalQuantile(DETECT_POWER) * Math.sqrt(v)) - 1;
  return { verdict, ratio, low, high, equalWithin: s.equalWithin, detectable };
}

/** The best of several configurations: one that beats every other, or the set none of which the rule can separate from the top. */
export type Ranking<K> = { kind: "best"; best: K } | { kind: "tie"; tied: K[] };

/**
 * Pure: the best of `entries` by the rule: the one of highest value when it is better than
 * every other; else the tie of it and every entry it is not better than (highest first). A
 * single entry is a tie of one: "best" needs something it was better than.
 */
export function rank<K>(entries: readonly { key: K; estimate: Estimate }[], s: Pick<RuleSettings, "threshold" | "confidence" | "equalWithin">): Ranking<K> {
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
  /** Per member: the chance that it is the true best (of every belief, launched or not). */
  best: Map<K, number>;
  /**
   * Per member: the regret of deploying it (1 - its true value / the true best, launched or
   * not), by the beliefs: its mean over the draws and their `regretQuantile` percentile (the
   * 90th unless told: an upper bound).
   */
  regret: Map<K, { expected: number; upper: number }>;
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
export function credibleSet<K>(beliefs: readonly Belief<K>[], s: { tolerance: number; confidence: number; maxSize?: number; regretQuantile?: number }, rand: () => number, draws = 400): CredibleSet<K> {
  const members = beliefs.filter((b) => b.member);
  if (members.length === 0) return { keys: [], chance: 0, each: new Map(), best: new Map(), regret: new Map() };
  const z = () => normal(rand);
  const memberIndex = members.map((m) => beliefs.indexOf(m));
  // Per draw: which members are within the tolerance of the draw's best, and which member is the best (-1: one not launched).
  const good: boolean[][] = [];
  const top: number[] = [];
  // Per member, per draw: the regret of deploying it.
  const regrets: number[][] = members.map(() => []);
  for (let d = 0; d < draws; d++) {
    const values = beliefs.map((b) => (b.exists >= 1 || rand() < b.exists ? b.mean + b.sd * z() : -Infinity));
    const best = Math.max(...values);
    good.push(memberIndex.map((j) => values[j] >= best * (1 - s.tolerance)));
    top.push(memberIndex.findIndex((j) => values[j] === best));
    memberIndex.forEach((j, i) => regrets[i].push(best > 0 ? Math.max(0, 1 - values[j] / best) : 0));
  }
  const regret = new Map(
    members.map((m, i) => {
      const sorted = [...regrets[i]].sort((a, b) => a - b);
      return [m.key, { expected: sorted.reduce((t, x) => t + x, 0) / draws, upper: sorted[Math.min(draws - 1, Math.ceil((s.regretQuantile ?? 0.9) * draws) - 1)] }];
    }),
  );
  const bestShare = new Map(members.map((m, i) => [m.key, top.filter((t) => t === i).length / draws]));
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
  return { keys: answer.set.map((i) => members[i].key), chance: answer.chance, each: new Map(members.map((m, i) => [m.key, each[i]])), best: bestShare, regret };
}
