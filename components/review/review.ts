// The review of a change and the apply of what was reviewed, through the Automation API
// against the project's backend and the hosts (reads only, until `apply`):
//   review  git names what changed against the base; each touched stack is previewed with an
//           update plan saved (Pulumi's `preview --save-plan`); the document (render.ts) and a
//           record (record.ts: steps, fingerprints of config, state and host) are written;
//   apply   every stack's configuration and state, and the hosts, are checked against the
//           record before anything changes; then each stack's `up` runs under its plan, in the
//           rollout order, and a stack whose host another stack of the review has just changed
//           is previewed again and held to the steps reviewed.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { EngineEvent, LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { pulumiCommand } from "../../lib/pulumi-env";
import { figuresOf, storedResultOf } from "../benchmark/compare";
import { overlayFor, readOverlay, mergeSettings } from "../sglang-service/overlay";
import { servingStackIn, STARTS_IT } from "../sglang-service/remote/observe";
import { configChanges, configWarnings, mergeConfig, projectConfigOf, stackConfigOf, stackOfPath, touchedStacks, type Touched } from "./change";
import { maskSecrets } from "./redact";
import { refuseUnlessEngineAgrees } from "./engine-reading";
import { pullRequestInputs, readPullRequest, writePullRequestConfig } from "./pull-request";
import { atRevision, commitOf, git, stacksDirOf } from "./git";
import { parseDeployment } from "../sglang-service/schema";
import { canonicalJson, DIGEST_FILE, digestOf, downtimeOf, Effect, effectOf, FOLLOWS_THE_HOST, RECORD_FILE, resourceName, REVIEW_FORMAT, ReviewedStack, ReviewRecord, reviewRecordSchema, rolloutOrder, sha256, Step, timingsSchema, whatMoved, withDigest, WORDS_FILE, wordsOf } from "./record";
import { BenchmarkView, code, renderReview, ReviewDocument, StackReview, STOPPED_NOW } from "./render";

export interface ReviewOptions {
  /** The project folder (Pulumi.yaml, its stacks folder), inside a git work tree. */
  dir: string;
  /** The Pulumi CLI's environment (backend, passphrase). */
  env: Record<string, string>;
  /** The git revision to compare with; default: the merge base with the main branch. */
  base?: string;
  /** Stacks named by the reviewer, reviewed whether or not the change touches them. */
  named?: (stack: string) => boolean;
  /** Where the plans and the record go. */
  plansDir: string;
  progress?: (line: string) => void;
  /**
   * A pull request's commit: `dir` is a clean checkout of its base branch, whose program reviews
   * the pull request's configuration, read with git (pull-request.ts); `base` is then that checkout.
   */
  pullRequest?: string;
}

/** The base revision: the one given, or the merge base of HEAD with the main branch. */
export function resolveBase(dir: string, base: string | undefined): string {
  if (base !== undefined) {
    const sha = commitOf(dir, base);
    if (!sha) throw new Error(`--base ${base} names no commit of the git repository at ${dir}; give a branch, tag or commit (e.g. origin/main)`);
    // The change is what HEAD adds since it left `base`, not `base`'s own later commits.
    try {
      return git(dir, ["merge-base", "HEAD", sha]).trim();
    } catch {
      throw new Error(`HEAD and --base ${base} have no common commit in the git repository at ${dir} (a shallow clone? fetch with --depth 0, e.g. actions/checkout fetch-depth: 0)`);
    }
  }
  for (const main of ["origin/HEAD", "origin/main", "main", "origin/master", "master"]) {
    if (!commitOf(dir, main)) continue;
    return git(dir, ["merge-base", "HEAD", main]).trim();
  }
  throw new Error(`no main branch (origin/HEAD, origin/main, main, origin/master, master) in the git repository at ${dir}; give --base REF`);
}

const stackFile = (stacksDir: string, stack: string) => path.join(stacksDir, `Pulumi.${stack}.yaml`);

function stacksIn(dir: string, stacksDir: string): string[] {
  const at = path.join(dir, stacksDir);
  return fs.existsSync(at) ? fs.readdirSync(at).flatMap((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []).sort() : [];
}

/** Paths (relative to the project folder) that differ between `base` and the working tree, untracked files included. */
function changedFiles(dir: string, base: string): string[] {
  // --no-renames: a renamed stack file is a removed stack and a new one.
  const tracked = git(dir, ["diff", "--name-only", "--no-renames", "--relative", base, "--", "."]).split("\n");
  const untracked = git(dir, ["ls-files", "--others", "--exclude-standard", "--", "."]).split("\n");
  return [...new Set([...tracked, ...untracked].filter(Boolean))].sort();
}

/** A backend URL with any password or signature in it masked (the user part ends at the last "@"). */
export function maskedBackend(url: string | undefined): string {
  if (!url) return "the default backend";
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^:/@]*):.*@/i, "$1$2:***@").replace(/([?&](password|sslpassword|sig|token|secret|key|sas)=)[^&]*/gi, "$1***");
}

/**
 * sha256 of the project's files other than its configuration (tracked and untracked, not
 * ignored): the program, its dependencies' lock file, this tool. `apply` refuses to run other code.
 */
export function programFingerprint(dir: string, stacksDir: string, plansDir: string): string {
  const files = git(dir, ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."]).split("\0").filter(Boolean);
  const plans = path.relative(dir, plansDir);
  const isConfig = (f: string) => f === "Pulumi.yaml" || stackOfPath(f, stacksDir === "." ? "" : stacksDir) !== undefined || (!plans.startsWith("..") && (f === plans || f.startsWith(`${plans}/`)));
  const lines = [...new Set(files)].filter((f) => !isConfig(f) && fs.existsSync(path.join(dir, f)) && fs.statSync(path.join(dir, f)).isFile()).sort().map((f) => `${f} ${sha256(fs.readFileSync(path.join(dir, f)).toString("latin1"))}`);
  return sha256(lines.join("\n"));
}

/** What a preview showed: its steps, what the program said each node runs, and why it failed. */
export interface PreviewView {
  steps: Step[];
  hostView: string;
  error?: string;
}

const IGNORED_TYPES = /^pulumi:(pulumi:Stack|providers:)/;

export async function previewOf(stack: Stack, planFile: string | undefined): Promise<PreviewView> {
  const steps = new Map<string, Step>();
  const views: string[] = [];
  const errors: string[] = [];
  const onEvent = (e: EngineEvent) => {
    const m = e.resourcePreEvent?.metadata;
    if (m && !IGNORED_TYPES.test(m.type)) steps.set(m.urn, { resource: resourceName(m.urn), op: m.op, keys: [...new Set((m.diffs ?? []).map((k) => k.split(/[.[]/)[0]))].sort() });
    const d = e.diagnosticEvent;
    if (d?.severity === "info" && d.urn?.includes("::dflash:sglang:Service::")) views.push(maskSecrets(d.message.trimEnd()));
    if (d?.severity === "error") errors.push(maskSecrets(d.message.trim()));
  };
  const sorted = () => [...steps.values()].sort((a, b) => a.resource.localeCompare(b.resource));
  try {
    await stack.preview({ plan: planFile, color: "never", onEvent });
  } catch (e) {
    return { steps: sorted(), hostView: views.join("\n"), error: maskSecrets(errors.join("\n") || (e as Error).message.split("\n").slice(0, 20).join("\n")) };
  }
  return { steps: sorted(), hostView: views.join("\n") };
}

interface StateView {
  fingerprint: string;
  outputs: Record<string, unknown>;
}

/** A stack's resources in state (their fingerprint) and its stack outputs, as stored. */
async function stateOf(ws: LocalWorkspace, stack: string): Promise<StateView> {
  const exported = (await ws.exportStack(stack)) as { deployment?: { resources?: { type: string; outputs?: Record<string, unknown> }[] } };
  const resources = exported.deployment?.resources ?? [];
  if (!resources.length) return { fingerprint: "none", outputs: {} };
  return { fingerprint: sha256(canonicalJson(resources)), outputs: resources.find((r) => r.type === "pulumi:pulumi:Stack")?.outputs ?? {} };
}

async function existingState(ws: LocalWorkspace, stack: string): Promise<StateView | undefined> {
  const names = (await ws.listStacks()).map((s) => s.name);
  return names.includes(stack) ? stateOf(ws, stack) : undefined;
}

interface ConfigView {
  fingerprint: string;
  merged: Record<string, unknown>;
  /** Node 0's address, as the stack's `host` output names it. */
  address: string;
  /** Node 0 as one machine: its address, and its SSH port where it is not 22. */
  host: string;
  /** Node 0's pinned host key (type and key): the machine, however the stack names it. */
  hostKey?: string;
}

/** A stack's configuration as the program reads it: Pulumi.yaml, its stack file, this checkout's overlay. */
function configOf(dir: string, env: Record<string, string>, stacksDir: string, stack: string): ConfigView {
  const project = fs.readFileSync(path.join(dir, "Pulumi.yaml"), "utf8");
  const file = path.join(dir, stackFile(stacksDir, stack));
  const own = stackConfigOf(fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined, stackFile(stacksDir, stack));
  const overlay = env.DFLASH_LOCAL_OVERLAY === "off" ? undefined : readOverlay(dir, stack);
  const local = overlay ? overlayFor(overlay, stack) : {};
  const merged = mergeSettings(mergeConfig(projectConfigOf(project), own), local) as Record<string, unknown>;
  const h = (merged.host ?? {}) as { address?: unknown; port?: unknown; hostKey?: unknown };
  const address = typeof h.address === "string" ? h.address : "?";
  const host = h.port !== undefined && h.port !== 22 ? `${address}:${String(h.port)}` : address;
  // The key's type and base64 body: the machine, whatever the line's comment.
  const hostKey = typeof h.hostKey === "string" ? h.hostKey.trim().split(/\s+/).slice(0, 2).join(" ") : undefined;
  return { fingerprint: sha256(canonicalJson({ project, stack: own, local })), merged, address, host, ...(hostKey ? { hostKey } : {}) };
}

function benchmarkView(stack: string, outputs: Record<string, unknown>): BenchmarkView | undefined {
  const result = storedResultOf(outputs);
  if (!result) return undefined;
  try {
    return { stack, takenAt: String(outputs.benchmarkTakenAt ?? ""), figures: figuresOf(result) };
  } catch {
    return undefined;
  }
}

/**
 * Expected downtime from a measured restart: this stack's on the same host, else that of the
 * stack serving there now; one that drained a server first (a first install or the start of a
 * stopped unit measured no drain, and says so). Timings from before `drained` was recorded
 * count as drained when they show a drain.
 */
export function downtimeFrom(candidates: { stack: string; outputs: Record<string, unknown> }[], host: string): StackReview["downtime"] {
  const measured = candidates.flatMap((c) => {
    const t = timingsSchema.safeParse(c.outputs.restartTimings);
    if (!t.success || c.outputs.host !== host) return [];
    const seconds = downtimeOf(t.data);
    const drained = typeof t.data.drained === "boolean" ? t.data.drained : t.data.drainSeconds > 0;
    return seconds > 0 ? [{ seconds, from: `stack ${c.stack}'s last restart on ${host}`, drained }] : [];
  });
  return measured.find((m) => m.drained) ?? measured[0];
}

/** The settings the downtime's words need (the schema's defaults applied), or undefined for a configuration the schema refuses (its preview says why). */
function restartSettings(stack: string, merged: Record<string, unknown>): Pick<StackReview, "drainBoundSeconds" | "benchmarkAfter"> {
  try {
    const d = parseDeployment(merged, stack);
    return { drainBoundSeconds: d.timeouts.drainSeconds, benchmarkAfter: d.benchmark.enabled };
  } catch {
    return {};
  }
}

export interface ReviewResult {
  /** The document, ending with its digest line. */
  markdown: string;
  /** `sha256:<hex>` of the record (DIGEST_FILE): `apply --digest` requires it. */
  digest: string;
  record: ReviewRecord;
  document: ReviewDocument;
}

async function workspace(dir: string, env: Record<string, string>): Promise<LocalWorkspace> {
  return LocalWorkspace.create({ workDir: dir, envVars: { ...env, PULUMI_EXPERIMENTAL: "true" }, pulumiCommand: await pulumiCommand() });
}

/** Touched only because Pulumi.yaml or the program changed, which touches every stack file, not by a change of its own. */
const touchedByAll = (t: Touched) => t.because === "project config changed" || t.because === "program changed";

export async function runReview(o: ReviewOptions): Promise<ReviewResult> {
  const say = o.progress ?? (() => undefined);
  const pr = o.pullRequest === undefined ? undefined : pullRequestInputs(o.dir, o.pullRequest);
  if (pr) say(`pull request ${pr.head.slice(0, 12)} on ${pr.base.slice(0, 12)}: its configuration ${pr.config.join(", ") || "(none)"}; not run (the program): ${pr.program.join(", ") || "none"}`);
  const base = pr ? pr.base : resolveBase(o.dir, o.base);
  const head = pr ? pr.head : git(o.dir, ["rev-parse", "HEAD"]).trim();
  const dirty = !pr && git(o.dir, ["status", "--porcelain", "--", "."]).trim() !== "";
  const projectText = fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8");
  const stacksDir = stacksDirOf(projectText);
  const inStacks = stacksDir === "." ? "" : stacksDir;
  const baseProjectText = atRevision(o.dir, base, "Pulumi.yaml");
  const baseStacks = stacksIn(o.dir, stacksDir).filter((s) => atRevision(o.dir, base, stackFile(stacksDir, s)) !== undefined);
  // A stack file whose configuration is the base's is not a change (`stack init` adds its
  // encryptionsalt; a comment or the keys' order is not a setting).
  const changed = changedFiles(o.dir, base).filter((f) => {
    const stack = stackOfPath(f, inStacks);
    if (stack === undefined || !fs.existsSync(path.join(o.dir, f))) return true;
    const was = atRevision(o.dir, base, f);
    return was === undefined || canonicalJson(stackConfigOf(was, `${f} at ${base.slice(0, 12)}`)) !== canonicalJson(stackConfigOf(fs.readFileSync(path.join(o.dir, f), "utf8"), f));
  });
  const { touched, removed } = touchedStacks(changed, stacksIn(o.dir, stacksDir), inStacks, o.named, baseStacks);
  say(`${touched.length} stack(s) touched against ${base.slice(0, 12)}: ${touched.map((t) => t.stack).join(", ") || "none"}`);
  fs.mkdirSync(o.plansDir, { recursive: true });
  removeEarlierReview(o.plansDir);
  const ws = await workspace(o.dir, o.env);
  const reviewed: (StackReview & { record: ReviewedStack })[] = [];
  // A change of Pulumi.yaml or the program touches every stack file, deployed or not: one with
  // nothing in state is not installed by it (a stack file or --stacks asks for that).
  const notDeployed: string[] = [];
  for (const t of touched) {
    if (touchedByAll(t) && ((await existingState(ws, t.stack))?.fingerprint ?? "none") === "none") {
      notDeployed.push(t.stack);
      continue;
    }
    reviewed.push(await reviewStack(ws, o, t, { base, baseProjectText, stacksDir }, say));
  }
  if (notDeployed.length) say(`not deployed, so not reviewed (a change of Pulumi.yaml or the program installs nothing): ${notDeployed.join(", ")}`);
  // One machine, however its stacks name it (an address, a name, another port of the same
  // sshd): its pinned host key, where the stacks pin one.
  const serving = new Map(reviewed.map((r) => [machineOf(r.record), servingStackIn(r.hostView, r.stack)]));
  const ordered = rolloutOrder(reviewed, (machine) => serving.get(machine), (r) => machineOf(r.record));
  for (const host of new Set(ordered.map((r) => machineOf(r.record)))) {
    const here = ordered.filter((r) => machineOf(r.record) === host);
    // The stack serving now goes last; when a stack before it restarts, its own `up` then finds
    // another unit on the host and restarts too (a stack is declarative), whatever it changes.
    const last = here[here.length - 1];
    const takers = here.filter((r) => r !== last && r.effect === "restart");
    if (takers.length && last.stack === serving.get(host) && last.effect !== "restart" && last.effect !== "preview failed") {
      last.restartBecause = `after ${code(takers[takers.length - 1].stack)} takes the host`;
      last.effect = "restart";
      last.record.effect = "restart";
      last.downtime = last.downtime ?? takers[takers.length - 1].downtime;
      Object.assign(last, restartSettings(last.stack, configOf(o.dir, o.env, stacksDir, last.stack).merged));
    }
    const restarts = here.filter((r) => r.effect === "restart");
    if (restarts.length > 1) restarts.forEach((r, i) => (r.order = { position: i + 1, of: restarts.length }));
  }
  const createdAt = new Date().toISOString();
  const document: ReviewDocument = { base, head: dirty ? `${head} + working tree` : head, createdAt, backend: maskedBackend(o.env.PULUMI_BACKEND_URL), stacks: ordered, removed, notDeployed, ...(pr ? { programChanges: pr.program } : {}) };
  const words = renderReview(document).replace(/\n*$/, "\n");
  const record: ReviewRecord = { format: REVIEW_FORMAT, base, head: document.head, program: programFingerprint(o.dir, stacksDir, o.plansDir), createdAt, stacks: ordered.map((r) => r.record), ...(pr ? { programChanges: pr.program } : {}), document: sha256(words) };
  const recordText = `${JSON.stringify(record, null, 2)}\n`;
  const digest = digestOf(recordText);
  fs.writeFileSync(path.join(o.plansDir, RECORD_FILE), recordText);
  fs.writeFileSync(path.join(o.plansDir, DIGEST_FILE), `${digest}\n`);
  const markdown = withDigest(words, digest);
  fs.writeFileSync(path.join(o.plansDir, WORDS_FILE), markdown);
  return { markdown, record, document, digest };
}

/** Removes what an earlier review wrote into the plans folder (its record and the plans it names), nothing else. */
function removeEarlierReview(plansDir: string): void {
  for (const name of [DIGEST_FILE, WORDS_FILE]) fs.rmSync(path.join(plansDir, name), { force: true });
  for (const name of [RECORD_FILE, `${RECORD_FILE}.applied`]) {
    const file = path.join(plansDir, name);
    if (!fs.existsSync(file)) continue;
    try {
      for (const s of (JSON.parse(fs.readFileSync(file, "utf8")) as { stacks?: { plan?: unknown }[] }).stacks ?? []) {
        if (typeof s.plan === "string" && /^[^/]+\.plan\.json$/.test(s.plan)) fs.rmSync(path.join(plansDir, s.plan), { force: true });
      }
    } catch {
      // Not a record of ours: leave the folder's other files alone.
    }
    fs.rmSync(file, { force: true });
  }
}

async function reviewStack(ws: LocalWorkspace, o: ReviewOptions, t: Touched, at: { base: string; baseProjectText: string | undefined; stacksDir: string }, say: (l: string) => void): Promise<StackReview & { record: ReviewedStack }> {
  const config = configOf(o.dir, o.env, at.stacksDir, t.stack);
  const baseFile = atRevision(o.dir, at.base, stackFile(at.stacksDir, t.stack));
  const before = baseFile === undefined ? undefined : mergeConfig(projectConfigOf(at.baseProjectText, `Pulumi.yaml at ${at.base.slice(0, 12)}`), stackConfigOf(baseFile, `${stackFile(at.stacksDir, t.stack)} at ${at.base.slice(0, 12)}`));
  const projectNow = fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8");
  const stackNow = fs.readFileSync(path.join(o.dir, stackFile(at.stacksDir, t.stack)), "utf8");
  const after = mergeConfig(projectConfigOf(projectNow), stackConfigOf(stackNow, stackFile(at.stacksDir, t.stack)));
  // The rows, hosts and secrets below come from this reading: it must be Pulumi's own.
  refuseUnlessEngineAgrees(projectNow, stackNow, after, `${stackFile(at.stacksDir, t.stack)} with Pulumi.yaml`);
  const known = (await ws.listStacks()).some((s) => s.name === t.stack);
  const prior = known ? await stateOf(ws, t.stack) : undefined;
  say(`previewing ${t.stack} (${t.because})`);
  const planName = `${t.stack}.plan.json`;
  const planFile = path.join(o.plansDir, planName);
  let preview: PreviewView;
  try {
    preview = await previewOf(await Stack.createOrSelect(t.stack, ws), planFile);
  } catch (e) {
    preview = { steps: [], hostView: "", error: maskSecrets((e as Error).message.split("\n").slice(0, 20).join("\n")) };
  }
  const state = prior ?? { fingerprint: "none", outputs: {} };
  let effect: Effect = preview.error ? "preview failed" : effectOf(preview.steps, preview.hostView);
  const warnings = configWarnings(before, after);
  // Touched only by a change of Pulumi.yaml or the program, and nothing of its own changes (its
  // unit, its inputs): its readiness would only put it back on a host that serves another stack.
  // That is not this change's to do: no restart here (naming it with --stacks does it).
  const ownChange = preview.steps.some((s) => s.op !== "same" && s.op !== "read" && !FOLLOWS_THE_HOST.test(s.resource));
  const byTheWay = touchedByAll(t) && !ownChange && effect === "restart" && !preview.hostView.includes(STARTS_IT);
  if (state.fingerprint === "none") {
    warnings.push(
      known
        ? "no resources in state (destroyed, or never deployed): `up` installs it"
        : "never deployed: `up` installs it for the first time (the review created its empty stack in the backend; commit the stack file's `encryptionsalt` if `stack init` added one)",
    );
  }
  const owner = servingStackIn(preview.hostView, t.stack);
  const hostLine = preview.hostView.split("\n")[0] ?? "";
  const takenOver = !preview.error && owner !== t.stack && / runs the unit of /.test(hostLine);
  if (byTheWay) {
    effect = "no change";
    warnings.push(`its own unit and inputs do not change, and its host serves ${owner ? `stack ${owner}` : "another unit"}: this change does not put it back there (\`npm run review -- --stacks ${t.stack}\` does)`);
  } else if (takenOver) warnings.push(`its host runs ${owner ? `stack ${owner}'s unit` : "a unit of no dflash-sglang stack"}; \`up\` replaces it`);
  const servingState = owner && owner !== t.stack ? await existingState(ws, owner).catch(() => undefined) : undefined;
  const candidates = [{ stack: t.stack, outputs: state.outputs }, ...(servingState && owner ? [{ stack: owner, outputs: servingState.outputs }] : [])];
  // Kept for every stack that could be applied: a "no change" one may still be, after another
  // stack of its host restarts before it (runReview reclassifies it).
  const plan = effect === "preview failed" || byTheWay || !fs.existsSync(planFile) ? null : planName;
  if (!plan) fs.rmSync(planFile, { force: true });
  const review: StackReview = {
    stack: t.stack,
    because: t.because,
    host: config.host,
    effect,
    changes: configChanges(before, after),
    warnings,
    hostView: preview.hostView,
    steps: preview.steps,
    ...(preview.error ? { error: preview.error } : {}),
    ...(effect === "restart" ? { downtime: downtimeFrom(candidates, config.address), ...restartSettings(t.stack, config.merged) } : {}),
    ...(effect === "restart" && takenOver ? { restartBecause: owner ? `host serves ${code(owner)}` : "host runs a unit of no stack" } : {}),
    ...(effect === "restart" && preview.hostView.includes("`up` installs") ? { restartBecause: "installs" } : {}),
    ...(effect === "restart" && preview.hostView.includes(STARTS_IT) ? { restartBecause: STOPPED_NOW } : {}),
    benchmark: { self: benchmarkView(t.stack, state.outputs), serving: owner && owner !== t.stack && servingState ? benchmarkView(owner, servingState.outputs) : undefined },
  };
  return {
    ...review,
    record: {
      stack: t.stack,
      host: config.host,
      ...(config.hostKey ? { machine: config.hostKey } : {}),
      effect,
      plan,
      planSha: plan ? sha256(fs.readFileSync(planFile, "utf8")) : null,
      steps: preview.steps,
      hostView: preview.hostView,
      fingerprints: { config: config.fingerprint, state: state.fingerprint, host: sha256(preview.hostView) },
    },
  };
}

export interface ApplyOptions {
  dir: string;
  env: Record<string, string>;
  plansDir: string;
  /** The approved commit of a pull request reviewed with `--pr`: `dir` is a clean checkout of its base branch. */
  pullRequest?: string;
  /**
   * The digest of the review whose words were approved (`sha256:<hex>`, from the trusted review
   * run): the plans folder must hold exactly that review, its words included.
   */
  digest?: string;
  progress?: (line: string) => void;
  /** The engine's own output of each `up`. */
  output?: (text: string) => void;
}

/** A refusal of `apply`: what moved since the review; nothing was changed (or, when it says so, what was). */
export class ReviewMoved extends Error {}

/** The machine a reviewed stack's node 0 is: its pinned host key, else its address and port. */
const machineOf = (r: Pick<ReviewedStack, "host" | "machine">) => r.machine ?? r.host;

export function readRecord(plansDir: string, digest?: string): ReviewRecord {
  const file = path.join(plansDir, RECORD_FILE);
  if (!fs.existsSync(file)) {
    const applied = fs.existsSync(`${file}.applied`) ? " (this review was applied already: its record is review.json.applied)" : "";
    throw new ReviewMoved(`no review to apply in ${plansDir}${applied}: run \`npm run review -- --plans ${plansDir}\` first`);
  }
  const text = fs.readFileSync(file, "utf8");
  if (digest !== undefined) refuseUnlessApproved(plansDir, text, digest);
  const parsed = reviewRecordSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new ReviewMoved(`${file} is not a review this version can apply (${parsed.error.issues[0]?.message}); run \`npm run review\` again`);
  return parsed.data;
}

/**
 * The plans folder holds the review whose digest was approved: its record has that digest, and
 * its words (review.md) are the ones the record names, ending with that digest's line.
 */
function refuseUnlessApproved(plansDir: string, recordText: string, digest: string): void {
  if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new ReviewMoved(`--digest ${JSON.stringify(digest)} is not a review's digest (sha256:<64 hex>, the last line of its words); nothing was changed`);
  const have = digestOf(recordText);
  if (have !== digest) throw new ReviewMoved(`the review in ${plansDir} is not the one approved: its digest is ${have}, the approved words name ${digest}. Apply the plans of the approved review run (or review again and approve its words); nothing was changed`);
  const wordsFile = path.join(plansDir, WORDS_FILE);
  const words = fs.existsSync(wordsFile) ? fs.readFileSync(wordsFile, "utf8") : undefined;
  const recorded = (JSON.parse(recordText) as { document?: unknown }).document;
  const body = words === undefined ? undefined : wordsOf(words, digest);
  if (body === undefined || sha256(body) !== recorded) {
    throw new ReviewMoved(`${wordsFile} ${words === undefined ? "is missing" : "is not the review's words (the record names other words, or they do not end with its digest)"}: the approved words must travel with their plans; nothing was changed`);
  }
}

export interface Applied {
  stack: string;
  result: "applied" | "nothing to apply";
}

export async function runApply(o: ApplyOptions): Promise<Applied[]> {
  const say = o.progress ?? (() => undefined);
  // A pull request's approval is of words; the digest they end with names the plans they describe.
  if (o.pullRequest !== undefined && o.digest === undefined) throw new ReviewMoved(`a pull request is applied only with --digest: the digest its approved words end with (the review run's job summary); nothing was changed`);
  const record = readRecord(o.plansDir, o.digest);
  // A pull request is applied only as the commit its review was of (the approved one, which the
  // workflow passes), only from its base branch's checkout, and never one that changes the program.
  if (o.pullRequest !== undefined || record.programChanges !== undefined) {
    if (o.pullRequest === undefined) throw new ReviewMoved(`this review is of a pull request (${record.head.slice(0, 12)}): apply it with --pr ${record.head} from a clean checkout of its base branch; nothing was changed`);
    const pr = readPullRequest(o.dir, o.pullRequest);
    if (record.programChanges === undefined || pr.head !== record.head) throw new ReviewMoved(`the review in ${o.plansDir} is of ${record.head.slice(0, 12)}${record.programChanges === undefined ? " (a checkout, not a pull request)" : ""}, not of the commit to apply, ${pr.head.slice(0, 12)}: review that commit first; nothing was changed`);
    if (pr.program.length) throw new ReviewMoved(`the pull request changes the program (${pr.program.join(", ")}): it is applied only after merge, from the base branch (review and apply there); nothing was changed`);
    writePullRequestConfig(o.dir, pr);
  }
  const stacksDir = stacksDirOf(fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8"));
  const ws = await workspace(o.dir, o.env);
  const failedBefore = record.stacks.filter((s) => s.effect === "preview failed");
  if (failedBefore.length) throw new ReviewMoved(`the review's preview failed for ${failedBefore.map((s) => s.stack).join(", ")}: fix that and run \`npm run review\` again; nothing was changed`);
  const moved: string[] = [];
  if (programFingerprint(o.dir, stacksDir, o.plansDir) !== record.program) moved.push(`the program (the project's files other than its configuration) is not the one reviewed at ${record.head}: check out that commit`);
  for (const r of record.stacks) {
    if (r.plan && (!fs.existsSync(path.join(o.plansDir, r.plan)) || sha256(fs.readFileSync(path.join(o.plansDir, r.plan), "utf8")) !== r.planSha)) moved.push(`${r.stack}: its plan file ${r.plan} is missing or not the one the review wrote`);
  }
  /** Everything `apply` checks of a stack now: config, state, and (`withHost`) a fresh preview. */
  const check = async (r: ReviewedStack, withHost: boolean, afterTakeover = false): Promise<{ lines: string[]; hostView?: string }> => {
    if (!fs.existsSync(path.join(o.dir, stackFile(stacksDir, r.stack)))) return { lines: ["its stack file is gone"] };
    const config = configOf(o.dir, o.env, stacksDir, r.stack);
    const state = (await existingState(ws, r.stack)) ?? { fingerprint: "none", outputs: {} };
    const lines = whatMoved(r, { fingerprints: { config: config.fingerprint, state: state.fingerprint } });
    if (lines.length || !withHost) return { lines };
    const now = await previewOf(await Stack.select(r.stack, ws), undefined);
    if (now.error) return { lines: [`its preview now fails: ${now.error.split("\n")[0]}`] };
    if (afterTakeover) return { lines: whatMoved(r, { fingerprints: {}, steps: now.steps, afterTakeover }), hostView: now.hostView };
    return { lines: whatMoved(r, { fingerprints: { host: sha256(now.hostView) }, steps: now.steps, hostView: now.hostView }), hostView: now.hostView };
  };
  // Before anything changes: every stack's configuration and state, and for the first stack
  // of each host what the host runs and the steps its preview plans.
  const applies = (r: ReviewedStack) => r.plan !== null && r.effect !== "no change";
  const firstOnHost = new Set<string>();
  for (const r of record.stacks) {
    const first = applies(r) && !record.stacks.some((x) => machineOf(x) === machineOf(r) && firstOnHost.has(x.stack));
    if (first) firstOnHost.add(r.stack);
    if (first) say(`checking ${r.stack} against the review and its host`);
    moved.push(...(await check(r, first)).lines.map((l) => `${r.stack}: ${l}`));
  }
  if (moved.length) throw new ReviewMoved(`refused: what was reviewed has moved, so nothing was changed.\n${moved.map((m) => `- ${m}`).join("\n")}\nRun \`npm run review\` again and review what it shows now.`);
  const done: Applied[] = [];
  const stopped = (stack: string, lines: string[], hostView?: string) =>
    new ReviewMoved(
      `stopped before ${stack}: ${lines.join("; ")}.\nApplied before it: ${done.filter((d) => d.result === "applied").map((d) => d.stack).join(", ") || "none"}; nothing else was changed.${hostView ? `\nIts host now: ${hostView.split("\n")[0]}` : ""} Run \`npm run review\` again for the rest.`,
    );
  let previous: { machine: string; unitHash: string; stack: string } | undefined;
  let changedSomething = false;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-apply-"));
  try {
    for (const r of record.stacks) {
      if (!applies(r) || !r.plan) {
        done.push({ stack: r.stack, result: "nothing to apply" });
        continue;
      }
      const stack = await Stack.select(r.stack, ws);
      let plan = path.join(o.plansDir, r.plan);
      if (firstOnHost.has(r.stack)) {
        // Checked before the first `up`; checked again if another `up` of this apply ran since
        // (minutes, in which someone else may have moved this host).
        if (changedSomething) {
          const { lines, hostView } = await check(r, true);
          if (lines.length) throw stopped(r.stack, lines, hostView);
        }
      } else {
        // A later stack of a host: the stack before it has just replaced the host's unit, so its
        // reviewed plan (made against the unit before) no longer holds; a new preview must plan
        // the reviewed steps (readiness and benchmark aside, which follow the host), against the
        // unit that stack installed.
        plan = path.join(scratch, `${r.stack}.plan.json`);
        const { lines } = await check(r, false);
        const now = lines.length ? undefined : await previewOf(stack, plan);
        if (now?.error) lines.push(`its preview now fails: ${now.error.split("\n")[0]}`);
        else if (now) lines.push(...whatMoved(r, { fingerprints: {}, steps: now.steps, afterTakeover: true }));
        const expected = previous && previous.machine === machineOf(r) ? `runs the unit of stack ${previous.stack} (${previous.unitHash.slice(0, 12)})` : undefined;
        if (now && !now.error && (!expected || !now.hostView.split("\n")[0].includes(expected))) lines.push(`its host should run what ${previous?.stack ?? "the stack before it"} installed, but: ${now.hostView.split("\n")[0]}`);
        if (lines.length) throw stopped(r.stack, lines, now?.hostView);
      }
      say(`applying ${r.stack} (${r.effect}) under its ${firstOnHost.has(r.stack) ? "reviewed" : "re-checked"} plan`);
      changedSomething = true;
      let up: Awaited<ReturnType<Stack["up"]>>;
      try {
        up = await stack.up({ plan, color: "never", onOutput: o.output });
      } catch (e) {
        // A partial apply says what it applied, what it did not run, and what the host serves now.
        const now = await previewOf(stack, undefined).catch(() => undefined);
        const after = record.stacks.slice(record.stacks.indexOf(r) + 1).filter(applies).map((x) => x.stack);
        throw new Error(
          `${(e as Error).message.trimEnd()}\n\napply stopped at ${r.stack}: its \`up\` failed (above). Applied before it: ${done.filter((d) => d.result === "applied").map((d) => d.stack).join(", ") || "none"}; not run: ${after.join(", ") || "none"}.\n` +
            `${r.host} now: ${now?.hostView.split("\n")[0] || "could not be read"}\nFix the cause, then run \`npm run review\` again for what is left.`,
        );
      }
      const unitHash = up.outputs.unitHash?.value;
      previous = typeof unitHash === "string" ? { machine: machineOf(r), unitHash, stack: r.stack } : undefined;
      done.push({ stack: r.stack, result: "applied" });
    }
    // Applied once: the record would be refused now anyway (state moved); say so plainly.
    fs.renameSync(path.join(o.plansDir, RECORD_FILE), path.join(o.plansDir, `${RECORD_FILE}.applied`));
    return done;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
