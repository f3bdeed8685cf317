// The review of a change and the apply of what was reviewed, through the Automation API
// against the project's backend and the hosts (reads only, until `apply`):
//   review  git names what changed against the base; each touched stack is previewed with an
//           update plan saved (Pulumi's `preview --save-plan`); the document (render.ts) and a
//           record (record.ts: steps, fingerprints of config, state and host) are written;
//   apply   every stack's configuration and state, and the hosts, are checked against the
//           record before anything changes; then each stack's `up` runs under its plan, in the
//           rollout order, and a stack whose host another stack of the review has just changed
//           is previewed again and held to the steps reviewed.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { EngineEvent, LocalWorkspace, Stack } from "@pulumi/pulumi/automation";
import { pulumiCommand } from "../../lib/pulumi-env";
import { figuresOf, type StoredResult } from "../benchmark/compare";
import { overlayFor, readOverlay, mergeSettings } from "../sglang-service/overlay";
import { servingStackIn } from "../sglang-service/remote/observe";
import { configChanges, configWarnings, mergeConfig, projectConfigOf, stackConfigOf, stackOfPath, touchedStacks, type Touched } from "./change";
import { canonicalJson, downtimeOf, effectOf, RECORD_FILE, resourceName, REVIEW_FORMAT, ReviewedStack, ReviewRecord, reviewRecordSchema, rolloutOrder, sha256, Step, timingsSchema, whatMoved } from "./record";
import { BenchmarkView, renderReview, ReviewDocument, StackReview } from "./render";

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
}

function git(dir: string, args: string[]): string {
  return execFileSync("git", args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** The base revision: the one given, or the merge base of HEAD with the main branch. */
export function resolveBase(dir: string, base: string | undefined): string {
  const verify = (rev: string) => {
    try {
      return git(dir, ["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]).trim();
    } catch {
      return undefined;
    }
  };
  if (base !== undefined) {
    const sha = verify(base);
    if (!sha) throw new Error(`--base ${base} names no commit of the git repository at ${dir}; give a branch, tag or commit (e.g. origin/main)`);
    return sha;
  }
  for (const main of ["origin/HEAD", "origin/main", "main", "origin/master", "master"]) {
    if (!verify(main)) continue;
    return git(dir, ["merge-base", "HEAD", main]).trim();
  }
  throw new Error(`no main branch (origin/HEAD, origin/main, main, origin/master, master) in the git repository at ${dir}; give --base REF`);
}

/** The project's stacks folder, relative to it (Pulumi.yaml's stackConfigDir). */
function stacksDirOf(projectText: string): string {
  return ((YAML.parse(projectText) ?? {}) as { stackConfigDir?: string }).stackConfigDir ?? ".";
}

const stackFile = (stacksDir: string, stack: string) => path.join(stacksDir, `Pulumi.${stack}.yaml`);

function stacksIn(dir: string, stacksDir: string): string[] {
  const at = path.join(dir, stacksDir);
  return fs.existsSync(at) ? fs.readdirSync(at).flatMap((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1] ?? []).sort() : [];
}

/** A file of the project at a revision, or undefined where it has none. */
function atRevision(dir: string, rev: string, file: string): string | undefined {
  try {
    return execFileSync("git", ["show", `${rev}:./${file}`], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return undefined;
  }
}

/** Paths (relative to the project folder) that differ between `base` and the working tree, untracked files included. */
function changedFiles(dir: string, base: string): string[] {
  const tracked = git(dir, ["diff", "--name-only", "--relative", base, "--", "."]).split("\n");
  const untracked = git(dir, ["ls-files", "--others", "--exclude-standard", "--", "."]).split("\n");
  return [...new Set([...tracked, ...untracked].filter(Boolean))].sort();
}

/** A backend URL with any password in it masked. */
export function maskedBackend(url: string | undefined): string {
  if (!url) return "the default backend";
  return url.replace(/(\/\/[^:/@]+:)[^@]*@/, "$1***@").replace(/([?&](password|sslpassword)=)[^&]*/gi, "$1***");
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
    if (d?.severity === "info" && d.urn?.includes("::dflash:sglang:Service::")) views.push(d.message.trimEnd());
    if (d?.severity === "error") errors.push(d.message.trim());
  };
  const sorted = () => [...steps.values()].sort((a, b) => a.resource.localeCompare(b.resource));
  try {
    await stack.preview({ plan: planFile, color: "never", onEvent });
  } catch (e) {
    return { steps: sorted(), hostView: views.join("\n"), error: errors.join("\n") || (e as Error).message.split("\n").slice(0, 20).join("\n") };
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
  host: string;
}

/** A stack's configuration as the program reads it: Pulumi.yaml, its stack file, this checkout's overlay. */
function configOf(dir: string, env: Record<string, string>, stacksDir: string, stack: string): ConfigView {
  const project = fs.readFileSync(path.join(dir, "Pulumi.yaml"), "utf8");
  const file = path.join(dir, stackFile(stacksDir, stack));
  const own = stackConfigOf(fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined);
  const overlay = env.DFLASH_LOCAL_OVERLAY === "off" ? undefined : readOverlay(dir, stack);
  const local = overlay ? overlayFor(overlay, stack) : {};
  const merged = mergeSettings(mergeConfig(projectConfigOf(project), own), local) as Record<string, unknown>;
  const host = (merged.host as { address?: unknown } | undefined)?.address;
  return { fingerprint: sha256(canonicalJson({ project, stack: own, local })), merged, host: typeof host === "string" ? host : "?" };
}

function benchmarkView(stack: string, outputs: Record<string, unknown>): BenchmarkView | undefined {
  const result = outputs.benchmark as StoredResult | null | undefined;
  if (!result || typeof result !== "object" || !("short" in result)) return undefined;
  try {
    return { stack, takenAt: String(outputs.benchmarkTakenAt ?? ""), figures: figuresOf(result) };
  } catch {
    return undefined;
  }
}

/** Expected downtime from a measured restart: this stack's on the same host, else that of the stack serving there now. */
function downtimeFrom(candidates: { stack: string; host: string; outputs: Record<string, unknown> }[], host: string): StackReview["downtime"] {
  for (const c of candidates) {
    const t = timingsSchema.safeParse(c.outputs.restartTimings);
    if (!t.success || c.outputs.host !== host) continue;
    const seconds = downtimeOf(t.data);
    if (seconds > 0) return { seconds, from: `stack ${c.stack}'s last restart on ${host}` };
  }
  return undefined;
}

export interface ReviewResult {
  markdown: string;
  record: ReviewRecord;
  document: ReviewDocument;
}

async function workspace(dir: string, env: Record<string, string>): Promise<LocalWorkspace> {
  return LocalWorkspace.create({ workDir: dir, envVars: { ...env, PULUMI_EXPERIMENTAL: "true" }, pulumiCommand: await pulumiCommand() });
}

export async function runReview(o: ReviewOptions): Promise<ReviewResult> {
  const say = o.progress ?? (() => undefined);
  const base = resolveBase(o.dir, o.base);
  const head = git(o.dir, ["rev-parse", "HEAD"]).trim();
  const dirty = git(o.dir, ["status", "--porcelain", "--", "."]).trim() !== "";
  const projectText = fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8");
  const stacksDir = stacksDirOf(projectText);
  const baseProjectText = atRevision(o.dir, base, "Pulumi.yaml");
  const baseStacks = stacksIn(o.dir, stacksDir).filter((s) => atRevision(o.dir, base, stackFile(stacksDir, s)) !== undefined);
  // A stack file whose configuration is the base's is not a change (`stack init` adds its
  // encryptionsalt; a comment or the keys' order is not a setting).
  const changed = changedFiles(o.dir, base).filter((f) => {
    const stack = stackOfPath(f, stacksDir === "." ? "" : stacksDir);
    if (stack === undefined || !fs.existsSync(path.join(o.dir, f))) return true;
    const was = atRevision(o.dir, base, f);
    return was === undefined || canonicalJson(stackConfigOf(was)) !== canonicalJson(stackConfigOf(fs.readFileSync(path.join(o.dir, f), "utf8")));
  });
  const { touched, removed } = touchedStacks(changed, stacksIn(o.dir, stacksDir), stacksDir === "." ? "" : stacksDir, o.named, baseStacks);
  say(`${touched.length} stack(s) touched against ${base.slice(0, 12)}: ${touched.map((t) => t.stack).join(", ") || "none"}`);
  fs.mkdirSync(o.plansDir, { recursive: true });
  for (const f of fs.readdirSync(o.plansDir)) if (f === RECORD_FILE || f.endsWith(".plan.json")) fs.rmSync(path.join(o.plansDir, f));
  const ws = await workspace(o.dir, o.env);
  const reviewed: (StackReview & { record: ReviewedStack })[] = [];
  for (const t of touched) reviewed.push(await reviewStack(ws, o, t, { base, baseProjectText, stacksDir }, say));
  const serving = new Map(reviewed.map((r) => [r.host, servingStackIn(r.hostView, r.stack)]));
  const ordered = rolloutOrder(reviewed, (host) => serving.get(host));
  for (const host of new Set(ordered.map((r) => r.host))) {
    const restarts = ordered.filter((r) => r.host === host && r.effect === "restart");
    if (restarts.length > 1) restarts.forEach((r, i) => (r.order = { position: i + 1, of: restarts.length }));
  }
  const createdAt = new Date().toISOString();
  const document: ReviewDocument = { base, head: dirty ? `${head} + working tree` : head, createdAt, backend: maskedBackend(o.env.PULUMI_BACKEND_URL), stacks: ordered, removed };
  const record: ReviewRecord = { format: REVIEW_FORMAT, base, head: document.head, createdAt, stacks: ordered.map((r) => r.record) };
  fs.writeFileSync(path.join(o.plansDir, RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`);
  return { markdown: renderReview(document), record, document };
}

async function reviewStack(ws: LocalWorkspace, o: ReviewOptions, t: Touched, at: { base: string; baseProjectText: string | undefined; stacksDir: string }, say: (l: string) => void): Promise<StackReview & { record: ReviewedStack }> {
  const config = configOf(o.dir, o.env, at.stacksDir, t.stack);
  const baseFile = atRevision(o.dir, at.base, stackFile(at.stacksDir, t.stack));
  const before = baseFile === undefined ? undefined : mergeConfig(projectConfigOf(at.baseProjectText), stackConfigOf(baseFile));
  const after = mergeConfig(projectConfigOf(fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8")), stackConfigOf(fs.readFileSync(path.join(o.dir, stackFile(at.stacksDir, t.stack)), "utf8")));
  const prior = await existingState(ws, t.stack);
  say(`previewing ${t.stack} (${t.because})`);
  const stack = await Stack.createOrSelect(t.stack, ws);
  const planName = `${t.stack}.plan.json`;
  const preview = await previewOf(stack, path.join(o.plansDir, planName));
  const state = prior ?? { fingerprint: "none", outputs: {} };
  const effect = preview.error ? "preview failed" : effectOf(preview.steps, preview.hostView);
  const warnings = configWarnings(before, after);
  if (state.fingerprint === "none") warnings.push("never deployed: `up` installs it for the first time (the review created its empty stack in the backend)");
  const owner = servingStackIn(preview.hostView, t.stack);
  const hostLine = preview.hostView.split("\n")[0] ?? "";
  if (!preview.error && owner !== t.stack && / runs the unit of /.test(hostLine)) warnings.push(`its host runs ${owner ? `stack ${owner}'s unit` : "a unit of no dflash-sglang stack"}; \`up\` replaces it`);
  const servingState = owner && owner !== t.stack ? await existingState(ws, owner).catch(() => undefined) : undefined;
  const candidates = [{ stack: t.stack, host: config.host, outputs: state.outputs }, ...(servingState && owner ? [{ stack: owner, host: config.host, outputs: servingState.outputs }] : [])];
  const plan = effect === "preview failed" || effect === "no change" ? null : planName;
  if (!plan) fs.rmSync(path.join(o.plansDir, planName), { force: true });
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
    ...(effect === "restart" ? { downtime: downtimeFrom(candidates, config.host) } : {}),
    benchmark: { self: benchmarkView(t.stack, state.outputs), serving: owner && owner !== t.stack && servingState ? benchmarkView(owner, servingState.outputs) : undefined },
  };
  return {
    ...review,
    record: { stack: t.stack, host: config.host, effect, plan, steps: preview.steps, hostView: preview.hostView, fingerprints: { config: config.fingerprint, state: state.fingerprint, host: sha256(preview.hostView) } },
  };
}

export interface ApplyOptions {
  dir: string;
  env: Record<string, string>;
  plansDir: string;
  progress?: (line: string) => void;
  /** The engine's own output of each `up`. */
  output?: (text: string) => void;
}

/** A refusal of `apply`: what moved since the review; nothing was changed. */
export class ReviewMoved extends Error {}

export function readRecord(plansDir: string): ReviewRecord {
  const file = path.join(plansDir, RECORD_FILE);
  if (!fs.existsSync(file)) throw new ReviewMoved(`no review in ${plansDir} (${RECORD_FILE} is missing): run \`npm run review -- --plans ${plansDir}\` first`);
  const parsed = reviewRecordSchema.safeParse(JSON.parse(fs.readFileSync(file, "utf8")));
  if (!parsed.success) throw new ReviewMoved(`${file} is not a review this version can apply (${parsed.error.issues[0]?.message}); run \`npm run review\` again`);
  return parsed.data;
}

export interface Applied {
  stack: string;
  result: "applied" | "nothing to apply";
}

export async function runApply(o: ApplyOptions): Promise<Applied[]> {
  const say = o.progress ?? (() => undefined);
  const record = readRecord(o.plansDir);
  const stacksDir = stacksDirOf(fs.readFileSync(path.join(o.dir, "Pulumi.yaml"), "utf8"));
  const ws = await workspace(o.dir, o.env);
  const moved: string[] = [];
  const failedBefore = record.stacks.filter((s) => s.effect === "preview failed");
  if (failedBefore.length) throw new ReviewMoved(`the review's preview failed for ${failedBefore.map((s) => s.stack).join(", ")}: fix that and run \`npm run review\` again; nothing was changed`);
  // Before anything changes: every stack's configuration and state, and the host of the
  // first stack of each host, as reviewed.
  const firstOnHost = new Set<string>();
  const checked = new Set<string>();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-apply-"));
  try {
    for (const r of record.stacks) {
      if (!fs.existsSync(path.join(o.dir, stackFile(stacksDir, r.stack)))) {
        moved.push(`${r.stack}: its stack file is gone`);
        continue;
      }
      const config = configOf(o.dir, o.env, stacksDir, r.stack);
      const state = (await existingState(ws, r.stack)) ?? { fingerprint: "none", outputs: {} };
      const lines = whatMoved(r, { fingerprints: { config: config.fingerprint, state: state.fingerprint } });
      if (!lines.length && r.plan && !firstOnHost.has(r.host)) {
        firstOnHost.add(r.host);
        say(`checking ${r.stack} against its host`);
        const now = await previewOf(await Stack.select(r.stack, ws), undefined);
        if (now.error) lines.push(`its preview now fails: ${now.error.split("\n")[0]}`);
        else lines.push(...whatMoved(r, { fingerprints: { host: sha256(now.hostView) }, steps: now.steps, hostView: now.hostView }));
        checked.add(r.stack);
      }
      moved.push(...lines.map((l) => `${r.stack}: ${l}`));
    }
    if (moved.length) throw new ReviewMoved(`refused: what was reviewed has moved, so nothing was changed.\n${moved.map((m) => `- ${m}`).join("\n")}\nRun \`npm run review\` again and review what it shows now.`);
    const done: Applied[] = [];
    let previous: { host: string; unitHash: string; stack: string } | undefined;
    for (const r of record.stacks) {
      if (!r.plan) {
        done.push({ stack: r.stack, result: "nothing to apply" });
        continue;
      }
      const stack = await Stack.select(r.stack, ws);
      let plan = path.join(o.plansDir, r.plan);
      if (!checked.has(r.stack)) {
        // A later stack of a host: the stack before it has just replaced the host's unit, so its
        // reviewed plan (made against the unit before) no longer holds; a new preview must plan
        // the same steps, against the unit that stack installed.
        plan = path.join(scratch, `${r.stack}.plan.json`);
        const now = await previewOf(stack, plan);
        const lines = now.error ? [`its preview now fails: ${now.error.split("\n")[0]}`] : whatMoved(r, { fingerprints: {}, steps: now.steps });
        const expected = previous && previous.host === r.host ? `runs the unit of stack ${previous.stack} (${previous.unitHash.slice(0, 12)})` : undefined;
        if (expected && !now.hostView.split("\n")[0].includes(expected)) lines.push(`its host should run what ${previous!.stack} installed, but: ${now.hostView.split("\n")[0]}`);
        if (lines.length) {
          throw new ReviewMoved(`stopped before ${r.stack}: ${lines.join("; ")}.\nApplied before it: ${done.filter((d) => d.result === "applied").map((d) => d.stack).join(", ") || "none"}. Run \`npm run review\` again for the rest.`);
        }
      }
      say(`applying ${r.stack} (${r.effect}) under its reviewed plan`);
      const up = await stack.up({ plan, color: "never", onOutput: o.output });
      const unitHash = up.outputs.unitHash?.value;
      previous = typeof unitHash === "string" ? { host: r.host, unitHash, stack: r.stack } : undefined;
      done.push({ stack: r.stack, result: "applied" });
    }
    // Applied once: the record would be refused now anyway (state moved); say so plainly.
    fs.renameSync(path.join(o.plansDir, RECORD_FILE), path.join(o.plansDir, `${RECORD_FILE}.applied`));
    return done;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
