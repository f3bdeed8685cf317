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
 * previous one can come back): a crash during load in each of SGLang's wordings, a hang, a slow
 * load, a crash soon after ready, garbage output; the old server's SIGTERM noticed late, the old
 * server answering after its drain, the GPUs freed late; and the rollout's own trouble: sshd
 * unreachable for 5 s while weights load, every SSH session into the host dropped at a random
 * moment (or while a rollback runs), the `pulumi` process SIGKILLed at a random moment; and the
 * host's own trouble (issue 41): `nvidia-smi` or `python -m sglang.launch_server --help` hung
 * for the whole up (a wedged driver, a stuck import), the host rebooted cleanly or its power cut
 * in one phase of the up (REBOOT_PHASES), node 0 of a group stalled (its host lock held by a
 * root process of the harness for longer than node 1 waits for it), and a process not of this
 * tool holding the host lock (FOREIGN_LOCK_HOLDERS); and hosts and operators as teams have them
 * (issue 60): a folder the restart writes mounted read-only (READ_ONLY_DIRS), the host's own
 * locale one that writes 0,2 or whose [a-z] has no i (DRAWN_LOCALES), the host's wall clock
 * stepped mid-up (CLOCK_STEPS), the rollback's host step SIGKILLed, and a second operator (a
 * machine of the same hostname: another pid namespace) running `up` of the same stack at once.
 */
export const FAULTS = [
  "none",
  "crash-oom",
  "crash-not-enough-memory",
  "crash-unbalanced",
  "crash-cuda-graph",
  "crash-error",
  "hang",
  "slow-load",
  "crash-after-ready",
  "corrupt-output",
  "late-sigterm",
  "stale-server",
  "gpu-late",
  "ssh-outage-loading",
  "sessions-dropped",
  "sessions-dropped-rollback",
  "pulumi-killed",
  "hang-nvidia-smi",
  "hang-help",
  "reboot-clean",
  "power-cut",
  "stalled-node0",
  "foreign-lock",
  "read-only-path",
  "locale",
  "clock-step",
  "killed-rollback",
  "racing-operators",
] as const;
export type FaultKind = (typeof FAULTS)[number];

/** Faults that act at a moment of the operation rather than on a server: they may hit a destroy too. */
export const TIMED_FAULTS = ["sessions-dropped", "pulumi-killed"] as const;
export type TimedFault = (typeof TIMED_FAULTS)[number];

/** Faults that reboot the host in one phase of an up. */
export const REBOOT_FAULTS = ["reboot-clean", "power-cut"] as const;
export type RebootFault = (typeof REBOOT_FAULTS)[number];

/** The phases of an up a reboot lands in (the runner knows each by the progress line that begins it). */
export const REBOOT_PHASES = ["staging", "drain", "loading", "readiness"] as const;
export type RebootPhase = (typeof REBOOT_PHASES)[number];

/**
 * foreign-lock: who takes the host lock. "nobody": a local user, while readiness waits on a load
 * that hangs (so that a rollback needs the lock); "root": a root process not of this tool, from
 * before the up, for less than the lock wait (the up waits for it, naming it, and goes on).
 */
export const FOREIGN_LOCK_HOLDERS = ["nobody", "root"] as const;
export type ForeignLockHolder = (typeof FOREIGN_LOCK_HOLDERS)[number];

/**
 * read-only-path: the folders a restart writes that may be read-only (components/sglang-service/script.ts
 * WRITTEN_DIRS; /run is the system's). /usr/local/lib, not /usr/local: the simulator's node is bound
 * into /usr/local/bin, and undoing a read-only mount over it unmounted that bind too (seed 6060,
 * seq. 66 and 68: the next preflight found no node); host-conditions.test.ts covers /usr/local whole.
 */
export const READ_ONLY_DIRS = ["/usr/local/lib", "/etc/systemd/system", "/var/lib/dflash-sglang", "/etc/dflash-sglang"] as const;
export type ReadOnlyDir = (typeof READ_ONLY_DIRS)[number];

/** locale: the host's own locale for the up (simhost/rootfs.sh host_locales). */
export const DRAWN_LOCALES = ["de_DE.UTF-8", "tr_TR.UTF-8"] as const;
export type DrawnLocale = (typeof DRAWN_LOCALES)[number];

/** clock-step: how far the host's wall clock steps (an NTP correction, a VM resumed), in one phase of the up (REBOOT_PHASES). */
export const CLOCK_STEPS = ["+2h", "-1h"] as const;
export type ClockStep = (typeof CLOCK_STEPS)[number];

export type KeyChange = "keep" | "set" | "rotate" | "remove";

/** What else an `up` changes, besides the speculative settings and the API key. */
export interface UpChange {
  /** The Hugging Face token (hfToken) set, rotated or removed; absent: kept. */
  token?: Exclude<KeyChange, "keep">;
  /** Toggle service.unitName between the shared name and `<name>-renamed`. */
  rename?: boolean;
  /** Add a flag the host's SGLang lacks to model.extraArgs (preflight refuses it). */
  badFlag?: boolean;
  /** A model.tpSize twice what the host (or group) holds (preflight refuses it). */
  badTp?: boolean;
  /** Toggle host.port between sshd's port and a second sshd port of the same host. */
  otherPort?: boolean;
  /** Toggle service.port between the host's server port and the next one. */
  servicePort?: boolean;
  /** Toggle timeouts.drainPolicy between "fail" and "proceed" (which may cut requests). */
  proceed?: boolean;
  /** For a timed fault: seconds after the operation starts. */
  atSeconds?: number;
  /** For a timed fault in a regression case: at the first output line matching this (a regular expression), instead of a time. */
  atOutput?: string;
  /** For a reboot fault: the phase of the up it lands in. */
  rebootAt?: RebootPhase;
  /** For foreign-lock: who holds the host lock. */
  lockHolder?: ForeignLockHolder;
  /** For read-only-path: the folder mounted read-only on node 0 before the up. */
  readOnly?: ReadOnlyDir;
  /** For locale: the hosts' own locale during the up. */
  locale?: DrawnLocale;
  /** For clock-step: the step, in phase `phaseAt`. */
  clockStep?: ClockStep;
  /** For clock-step and racing-operators: the phase of the up in which the clock steps, or the second operator's up starts. */
  phaseAt?: RebootPhase;
  /** Run `preview` of the change first and compare what it said with what `up` did. */
  previewFirst?: boolean;
}

export type Step =
  | ({ op: "up"; stack: StackName; config: Config; key: KeyChange; fault: FaultKind } & UpChange)
  | { op: "preview"; stack: StackName }
  | { op: "refresh"; stack: StackName }
  | { op: "destroy"; stack: StackName; fault?: TimedFault; atSeconds?: number };

/** A sequence: its steps, on one host or a two-node group, reached as root or through sudo. */
export interface Sequence {
  group: boolean;
  /** Root may not log in: the stacks reach the hosts as `deploy`, through sudo with the README's sudoers lines. */
  sudo: boolean;
  steps: Step[];
}

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];

/** The fault kinds an up may draw besides "none". */
const UP_FAULTS = FAULTS.slice(1) as readonly Exclude<FaultKind, "none">[];

/** How often each fault kind of an up is drawn, relative to the others (a kind not named: 1). */
export type FaultWeights = Partial<Record<Exclude<FaultKind, "none">, number>>;

/** Pure: one of `xs` drawn by its weight with one number of `rand` (equal weights: the same draw as `pick`). */
function pickWeighted<T extends string>(rand: () => number, xs: readonly T[], weights: Partial<Record<T, number>>): T {
  const w = xs.map((x) => Math.max(0, weights[x] ?? 1));
  const total = w.reduce((a, b) => a + b, 0);
  if (total <= 0) return pick(rand, xs);
  let r = rand() * total;
  for (let i = 0; i < xs.length; i++) if ((r -= w[i]) < 0) return xs[i];
  return xs[xs.length - 1];
}

/**
 * Pure: weights that favour the fault kinds used fewer than `least` times so far (`used`: the
 * counts of the runs before), so that a campaign grown over several runs reaches every kind:
 * the shortfall, and 1 for a kind already there.
 */
export function fillWeights(used: Record<string, number>, least: number): FaultWeights {
  const out: FaultWeights = {};
  for (const k of UP_FAULTS) out[k] = Math.max(1, least - (used[k] ?? 0));
  return out;
}

/** Pure: weights as `--weights` writes them (`kind=n,kind=n`), and back; an unknown kind or a bad number is an error naming it. */
export function formatWeights(w: FaultWeights): string {
  return Object.entries(w).map(([k, n]) => `${k}=${n}`).join(",");
}
export function parseWeights(text: string): FaultWeights {
  const out: FaultWeights = {};
  for (const part of text.split(",").filter(Boolean)) {
    const [k, n] = part.split("=");
    if (!(UP_FAULTS as readonly string[]).includes(k)) throw new Error(`--weights: unknown fault kind "${k}"; valid: ${UP_FAULTS.join(", ")}`);
    const v = Number(n);
    if (!Number.isFinite(v) || v < 0 || n === undefined || n.trim() === "") throw new Error(`--weights: ${k}=${n ?? ""} is not a number of 0 or more`);
    out[k as Exclude<FaultKind, "none">] = v;
  }
  return out;
}

/** Pure: weights that draw only the kinds named (`kind,kind`), each 1, every other kind 0; an unknown kind is an error naming it. */
export function onlyWeights(text: string): FaultWeights {
  const named = text.split(",").map((k) => k.trim()).filter(Boolean);
  if (named.length === 0) throw new Error(`--only: name at least one fault kind; valid: ${UP_FAULTS.join(", ")}`);
  for (const k of named) if (!(UP_FAULTS as readonly string[]).includes(k)) throw new Error(`--only: unknown fault kind "${k}"; valid: ${UP_FAULTS.join(", ")}`);
  return Object.fromEntries(UP_FAULTS.map((k) => [k, named.includes(k) ? 1 : 0])) as FaultWeights;
}

import { mix } from "../../lib/prng";
export { mix };

/**
 * Pure: the steps of sequence `index` of a campaign with seed `seed`. The rates are set so that
 * every fault kind and operator step comes up about equally often over a hundred sequences: a
 * change preflight refuses (a flag the host lacks, too large a tpSize) arms no fault (it would
 * never act), and a stack moves to speculative settings other than its own last ones (a fault
 * scoped to settings that already serve is not armed).
 */
export function planSequence(seed: number, index: number, steps: number, weights?: FaultWeights, dense = false): Step[] {
  const rand = prng(mix(seed, index));
  const out: Step[] = [];
  // A moment within the first 30 s of an operation: staging, drain, GPU release, load,
  // readiness, rollback or removal, whichever that step is in then.
  const moment = () => Math.round(rand() * 300) / 10;
  // Each stack's speculative settings as this plan last set them (the baseline's to start).
  const last: Record<StackName, Config> = { a: "b8t4-w2048", b: "b4t4-w2048" };
  for (let i = 0; i < steps; i++) {
    const r = rand();
    const stack: StackName = rand() < 0.7 ? "a" : "b";
    // Dense: more ups, each with a fault that acts (none drawn "none", no change preflight
    // refuses), for a campaign that has the other steps often enough already.
    if (r < (dense ? 0.86 : 0.72)) {
      const config = pick(rand, CONFIGS.filter((c) => c !== last[stack]));
      last[stack] = config;
      const drawn = !dense && rand() < 0.1 ? "none" : weights ? pickWeighted(rand, UP_FAULTS, weights) : pick(rand, FAULTS.slice(1));
      // Drawn one after the other whatever they give, so that adding one keeps the others.
      const [rename, refusedFlag, otherPort, previewFirst, refusedTp, servicePort, proceed] = [rand() < 0.13, rand() < 0.09, rand() < 0.12, rand() < 0.25, rand() < 0.08, rand() < 0.12, rand() < 0.12];
      const [badFlag, badTp] = [refusedFlag && !dense, refusedTp && !dense];
      const token = rand() < 0.36 ? pick(rand, ["set", "rotate", "remove"] as const) : undefined;
      const at = moment();
      const key = pick(rand, ["keep", "keep", "set", "rotate", "remove"] as const);
      const fault: FaultKind = badFlag || badTp ? "none" : drawn;
      out.push({
        op: "up",
        stack,
        config,
        key,
        fault,
        ...(token ? { token } : {}),
        ...(rename ? { rename } : {}),
        ...(badFlag ? { badFlag } : {}),
        ...(badTp ? { badTp } : {}),
        ...(otherPort ? { otherPort } : {}),
        ...(servicePort ? { servicePort } : {}),
        ...(proceed ? { proceed } : {}),
        ...(previewFirst ? { previewFirst } : {}),
        ...((TIMED_FAULTS as readonly string[]).includes(fault) ? { atSeconds: at } : {}),
        // The phase from the moment already drawn (a new draw would change every later one).
        ...((REBOOT_FAULTS as readonly string[]).includes(fault) ? { rebootAt: REBOOT_PHASES[Math.floor(at) % REBOOT_PHASES.length] } : {}),
        ...(fault === "foreign-lock" ? { lockHolder: FOREIGN_LOCK_HOLDERS[Math.floor(at) % FOREIGN_LOCK_HOLDERS.length] } : {}),
        ...(fault === "read-only-path" ? { readOnly: READ_ONLY_DIRS[Math.floor(at) % READ_ONLY_DIRS.length] } : {}),
        ...(fault === "locale" ? { locale: DRAWN_LOCALES[Math.floor(at) % DRAWN_LOCALES.length] } : {}),
        ...(fault === "clock-step" ? { clockStep: CLOCK_STEPS[Math.floor(at / 4) % CLOCK_STEPS.length], phaseAt: REBOOT_PHASES[Math.floor(at) % REBOOT_PHASES.length] } : {}),
        ...(fault === "racing-operators" ? { phaseAt: REBOOT_PHASES[Math.floor(at) % REBOOT_PHASES.length] } : {}),
      });
    } else if (r < 0.79) out.push({ op: "preview", stack });
    else if (r < 0.86) out.push({ op: "refresh", stack });
    else {
      const f = rand();
      const at = moment();
      out.push(f < 0.12 ? { op: "destroy", stack } : { op: "destroy", stack, fault: f < 0.56 ? "sessions-dropped" : "pulumi-killed", atSeconds: at });
    }
  }
  return out;
}

/**
 * Pure: sequence `index` of a campaign: its steps, whether it runs on a two-node group (one in
 * four), and whether through sudo (one in two: seed and index of odd sum, so that the groups
 * of one seed run as root and those of the next through sudo).
 */
export function planCampaignSequence(seed: number, index: number, steps: number, weights?: FaultWeights, dense = false): Sequence {
  return { group: index % 4 === 3, sudo: (seed + index) % 2 === 1, steps: planSequence(seed, index, steps, weights, dense) };
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
  /** The unit it runs as. */
  unit: string;
  /** The port it listens on (service.port), when not the host's usual one. */
  port?: number;
  serving: Serving;
  /** The API key it runs with, or null. */
  key: string | null;
}

/**
 * Pure: after a step, what the host may serve. A successful `up` proves its configuration;
 * a failed one must leave what served before it (nothing was stopped), the host's known-good
 * configuration (the last one an `up` proved: where a rollback goes, which differs from what
 * served when a step whose session dropped or whose engine was killed left its new
 * configuration running unproven), or, where it failed after its new configuration was
 * started and nothing rolled back, that new one.
 */
export function allowedAfter(proven: Proven | null, attempted: Proven | null, ok: boolean, message: string, knownGood: Proven | null = proven): Proven[] {
  if (ok) return attempted ? [attempted] : proven ? [proven] : [];
  const rolledBack = /Rolled back|RECOVERING|Preflight failed|Invalid configuration|is being reconfigured by|nothing was decided or changed|nothing was stopped/.test(message);
  const out: Proven[] = [];
  for (const p of [proven, knownGood, rolledBack ? null : attempted]) {
    if (p && !out.some((o) => o.stack === p.stack && o.serving.budget === p.serving.budget && o.serving.window === p.serving.window && o.port === p.port)) out.push(p);
  }
  return out;
}

export { secretForms } from "../../lib/secret-forms";

/** Pure: the candidates one step shorter, for shrinking a failing sequence (each step dropped in turn). */
export function shorter(steps: Step[]): Step[][] {
  return steps.map((_, i) => steps.filter((__, j) => j !== i));
}
