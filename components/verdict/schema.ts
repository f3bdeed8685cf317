// The decision rule's settings (rule.ts) and the report's baseline age: one zod schema for
// their types, defaults and messages. The defaults are checked by bench/winner-rule.ts
// (bench/results/winner-rule.md): identical configurations (2, 5 and 38 of them) get a false
// winner in at most 5 % of trials over up to 10 looks, at the assumed launch offset and at
// twice it. Pure: zod only.
import { z } from "zod";
import { must, positiveNumber, section } from "../sglang-service/values";

export const verdictSchema = section("verdict", {
  /**
   * Relative: a true difference smaller than this is no difference, so a configuration is
   * better only when its whole interval lies above 1 + threshold. Defaults to 0.005 (0.5 %).
   */
  threshold: z.number(must("verdict.threshold", "a number from 0 to 0.5 (0.005: 0.5 %)")).min(0).max(0.5).default(0.005),
  /** Two-sided confidence of every interval, valid however often the report is read again (an always-valid interval). Defaults to 0.95. */
  confidence: z.number(must("verdict.confidence", "a number above 0.5 and below 1 (0.95: 95 %)")).gt(0.5).lt(1).default(0.95),
  /**
   * Relative standard deviation of a server launch's persistent offset, as assumed: where no
   * configuration compared was relaunched the rule takes twice it (sound up to a true offset
   * twice this); where some were, their spread pooled with that, never below this. See
   * bench/results/winner-rule.md. Defaults to 0.015 (1.5 %).
   */
  launchSd: z.number(must("verdict.launchSd", "a number from 0 to 0.5 (0.015: 1.5 %)")).min(0).max(0.5).default(0.015),
  /**
   * Relative: two configurations are "equal within" this when the whole interval of their
   * ratio lies inside +-it; where it does not (and neither is better), the verdict is
   * "inconclusive". Defaults to 0.02 (2 %).
   */
  equalWithin: z.number(must("verdict.equalWithin", "a number above 0 and at most 0.5 (0.02: 2 %)")).gt(0).max(0.5).default(0.02),
  /**
   * A baseline (or an earlier launch of the same configuration) measured longer ago than this
   * before or after the row it is compared with is not used. At most 365 (a year: a baseline
   * older than that measured other drivers and SGLang builds). Defaults to 7 days.
   */
  maxAgeDays: positiveNumber("verdict.maxAgeDays", "days", 365).default(7),
});

export type VerdictSettingsInput = z.input<typeof verdictSchema>;
export type VerdictSettings = z.output<typeof verdictSchema>;

/** The defaults: what the report and the review use unless told otherwise. */
export const DEFAULT_VERDICT: VerdictSettings = verdictSchema.parse({});
