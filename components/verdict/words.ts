// Pure: the words every verdict is said in, defined once: the report's table, paragraph and
// chart (components/benchmark/report.ts, also the full sweep's results), the adaptive sweep's
// report (components/sweep/adaptive/report.ts), the verdict's reasons (choose.ts) and the
// README. What each word means is decided elsewhere (rule.ts, choose.ts, the adaptive
// strategy); here only how it is said.
//
// - best: the one configuration named. The report names it when the rule finds it faster than
//   every other eligible configuration and than its baseline; the adaptive sweep when its answer
//   is one configuration (within 1 % of the fastest, launched or not, with the chance it states).
// - tie (within noise): the configurations that cannot be told apart; none is named best.
// - no best configuration: none is named, and why.
// - faster / slower / within noise: one comparison by the rule (A against B, its interval).
import type { Verdict } from "./rule";

/** The one configuration named. */
export const BEST = "best";
/** Configurations that cannot be told apart; none is named best. */
export const TIE = "tie";
/** What a comparison the rule cannot separate from no difference is (rule.ts: "tie"). */
export const WITHIN_NOISE = "within noise";
/** None is named best. */
export const NO_BEST = "no best configuration";

/** The table's and the chart's mark of a row. */
export type Mark = typeof BEST | typeof TIE;

const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** Pure: one comparison's verdict in words: "faster", "slower" or "within noise". */
export function comparisonWord(v: Verdict): "faster" | "slower" | typeof WITHIN_NOISE {
  return v === "better" ? "faster" : v === "worse" ? "slower" : WITHIN_NOISE;
}

/** Pure: the bold heading of the Markdown verdicts: "**Best: b16t4-w2048**". */
export function bestHeading(stack: string): string {
  return `**${capital(BEST)}: ${stack}**`;
}

/** Pure: "**Tie: b16t4-w2048, b8t4-w2048 (within noise)**". */
export function tieHeading(stacks: readonly string[]): string {
  return `**${capital(TIE)}: ${stacks.join(", ")} (${WITHIN_NOISE})**`;
}

/** "**No best configuration**". */
export const NO_BEST_HEADING = `**${capital(NO_BEST)}**`;

/** Pure: the chart's one-line verdicts: "Best: X", "Tie within noise: X, Y", "No best configuration". */
export const chartWords = { best: capital(BEST), tie: `${capital(TIE)} ${WITHIN_NOISE}`, none: capital(NO_BEST) } as const;

/** Pure: what a tie says of the best: "none is named best". */
export const NONE_NAMED = `none is named ${BEST}`;
