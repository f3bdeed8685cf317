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

/** A whole number from `min` (to `max`). */
export function wholeNumber(key: string, min: number, max?: number) {
  const valid =
    max !== undefined ? `a whole number from ${min} to ${max}` : min === 1 ? "a positive whole number" : min === 0 ? "a whole number, 0 or more" : `a whole number of at least ${min}`;
  const base = z.number(must(key, valid)).int().min(min);
  return max === undefined ? base : base.max(max);
}

export const port = (key: string) => wholeNumber(key, 1, 65535);

/** A positive number of `unit` (fractions allowed). */
export const positiveNumber = (key: string, unit: string) => z.number(must(key, `a positive number of ${unit}`)).positive();

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

/** A list; `items` says what each entry is, e.g. "positive whole numbers". */
export function listOf<T extends z.ZodType>(key: string, item: T, items: string) {
  return z.array(item, must(key, `a list of ${items}`));
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
