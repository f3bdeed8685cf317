// The decision rule's settings (rule.ts) and the report's baseline age: one zod schema for
// their types, defaults and messages. The defaults were chosen with bench/winner-rule.ts
// (bench/results/winner-rule.md): identical configurations tie in at least 95 % of trials, with
// and without a launch-to-launch offset. Pure: zod only.
import { z } from "zod";
import { must, positiveNumber, section } from "../sglang-service/values";

export const verdictSchema = section("verdict", {
  /**
   * Relative: a true difference smaller than this is no difference, so a configuration is
   * better only when its whole interval lies above 1 + threshold. Defaults to 0.005 (0.5 %).
   */
  threshold: z.number(must("verdict.threshold", "a number from 0 to 0.5 (0.005: 0.5 %)")).min(0).max(0.5).default(0.005),
  /** Two-sided confidence of every interval. Defaults to 0.95. */
  confidence: z.number(must("verdict.confidence", "a number above 0.5 and below 1 (0.95: 95 %)")).gt(0.5).lt(1).default(0.95),
  /**
   * Relative standard deviation of a server launch's persistent offset: the prior where a
   * configuration was measured on one launch, pooled with what its launches measured where
   * more. An assumption (see bench/results/winner-rule.md). Defaults to 0.015 (1.5 %).
   */
  launchSd: z.number(must("verdict.launchSd", "a number from 0 to 0.5 (0.015: 1.5 %)")).min(0).max(0.5).default(0.015),
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
