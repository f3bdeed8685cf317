// Pure: the words every verdict is said in, defined once: the report's table, paragraph and
// chart (components/benchmark/report.ts, also the full sweep's results), the adaptive sweep's
// report (components/sweep/adaptive/report.ts), the verdict's reasons (choose.ts) and the
// README. What each word means is decided elsewhere (rule.ts, choose.ts, the adaptive
// strategy); here only how it is said.
//
// - best: the one configuration named. The report names it when the rule finds it faster than
//   every other eligible configuration and than its baseline; the adaptive sweep when its answer
//   is one configuration (within 1 % of the fastest, launched or not, with the chance it states).
// - tie: configurations none of which is named best, said with why: "equal within 2 %" (every
//   comparison of them with the top has its whole interval inside +-2 %: verdict.equalWithin)
//   or "inconclusive" (at least one interval is wider: this benchmark cannot tell them apart).
// - no best configuration: none is named, and why.
// - faster / slower / equal within X % / inconclusive: one comparison by the rule (A against B,
//   its interval): faster or slower when the whole interval lies beyond the threshold, equal
//   within X % when it lies inside +-X %, inconclusive otherwise.
import type { Comparison } from "./rule";

/** The one configuration named. */
export const BEST = "best";
/** Configurations none of which is named best. */
export const TIE = "tie";
/** A comparison whose whole interval lies inside +-X % (rule.ts: "equal"). */
export const EQUAL_WITHIN = "equal within";
/** A comparison the benchmark cannot decide: neither beyond the threshold nor inside +-X % (rule.ts: "inconclusive"). */
export const INCONCLUSIVE = "inconclusive";
/** None is named best. */
export const NO_BEST = "no best configuration";

/** The table's and the chart's mark of a row. */
export type Mark = typeof BEST | typeof TIE;

const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const percent = (x: number) => `${Number((x * 100).toFixed(1))} %`;

/** Pure: "equal within 2 %". */
export function equalWords(within: number): string {
  return `${EQUAL_WITHIN} ${percent(within)}`;
}

/** Pure: one comparison's verdict in words: "faster", "slower", "equal within 2 %" or "inconclusive". */
export function comparisonWord(c: Pick<Comparison, "verdict" | "equalWithin">): string {
  return c.verdict === "better" ? "faster" : c.verdict === "worse" ? "slower" : c.verdict === "equal" ? equalWords(c.equalWithin) : INCONCLUSIVE;
}

/** Pure: why a tie names none: "equal within 2 %" when every comparison in it is equal, else "inconclusive". */
export function tieWord(comparisons: readonly Pick<Comparison, "verdict" | "equalWithin">[]): string {
  return comparisons.length > 0 && comparisons.every((c) => c.verdict === "equal") ? equalWords(Math.max(...comparisons.map((c) => c.equalWithin))) : INCONCLUSIVE;
}

/** Pure: the bold heading of the Markdown verdicts: "**Best: b16t4-w2048**". */
export function bestHeading(stack: string): string {
  return `**${capital(BEST)}: ${stack}**`;
}

/** Pure: "**Tie: b16t4-w2048, b8t4-w2048 (inconclusive)**" or "(equal within 2 %)" (tieWord). */
export function tieHeading(stacks: readonly string[], why: string): string {
  return `**${capital(TIE)}: ${stacks.join(", ")} (${why})**`;
}

/** "**No best configuration**". */
export const NO_BEST_HEADING = `**${capital(NO_BEST)}**`;

/** Pure: the chart's one-line verdicts: "Best: X", "Tie: X, Y", "No best configuration". */
export const chartWords = { best: capital(BEST), tie: capital(TIE), none: capital(NO_BEST) } as const;

/** Pure: what a tie says of the best: "none is named best". */
export const NONE_NAMED = `none is named ${BEST}`;
