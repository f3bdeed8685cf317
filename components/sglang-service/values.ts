// Zod building blocks for the configuration schemas (schema.ts here and
// components/benchmark/schema.ts). Each takes the key it validates and gives every way a
// value can be wrong, a wrong type included, one message that names the key and says
// what is valid ("service.port must be a whole number from 1 to 65535"), so no user sees
// zod's generic "Invalid input". Pure: zod only.
import { z } from "zod";

/** The message of every failure of a key: what is valid. */
export function must(key: string, valid: string): { error: string } {
  return { error: `${key} must be ${valid}` };
}

/**
 * How a ceiling reads in a message: the number, and what it means where that helps
 * ("3600 (1 h)", "524288 (512 GiB)").
 */
function ceiling(max: number, meaning?: string): string {
  return meaning ? `${max} (${meaning})` : String(max);
}

/** A duration in words: "1 h", "30 min", "90 s". */
export function duration(seconds: number): string {
  if (seconds >= 3600 && seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds >= 60 && seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/**
 * A whole number from `min` to `max`. Every count has a ceiling: a wait, a loop or a size
 * derives from it, and a stack file (a pull request) must not be able to make that unbounded.
 * `meaning` says what the ceiling is where the number alone does not ("512 GiB").
 */
export function wholeNumber(key: string, min: number, max: number, meaning?: string) {
  return z.number(must(key, `a whole number from ${min} to ${ceiling(max, meaning)}`)).int().min(min).max(max);
}

/**
 * The longest context, in tokens, any setting may name (model.contextLength, the drafter's
 * window, the benchmark's prompts): 10,000,000, the window of the longest-context open model
 * (Llama 4 Scout). A prompt of that many tokens is ~40 MB of text in the benchmark's memory.
 */
export const MAX_CONTEXT_TOKENS = 10_000_000;

export const port = (key: string) => wholeNumber(key, 1, 65535);

/** A positive number of `unit` (fractions allowed), at most `max`: "a positive number of days, at most 365". */
export const positiveNumber = (key: string, unit: string, max: number, meaning?: string) =>
  z.number(must(key, `a positive number of ${unit}, at most ${ceiling(max, meaning)}`)).positive().max(max);

/**
 * A positive number of seconds (fractions allowed), at most `max`, which the message gives
 * in words too: "timeouts.commandSeconds must be a positive number of seconds, at most 120 (2 min)".
 */
export const seconds = (key: string, max: number) => positiveNumber(key, "seconds", max, duration(max));

/** A number of seconds from 0 (none) to `max`: "a number of seconds from 0 to 3600 (1 h)". */
export const secondsOrNone = (key: string, max: number) => z.number(must(key, `a number of seconds from 0 to ${ceiling(max, duration(max))}`)).min(0).max(max);

export const trueOrFalse = (key: string) => z.boolean(must(key, "true or false"));

export function oneOf<const V extends readonly [string, ...string[]]>(key: string, values: V, extra = "") {
  return z.enum(values, must(key, `one of ${values.map((v) => `"${v}"`).join(", ")}${extra}`));
}

// Values end up in a systemd unit and in shell commands: reject anything that could
// start a new line or hide a character, whatever is escaped later.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** Text on one line; `valid` says more than "text" where the key has a form of its own. */
export function text(key: string, valid = "text") {
  return z
    .string(must(key, valid))
    .min(1, { error: `${key} must not be empty` })
    .refine((s) => !CONTROL.test(s), { error: `${key} must not contain newlines or control characters` });
}

export function absolutePath(key: string) {
  return text(key, "an absolute path (text starting with /)")
    .refine((s) => s.startsWith("/"), { error: `${key} must be an absolute path (start with /)` })
    .refine((s) => !s.endsWith("\\"), { error: `${key} must not end with a backslash` });
}

/**
 * A list; `items` says what each entry is, e.g. "positive whole numbers". `max`: the most
 * entries it may have, where a loop, a wait or a size grows with them ("..., at most 16 of them").
 */
export function listOf<T extends z.ZodType>(key: string, item: T, items: string, max?: number) {
  const list = z.array(item, must(key, `a list of ${items}${max === undefined ? "" : `, at most ${max} of them`}`));
  return max === undefined ? list : list.max(max);
}

/**
 * A mapping with exactly these keys: a value of another type, or a key it does not know,
 * is refused naming the keys it knows.
 */
export function section<S extends z.ZodRawShape>(key: string, shape: S) {
  const keys = Object.keys(shape).join(", ");
  return z
    .object(shape, {
      error: (issue) =>
        issue.code === "unrecognized_keys"
          ? `${key} has unknown key(s) ${issue.keys.map((k) => `"${k}"`).join(", ")}; valid keys: ${keys}`
          : `${key} must be a mapping with the keys ${keys}`,
    })
    .strict();
}
