// The fault campaign's plan, pure: a seeded generator of sequences of operator steps with
// faults armed for them (same seed, same sequence), the model of what the host must serve
// after each step, and the secret scan. The runner (bench/campaign.ts) executes a plan on a
// simulated host through the real engine and checks the invariants after every step.
import { prng } from "../../lib/prng";

/** Stack files of the repo a step may switch a stack to (their speculative settings). */
export const CONFIGS = ["b4t4-w2048", "b8t4-w2048", "b8t4-wnone", "b12t6-w2048", "b16t4-w2048"] as const;
export type Config = (typeof CONFIGS)[number];

/** The two stacks of a sequence: they share the host and the unit. */
export const STACKS = ["a", "b"] as const;
export type StackName = (typeof STACKS)[number];

/**
 * Faults armed for one `up`: the simulator's (scoped to the new configuration's budget, so the
 * previous one can come back), the GPUs freed late, and SSH cut at a moment of the rollout.
 */
export const FAULTS = ["none", "crash-oom", "crash-unbalanced", "hang", "crash-after-ready", "corrupt-output", "gpu-late", "ssh-outage-loading", "sessions-dropped-rollback"] as const;
export type FaultKind = (typeof FAULTS)[number];

export type KeyChange = "keep" | "set" | "rotate" | "remove";

export type Step =
  | { op: "up"; stack: StackName; config: Config; key: KeyChange; fault: FaultKind }
  | { op: "preview"; stack: StackName }
  | { op: "refresh"; stack: StackName };

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];

/** Pure: the steps of sequence `index` of a campaign with seed `seed`. */
export function planSequence(seed: number, index: number, steps: number): Step[] {
  const rand = prng((seed * 1_000_003 + index) >>> 0);
  const out: Step[] = [];
  for (let i = 0; i < steps; i++) {
    const r = rand();
    const stack: StackName = rand() < 0.75 ? "a" : "b";
    if (r < 0.7) out.push({ op: "up", stack, config: pick(rand, CONFIGS), key: pick(rand, ["keep", "keep", "set", "rotate", "remove"] as const), fault: rand() < 0.35 ? "none" : pick(rand, FAULTS.slice(1)) });
    else if (r < 0.85) out.push({ op: "preview", stack });
    else out.push({ op: "refresh", stack });
  }
  return out;
}

/** What a configuration looks like from the server's /server_info. */
export interface Serving {
  budget: number | null;
  window: number | null;
}

/** Pure: what the server reports for a repo configuration (budget, draft window). */
export function servingOf(speculative: { budget?: number; draftWindowSize?: number | "none" }): Serving {
  return { budget: speculative.budget ?? null, window: typeof speculative.draftWindowSize === "number" ? speculative.draftWindowSize : null };
}

/** The configuration the host must serve: the one the last successful `up` proved. */
export interface Proven {
  stack: StackName;
  serving: Serving;
  /** The API key it runs with, or null. */
  key: string | null;
}

/**
 * Pure: after a step, what the host may serve. A successful `up` proves its configuration;
 * a failed one must leave the previous proven configuration (rolled back, or recovered by
 * itself within the settle period), or, where it failed after its new configuration was
 * proven (a session cut after readiness), that new one.
 */
export function allowedAfter(proven: Proven | null, attempted: Proven | null, ok: boolean, message: string): Proven[] {
  if (ok) return attempted ? [attempted] : proven ? [proven] : [];
  const rolledBack = /Rolled back|RECOVERING|Preflight failed|Invalid configuration|is being reconfigured by|nothing was decided or changed/.test(message);
  return [proven, rolledBack ? null : attempted].filter((p): p is Proven => p !== null);
}

/**
 * Pure: where a secret appears in a text, in any of the encodings it can take there: as is,
 * base64 (the restart's stdin carries the secret files base64-encoded; any alignment),
 * JSON-escaped, YAML single-quoted, URL-encoded. Returns the encodings found.
 */
export function secretForms(text: string, secret: string): string[] {
  const found: string[] = [];
  if (text.includes(secret)) found.push("plain");
  if (text.includes(JSON.stringify(secret).slice(1, -1)) && !found.includes("plain")) found.push("json");
  if (text.includes(encodeURIComponent(secret)) && !found.includes("plain")) found.push("url");
  // YAML's single-quoted form doubles a quote (its double-quoted form escapes as JSON does).
  if (secret.includes("'") && text.includes(secret.replace(/'/g, "''"))) found.push("yaml");
  // Inside a longer base64 text the secret starts at any of three byte alignments; from its
  // first byte on a 3-byte boundary, its whole 3-byte groups encode the same in any context.
  const bytes = Buffer.from(secret);
  for (let k = 0; k < 3; k++) {
    const whole = Math.floor((bytes.length - k) / 3) * 3;
    const core = bytes.subarray(k, k + whole).toString("base64");
    if (core.length >= 8 && text.includes(core)) {
      found.push("base64");
      break;
    }
  }
  return found;
}

/** Pure: the candidates one step shorter, for shrinking a failing sequence (each step dropped in turn). */
export function shorter(steps: Step[]): Step[][] {
  return steps.map((_, i) => steps.filter((__, j) => j !== i));
}
