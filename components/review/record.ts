// Pure: what a review records per stack (what its preview would do, and fingerprints of what
// it was made from), and the comparison `apply` makes before it changes anything.
import { createHash } from "node:crypto";
import { z } from "zod";

/** One step of a preview: a resource (its name in the stack), what the engine would do, the inputs that differ. */
export const stepSchema = z.object({ resource: z.string(), op: z.string(), keys: z.array(z.string()) }).strict();
export type Step = z.infer<typeof stepSchema>;

/** What `up` would do to a stack, in one word a reviewer reads. */
export const EFFECTS = ["restart", "benchmark only", "update, no restart", "no change", "preview failed"] as const;
export type Effect = (typeof EFFECTS)[number];

export const timingsSchema = z.object({ drainSeconds: z.number(), stopSeconds: z.number(), gpuReleaseSeconds: z.number(), loadToReadySeconds: z.number(), drained: z.boolean().optional() }).passthrough();
export type Timings = z.infer<typeof timingsSchema>;

export const fingerprintsSchema = z
  .object({
    /** sha256 of Pulumi.yaml, the stack file's `config` and this checkout's overlay entry for the stack. */
    config: z.string(),
    /** sha256 of the stack's resources in state, or "none" for a stack with no state. */
    state: z.string(),
    /** sha256 of what the preview said each node runs (the live unit, its owner, the lines `up` changes). */
    host: z.string(),
  })
  .strict();
export type Fingerprints = z.infer<typeof fingerprintsSchema>;

export const reviewedStackSchema = z
  .object({
    stack: z.string(),
    host: z.string(),
    /** Node 0's pinned host key: the machine, by which `apply` groups stacks that share one. */
    machine: z.string().optional(),
    effect: z.enum(EFFECTS),
    /** The Pulumi update plan of the preview (a file in the plans folder), or null when there is nothing to apply. */
    plan: z.string().nullable(),
    /** sha256 of the plan file as the review wrote it. */
    planSha: z.string().nullable(),
    steps: z.array(stepSchema),
    /** What the preview said each node runs, as the program reads it (secrets masked). */
    hostView: z.string(),
    fingerprints: fingerprintsSchema,
  })
  .strict();
export type ReviewedStack = z.infer<typeof reviewedStackSchema>;

/** 2: the record holds the sha256 of the document's words (`document`), and its own digest is in DIGEST_FILE. */
export const REVIEW_FORMAT = 2;
export const RECORD_FILE = "review.json";
/** The record's digest (`sha256:<hex>` of review.json's bytes): what binds the words approved to the plans applied. */
export const DIGEST_FILE = "digest";
/** The review's words beside its plans (withDigest's form): they travel with the plans they describe. */
export const WORDS_FILE = "review.md";

export const reviewRecordSchema = z
  .object({
    format: z.literal(REVIEW_FORMAT),
    base: z.string(),
    head: z.string(),
    /** sha256 of the project's files other than its configuration (the program, its lock file, ...) as reviewed. */
    program: z.string(),
    createdAt: z.string(),
    /** Stacks in the order `apply` runs them: per host, the one serving now last. */
    stacks: z.array(reviewedStackSchema),
    /**
     * A pull request reviewed from the base branch's checkout (`--pr`): its files other than its
     * configuration (pull-request.ts). `apply` refuses one that changes the program.
     */
    programChanges: z.array(z.string()).optional(),
    /** sha256 of the document's words, as rendered (the digest line apart). */
    document: z.string(),
  })
  .strict();
export type ReviewRecord = z.infer<typeof reviewRecordSchema>;

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The review's digest: of the record's bytes, which hold the sha256 of every plan and of the words. */
export const digestOf = (recordText: string) => `sha256:${sha256(recordText)}`;

/** The document's last line: the digest an approver matches against the trusted run's and apply checks. */
export const digestLine = (digest: string) => `Review digest: \`${digest}\``;

/** The words (ending with one line break) and their digest line after a blank one, as written (review.md). */
export const withDigest = (words: string, digest: string) => `${words}\n${digestLine(digest)}\n`;

/** The words of a review.md that ends with `digest`'s line (withDigest's inverse), or undefined. */
export function wordsOf(written: string, digest: string): string | undefined {
  const tail = `\n${digestLine(digest)}\n`;
  return written.endsWith(tail) ? written.slice(0, -tail.length) : undefined;
}

/** JSON with object keys sorted, so that equal values hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v));
}

/** The last part of a URN: the resource's name ("sglang-restart"). */
export const resourceName = (urn: string) => urn.slice(urn.lastIndexOf("::") + 2);

/** The restart command of a node (`sglang-restart`, `sglang-restart-node1`). */
const RESTART = /-restart(-node\d+)?$/;
/** The presence of a node on its host (`sglang-host`, `sglang-host-node1`). */
const PRESENCE = /-host(-node\d+)?$/;
/** Inputs of the restart command whose change makes its transaction restart: the unit (its hash is in the command) and the secrets (stdin). */
const RESTARTING_INPUTS = new Set(["create", "stdin"]);
/**
 * The restart of a group (`sglang-restart-group`, provider.ts GroupRestart), and its inputs that
 * may restart it: every node's unit hash and connection (`nodes`: a changed connection alone
 * restarts nothing, but the preview cannot tell them apart, so it counts) and the secrets.
 */
const GROUP_RESTART = /-restart-group$/;
const GROUP_RESTARTING_INPUTS = new Set(["nodes", "secretStdin"]);

/**
 * Pure: what `up` would do, from the steps of its preview and what the program said the nodes
 * run (`hostView`): a node that runs another unit, or none, makes the readiness step prove this
 * stack's configuration there, restarting it first (provider.ts hostTakenOver).
 */
export function effectOf(steps: readonly Step[], hostView = ""): Exclude<Effect, "preview failed"> {
  const changing = steps.filter((s) => s.op !== "same" && s.op !== "read");
  // A new or replaced presence installs (or moves) the node; a new restart command runs the
  // transaction; an updated one restarts only for a new unit or new secrets (credentials alone:
  // the transaction finds the unit and secrets installed and changes nothing).
  if (changing.some((s) => PRESENCE.test(s.resource) && s.op !== "update")) return "restart";
  if (changing.some((s) => RESTART.test(s.resource) && (s.op !== "update" || s.keys.some((k) => RESTARTING_INPUTS.has(k))))) return "restart";
  if (changing.some((s) => GROUP_RESTART.test(s.resource) && (s.op !== "update" || s.keys.length === 0 || s.keys.some((k) => GROUP_RESTARTING_INPUTS.has(k))))) return "restart";
  // ...or whose unit is stopped (by hand, or failed): `up` starts it, which is a restart's load.
  if (changing.some((s) => s.resource.endsWith("-ready")) && /`up` (replaces it|installs|starts it)/.test(hostView)) return "restart";
  if (changing.length === 0) return "no change";
  if (changing.every((s) => s.resource.startsWith("benchmark"))) return "benchmark only";
  return "update, no restart";
}

/** Expected downtime of a restart from a measured one: drain + stop + GPU release + load to ready. */
export function downtimeOf(t: Timings): number {
  return t.drainSeconds + t.stopSeconds + t.gpuReleaseSeconds + t.loadToReadySeconds;
}

/** Inputs whose difference alone is what the host view check covers (it is checked on its own). */
const HOST_READ_KEYS = new Set(["hostRuns"]);

const stepKey = (s: Step) => `${s.resource} ${s.op} [${s.keys.filter((k) => !HOST_READ_KEYS.has(k)).sort().join(", ")}]`;

/**
 * Steps whose plan follows from what the host runs: readiness (it proves the configuration again
 * when another unit is there) and the benchmark after it. For a later stack of a host, whose
 * unit the stack before it has just replaced, these differ from the review by design.
 */
export const FOLLOWS_THE_HOST = /(-ready|^benchmark(-run)?)$/;

/**
 * Pure: what moved between a review and now, in words, one line each; empty when nothing did.
 * `now.hostView` undefined: the host is not checked (a later stack of a host, whose unit the
 * stack before it in the rollout order has just replaced).
 */
export function whatMoved(reviewed: ReviewedStack, now: { fingerprints: Partial<Fingerprints>; steps?: Step[]; hostView?: string; afterTakeover?: boolean }): string[] {
  const moved: string[] = [];
  const f = now.fingerprints;
  if (f.config !== undefined && f.config !== reviewed.fingerprints.config) moved.push("its configuration changed since the review (the stack file, Pulumi.yaml or this checkout's dflash.local.yaml)");
  if (f.state !== undefined && f.state !== reviewed.fingerprints.state) moved.push("its state changed since the review (an `up`, `refresh`, `destroy` or import of the stack ran)");
  if (now.hostView !== undefined && f.host !== undefined && f.host !== reviewed.fingerprints.host) {
    moved.push(`what its host runs changed since the review:\n  reviewed: ${reviewed.hostView.split("\n")[0]}\n  now:      ${now.hostView.split("\n")[0]}`);
  }
  if (now.steps !== undefined) {
    const kept = (s: Step) => s.op !== "same" && !(now.afterTakeover && FOLLOWS_THE_HOST.test(s.resource));
    const was = reviewed.steps.filter(kept).map(stepKey);
    const is = now.steps.filter(kept).map(stepKey);
    if (JSON.stringify(was) !== JSON.stringify(is)) moved.push(`its preview now plans other steps:\n  reviewed: ${was.join("; ") || "none"}\n  now:      ${is.join("; ") || "none"}`);
  }
  return moved;
}

/**
 * Pure: the order `apply` runs stacks in: hosts in order of their first stack, and on each host
 * the stack serving there now last, so that the host ends serving what it served before the
 * change, now in its new configuration.
 */
export function rolloutOrder<T extends { stack: string; host: string }>(stacks: readonly T[], servingNow: (host: string) => string | undefined, machineOf: (s: T) => string = (s) => s.host): T[] {
  const hosts = [...new Set(stacks.map(machineOf))];
  return hosts.flatMap((host) => {
    const here = stacks.filter((s) => machineOf(s) === host).sort((a, b) => a.stack.localeCompare(b.stack));
    const serving = servingNow(host);
    return [...here.filter((s) => s.stack !== serving), ...here.filter((s) => s.stack === serving)];
  });
}
