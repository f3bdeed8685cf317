// The fault campaign's tables, pure: what one run did (bench/results/campaign-<seed>.md) and
// what every run recorded with this runner adds up to (bench/results/campaign.md): sequences,
// steps, each operator step and fault kind used, client requests by outcome, violations.
import { FAULTS, FaultWeights, Step, TIMED_FAULTS } from "./plan";

/**
 * Faults of the host's own commands, lock, folders or locale, or of the stack's lock, which act
 * in preflight or before anything stops: counted even where the up was refused there (a
 * read-only folder is refused there by design).
 */
const HOST_FAULTS = ["hang-nvidia-smi", "hang-help", "stalled-node0", "foreign-lock", "read-only-path", "locale", "racing-operators"];
import type { SequenceResult, StepRecord } from "./runner";

/** The JSON a campaign run writes (bench/results/campaign-<seed>.json). */
export interface CampaignRun {
  /** 2: recorded by the runner with every fault kind and operator step of issue 18. */
  format: 2;
  seed: number;
  sequences: number;
  steps: number;
  parallel: number;
  rev: string | null;
  command: string;
  date: string;
  wallSeconds: number;
  results: SequenceResult[];
  /** The weights its faults were drawn by (--weights, --fill); absent: evenly. */
  weights?: FaultWeights;
  /** Drawn with --dense (more ups, each with a fault that acts). */
  dense?: true;
}

/** Pure: the operator steps a step record counts as (an up counts once per change it makes). */
export function operatorSteps(step: Step): string[] {
  if (step.op !== "up") return [step.op];
  const out = ["up"];
  // A change preflight refuses is no fault-free up of a configuration the host can run.
  if (step.fault === "none" && !step.badFlag && !step.badTp) out.push("fault-free up");
  if (step.key !== "keep") out.push(`apiKey ${step.key}`);
  if (step.token) out.push(`hfToken ${step.token}`);
  const changes: [keyof typeof step, string][] = [["rename", "service.unitName"], ["servicePort", "service.port"], ["otherPort", "host.port"], ["badFlag", "model.extraArgs (a flag the host lacks)"], ["badTp", "model.tpSize (more than the host holds)"], ["proceed", "timeouts.drainPolicy"], ["previewFirst", "preview, compared with the up"]];
  for (const [k, name] of changes) if (step[k]) out.push(name);
  return out;
}

/**
 * Pure: the fault a step record injected: armed, and not a timed fault whose moment never came
 * (the operation ended first), nor a fault of an up whose change preflight refused (runs of the
 * first plan drew both), which never acts.
 */
export function faultOf(r: StepRecord): string | undefined {
  if (r.fired === false) return undefined;
  // A server fault of an up refused before anything was stopped (another stack's unit holds
  // the GPUs, the host is another stack's, preflight) never met a server.
  if (r.step.op === "up" && !(TIMED_FAULTS as readonly string[]).includes(r.step.fault) && !HOST_FAULTS.includes(r.step.fault) && /nothing was stopped|Nothing was changed|# preflight /.test(r.cause ?? "")) return undefined;
  if (r.step.op === "up") return r.step.fault !== "none" && r.armed && !r.step.badFlag && !r.step.badTp ? r.step.fault : undefined;
  if (r.step.op === "destroy" && r.step.fault) return `${r.step.fault} (destroy)`;
  return undefined;
}

const count = (xs: string[]) => xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

/** Pure: the totals of some runs. */
export function tally(runs: CampaignRun[]) {
  const results = runs.flatMap((r) => r.results);
  const steps = results.flatMap((r) => r.steps);
  const requests = steps.flatMap((s) => s.requests);
  return {
    sequences: results.length,
    groups: results.filter((r) => r.group).length,
    /** Reached as deploy through sudo (results recorded before issue 23 have no `sudo`: as root). */
    throughSudo: results.filter((r) => r.sudo === true).length,
    steps: steps.length,
    violations: results.reduce((n, r) => n + r.violations.length, 0),
    requests: { completed: requests.filter((x) => x === "completed").length, refused: requests.filter((x) => x === "refused").length, cut: requests.filter((x) => x === "cut").length },
    operatorSteps: count(steps.flatMap((s) => operatorSteps(s.step))),
    faults: count(steps.map(faultOf).filter((f): f is string => f !== undefined)),
    /** Timed faults whose moment came, by the phase they landed in; and those whose operation ended first. */
    phases: count(steps.filter((s) => s.fired && s.phase).map((s) => `${faultOf(s)}: ${s.phase}`)),
    neverFired: steps.filter((s) => s.fired === false).length,
    okUps: steps.filter((s) => s.step.op === "up" && s.ok).length,
    failedUps: steps.filter((s) => s.step.op === "up" && !s.ok).length,
    longestStep: Math.max(0, ...steps.map((s) => s.seconds)),
    /** The longest `up` operation (without the settle period), and those the runner killed as hung. */
    longestUp: Math.max(0, ...steps.map((s) => s.upSeconds ?? 0)),
    hungUps: steps.filter((s) => s.hung).length,
    wallSeconds: runs.reduce((n, r) => n + r.wallSeconds, 0),
  };
}

/** Every fault kind a campaign injects: the up faults, and the timed ones of a destroy. */
export const ALL_FAULTS = [...FAULTS.slice(1), "sessions-dropped (destroy)", "pulumi-killed (destroy)"];
export const ALL_OPERATOR_STEPS = ["up", "fault-free up", "apiKey set", "apiKey rotate", "apiKey remove", "hfToken set", "hfToken rotate", "hfToken remove", "service.unitName", "service.port", "host.port", "model.extraArgs (a flag the host lacks)", "model.tpSize (more than the host holds)", "timeouts.drainPolicy", "preview, compared with the up", "preview", "refresh", "destroy"];

/** Pure: the Markdown of some runs (one, or all of them), with how often each kind was used against `least`. */
export function renderCampaign(title: string, runs: CampaignRun[], least: number, stepBound: string): string {
  const t = tally(runs);
  const table = (names: string[], counts: Record<string, number>) => ["| kind | times | |", "|---|---:|---|", ...names.map((n) => `| ${n} | ${counts[n] ?? 0} | ${(counts[n] ?? 0) >= least ? "" : `under ${least}`} |`)];
  return [
    `# ${title}`,
    "",
    runs.length === 1 ? `Command: \`${runs[0].command}\` (${runs[0].date}, this machine: 2 cores).` : "Runs (each on fresh simulated hosts, through the real engine):",
    ...(runs.length === 1 ? [] : ["", ...runs.map((r) => `- \`${r.command}\` (${r.date}${r.rev ? `, program of ${r.rev}` : ""}): ${r.results.length} sequences, ${(r.wallSeconds / 60).toFixed(0)} min`)]),
    "",
    "| sequences (two-node, through sudo) | steps | invariant violations | client requests: completed / refused / cut | wall time |",
    "|---|---:|---:|---|---:|",
    `| ${t.sequences} (${t.groups}, ${t.throughSudo}) | ${t.steps} | ${t.violations} | ${t.requests.completed} / ${t.requests.refused} / ${t.requests.cut} | ${(t.wallSeconds / 60).toFixed(0)} min |`,
    "",
    `Outcomes of up: ${t.okUps} succeeded, ${t.failedUps} failed (a fault, or a change the host refuses), each then checked. ${stepBound}; longest step ${t.longestStep.toFixed(0)} s (with its checks); longest up ${t.longestUp.toFixed(0)} s (the operation alone, checked against the bound); ups that did not end by themselves (killed by the runner past the bound): ${t.hungUps}.`,
    "",
    "## Operator steps",
    "",
    ...table(ALL_OPERATOR_STEPS, t.operatorSteps),
    "",
    "## Faults injected (armed)",
    "",
    ...table(ALL_FAULTS, t.faults),
    "",
    `Timed faults by the phase they landed in: ${Object.entries(t.phases).sort().map(([k, n]) => `${k} ${n}`).join(", ") || "none"}; whose operation ended before their moment: ${t.neverFired}.`,
    "",
    "## Violations",
    "",
    ...(t.violations ? runs.flatMap((r) => r.results.flatMap((x) => x.violations.map((v) => `- seed ${r.seed}, sequence ${x.label}: ${v}`))) : ["None."]),
    "",
  ].join("\n");
}
