// The adaptive sweep on hosts: the strategy's decisions (strategy.ts) carried out with
// `pulumi up` through the Automation API, one launch at a time per host, hosts in parallel.
// A launch is an `up` of the point's stack with the short pass's benchmark settings; each
// further pass the strategy asks for is an `up` that changes only `dflash-sglang:benchmark`
// (its runId), which re-runs the benchmark on the server already up and restarts nothing.
// A relaunch (the strategy's `relaunches`: a configuration of a tie it cannot separate, launched
// again because launches differ) is an `up` of a stack of its own, `<point>-launch-<n>`, with the
// same configuration: an `up` of the first stack would restart nothing, as nothing changed.
// Every finished launch and pass is appended to a journal in the workspace; --resume reads
// it (and, for a first launch it lacks, the stack's outputs) so that no finished launch is
// repeated. A relaunch whose journal line was lost is asked for again: the `up` of its own stack,
// which a finished launch left as this run wants it, changes nothing and answers what it measured.
// The full grid runs through the same code: every point, one full pass each.
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import type { SimWorkspace } from "../../../lib/workspace";
import { figuresOf, StoredResult, storedResultOfOutputs } from "../../benchmark/compare";
import type { BenchmarkSettingsInput } from "../../benchmark/schema";
import { failureCause, recordedElsewhere, SweepHost } from "../sweep";
import { GridPoint, speculativeOf } from "./space";
import { decide, Decision, firstPass, LaunchRecord, nextPass, PassFigures, PassKind, StrategyOptions } from "./strategy";

const NS = "dflash-sglang";

/** The benchmark settings of the two passes: the same requests, the full one has more of them and the coding check. */
export interface PassSettings {
  short: BenchmarkSettingsInput;
  full: BenchmarkSettingsInput;
}

export const DEFAULT_PASSES: PassSettings = {
  short: { runs: 3, warmupRuns: 0, maxTokens: 128, shortPromptTokens: 128, longContextTokens: [8192], concurrency: [1], coding: false },
  full: { runs: 6, warmupRuns: 0, maxTokens: 128, shortPromptTokens: 128, longContextTokens: [8192], concurrency: [1], coding: true, codingMaxTokens: 512 },
};

export interface AdaptiveRunOptions {
  ws: SimWorkspace;
  points: GridPoint[];
  /** "adaptive": the strategy decides; "full": every point, one full pass each (the grid as today). */
  mode: "adaptive" | "full";
  strategy: StrategyOptions;
  passes: PassSettings;
  /** The long context the objective reads (one of the passes' longContextTokens). */
  longContextTokens: number;
  /** Stack config every point gets besides its speculative block and benchmark (e.g. safety). */
  base: Record<string, unknown>;
  hosts: SweepHost[];
  resume: boolean;
  /** Go on after a failed launch (it is a data point); without it, a failure stops further launches. */
  keepGoing: boolean;
  /** The hosts were booted for this run: a stack whose state names another host is started afresh (sweep.ts). */
  hostsAreFresh: boolean;
  progress: (host: string, line: string) => void;
  shouldStop: () => boolean;
  signal?: AbortSignal;
  /** How long an `up` waits for another engine's lock on its stack (default LOCK_WAIT_SECONDS), looking every lockPollMs (5000). */
  lockWaitSeconds?: number;
  lockPollMs?: number;
}

export interface AdaptiveRunResult {
  records: LaunchRecord[];
  /** Why it stopped launching. */
  why: string;
  /** Launches the resume took from the journal or the stacks' outputs (not repeated). */
  resumed: string[];
}

/** Pure: the journal's identity: what a resumed run must share with the one it resumes. */
export function journalKey(points: GridPoint[], mode: string, strategy: StrategyOptions, passes: PassSettings, longContextTokens: number): string {
  // The budget and the relaunches only say when to stop: a resume may change them.
  const { budget: _budget, relaunches: _relaunches, ...decisions } = strategy;
  return createHash("sha256")
    .update(JSON.stringify({ points: points.map((p) => p.name), mode, decisions, passes, longContextTokens }))
    .digest("hex")
    .slice(0, 16);
}

/** Pure: the stack of a configuration's `launch`-th launch: the point's own for its first, `<point>-launch-<n>` for a relaunch. */
export function launchStack(point: string, launch = 1): string {
  return launch <= 1 ? point : `${point}-launch-${launch}`;
}

/** The journal: one JSON line per finished launch or pass (the launch's record so far); the last line of a launch wins. */
export function readJournal(file: string, key: string): LaunchRecord[] {
  if (!fs.existsSync(file)) return [];
  const lines = fs.readFileSync(file, "utf8").split("\n").filter(Boolean);
  const header = lines.length ? (JSON.parse(lines[0]) as { key?: string }) : {};
  if (header.key !== key) throw new Error(`${file} is the journal of another sweep (another grid, objective, strategy or benchmark passes): remove it, or run the same sweep again to resume it`);
  const byLaunch = new Map<string, LaunchRecord>();
  // A line cut by a kill is the last one: what it would have said is lost, the rest stands.
  for (const line of lines.slice(1)) {
    try {
      const r = JSON.parse(line) as LaunchRecord;
      byLaunch.set(launchStack(r.point, r.launch), r);
    } catch {
      break;
    }
  }
  return [...byLaunch.values()];
}

/** Pure: a pass's figures from a stack's benchmark output, at the objective's long context. */
export function passFigures(benchmark: StoredResult, longContextTokens: number): PassFigures {
  const f = figuresOf(benchmark);
  const long = f.long.find((l) => l.contextTokens === longContextTokens)?.decode ?? null;
  return {
    short: f.short,
    long,
    acceptLength: f.acceptLength,
    codingPassed: f.coding ? f.coding.passed === f.coding.tasks : null,
    benchmarkSeconds: (benchmark as { duration?: number }).duration ?? 0,
    ...(f.warnings.length > 0 ? { warnings: f.warnings } : {}),
  };
}

/** Pure: the GPU seconds of a launch from a stack's restartTimings output. */
export function launchSecondsOf(timings: unknown): number {
  const t = (timings ?? {}) as Record<string, unknown>;
  const n = (k: string) => (typeof t[k] === "number" ? (t[k] as number) : 0);
  return n("drainSeconds") + n("stopSeconds") + n("gpuReleaseSeconds") + n("loadToReadySeconds");
}

const round = (x: number) => Math.round(x * 10) / 10;

/** How long an `up` waits for another engine's lock on its stack, and how often it looks. */
export const LOCK_WAIT_SECONDS = 1800;
const LOCK_POLL_MS = 5000;

/** Pure: whether an `up` failed because another engine holds its stack's lock (Pulumi's wording). */
export function isLocked(message: string): boolean {
  return /the stack is currently locked/.test(message);
}

/** Pure: whether a failed launch ran out of GPU memory (torch's or SGLang's wording). */
export function isOutOfMemory(cause: string): boolean {
  return /out of memory|Not enough memory/i.test(cause);
}

/** Pure: the runId of a pass: its kind and its number on this launch. */
export function runIdOf(kind: PassKind, n: number): string {
  return `${kind}-${n}`;
}

export async function runAdaptive(o: AdaptiveRunOptions): Promise<AdaptiveRunResult> {
  const journal = path.join(o.ws.dir, "adaptive-journal.jsonl");
  const key = journalKey(o.points, o.mode, o.strategy, o.passes, o.longContextTokens);
  const records: LaunchRecord[] = o.resume ? readJournal(journal, key) : [];
  if (!o.resume || !fs.existsSync(journal)) fs.writeFileSync(journal, JSON.stringify({ key, started: new Date().toISOString() }) + "\n");
  // What the resume took over, by stack (a relaunch is one of its own).
  const resumed = records.map((r) => launchStack(r.point, r.launch));
  if (o.resume) {
    // A launch whose `up` finished but whose journal line was lost: its stack's outputs say what it measured.
    for (const p of o.points) {
      const config = o.ws.stackConfig(p.name);
      // Only a stack this sweep wrote can hold what it measured (selecting any other would create it).
      if (records.some((r) => r.point === p.name) || Object.keys(config).length === 0) continue;
      const outputs = await (await o.ws.stack(p.name)).outputs().catch(() => ({}) as Record<string, { value: unknown }>);
      const bench = config[`${NS}:benchmark`] as { runId?: string } | undefined;
      const spec = config[`${NS}:speculative`];
      const stored = storedResultOfOutputs(outputs);
      if (!stored || !bench?.runId || JSON.stringify(spec) !== JSON.stringify(speculativeOf(p))) continue;
      const kind: PassKind = bench.runId.startsWith("full") ? "full" : "short";
      // Its wall time is lost with the journal line: the restart's timings stand in for the launch.
      const figures = passFigures(stored, o.longContextTokens);
      const restartSeconds = round(launchSecondsOf(outputs.restartTimings?.value));
      const record: LaunchRecord = { point: p.name, host: "(resumed)", launchSeconds: restartSeconds, restartSeconds, passes: [{ kind, figures, heldSeconds: figures.benchmarkSeconds }] };
      records.push(record);
      resumed.push(p.name);
      fs.appendFileSync(journal, JSON.stringify(record) + "\n");
    }
    for (const r of records) o.progress("-", `${launchStack(r.point, r.launch)}: already launched (${r.failure ? "failed" : "measured"}); not launched again (--resume)`);
  }
  const save = (r: LaunchRecord) => fs.appendFileSync(journal, JSON.stringify(r) + "\n");

  const inFlight = new Set<string>();
  // Of those, the ones whose launch is in `records` already (measuring its next passes): the
  // strategy counts a launch once, by its record or as in flight (decide's inFlight and busy).
  const recorded = new Set<string>();
  // Stacks another engine kept locked: left alone in this run.
  const blocked = new Set<string>();
  let why = "";
  let failed = false;
  let waiters: (() => void)[] = [];
  const changed = () => new Promise<void>((resolve) => waiters.push(resolve));
  const wake = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const next = (): Decision => {
    if (o.mode === "adaptive") {
      const busy = [...inFlight, ...blocked];
      return decide(o.points, records, busy.filter((p) => !recorded.has(p)), o.strategy, busy);
    }
    const p = o.points.find((x) => !inFlight.has(x.name) && !blocked.has(x.name) && !records.some((r) => r.point === x.name));
    return p ? { kind: "launch", point: p.name, why: "full grid" } : { kind: "stop", why: "every configuration of the grid is measured" };
  };

  const up = async (host: SweepHost, point: GridPoint, stack: string, kind: PassKind, n: number) => {
    const config = { ...o.base, [`${NS}:speculative`]: speculativeOf(point), [`${NS}:benchmark`]: { ...o.passes[kind], runId: runIdOf(kind, n) }, ...host.config };
    for (const [k, v] of Object.entries(config)) o.ws.setStackConfig(stack, k.replace(`${NS}:`, ""), v);
    // The engines run in sessions of their own: a killed sweep's `up` goes on, holding its
    // stack's lock. Resumed, the sweep waits for it to end, then deploys the point as this run
    // wants it (nothing restarts where the killed `up` left it so), rather than count the lock
    // as a failed configuration.
    const waitSeconds = o.lockWaitSeconds ?? LOCK_WAIT_SECONDS;
    const waitUntil = Date.now() + waitSeconds * 1000;
    for (let said = false; ; said = true) {
      try {
        return await (await o.ws.stack(stack)).up({ signal: o.signal });
      } catch (e) {
        if (!isLocked((e as Error).message) || Date.now() > waitUntil || o.shouldStop()) throw e;
        if (!said) o.progress(host.name, `${stack}: its stack is locked by another \`pulumi up\` (an interrupted sweep's, still running?); waiting up to ${waitSeconds} s for it to end`);
        await new Promise((r) => setTimeout(r, o.lockPollMs ?? LOCK_POLL_MS));
      }
    }
  };

  const launch = async (host: SweepHost, point: GridPoint, reason: string) => {
    const ordinal = records.filter((r) => r.point === point.name).length + 1;
    const stack = launchStack(point.name, ordinal);
    const record: LaunchRecord = { point: point.name, ...(ordinal > 1 ? { launch: ordinal } : {}), host: host.name, launchSeconds: 0, passes: [] };
    const started = Date.now();
    o.progress(host.name, `${point.name}: launch (${reason})${ordinal > 1 ? ` as stack ${stack}` : ""}`);
    try {
      const gone = o.hostsAreFresh ? recordedElsewhere(o.ws.stackConfig(stack), o.hosts) : undefined;
      if (gone) {
        o.progress(host.name, `${stack}: its state is for a simulated host of an earlier run (${gone.address}:${gone.port}), which is gone; starting it afresh`);
        await o.ws.removeStack(stack);
      }
      // A relaunch is measured in full at once (strategy.ts firstPass).
      const first: PassKind = o.mode === "full" ? "full" : firstPass(records, point.name);
      const result = await up(host, point, stack, first, 1);
      const figures = passFigures(storedResultOfOutputs(result.outputs)!, o.longContextTokens);
      // GPU time as the stack's outputs hold it: the restart (drain, stop, GPU release, load to
      // serving) and the benchmark; the engine's own time is in the wall time beside it.
      record.restartSeconds = round(launchSecondsOf(result.outputs.restartTimings?.value));
      record.launchSeconds = record.restartSeconds;
      record.wallSeconds = round((Date.now() - started) / 1000);
      record.passes.push({ kind: first, figures, heldSeconds: figures.benchmarkSeconds });
    } catch (e) {
      if (isLocked((e as Error).message)) {
        // Not a fact about the configuration: nothing is recorded, a later --resume tries it again.
        blocked.add(point.name);
        o.progress(host.name, `${stack}: not launched: its stack is still locked by another \`pulumi up\`; not a data point. If no engine runs it, \`pulumi cancel\` it, then run the sweep again with --resume`);
        return;
      }
      const cause = failureCause((e as Error).message);
      // A failed launch held the host from its start to its failure; the engine's own time is in it too.
      record.launchSeconds = round((Date.now() - started) / 1000);
      record.wallSeconds = record.launchSeconds;
      record.failure = { cause, outOfMemory: isOutOfMemory(cause) };
      failed = true;
      records.push(record);
      recorded.add(point.name);
      save(record);
      o.progress(host.name, `${point.name}: FAILED after ${record.launchSeconds} s: ${cause}${record.failure.outOfMemory ? " (out of memory: rules out the configurations that need at least its memory)" : ""}`);
      return;
    }
    records.push(record);
    recorded.add(point.name);
    save(record);
    const say = () => {
      const p = record.passes[record.passes.length - 1];
      return `${p.kind} pass: ${p.figures.short.median} tok/s short${p.figures.long ? `, ${p.figures.long.median} at ${o.longContextTokens}` : ""}, accept length ${p.figures.acceptLength ?? "-"} (${p.figures.benchmarkSeconds} s)`;
    };
    o.progress(host.name, `${point.name}: launched: restart ${record.restartSeconds} s (its \`up\` ${record.wallSeconds} s); ${say()}`);
    if (o.mode === "full") return;
    for (let kind = nextPass(o.points, records, point.name, o.strategy); kind !== "done" && !o.shouldStop(); kind = nextPass(o.points, records, point.name, o.strategy)) {
      const n = record.passes.filter((p) => p.kind === kind).length + 1;
      const passStarted = Date.now();
      try {
        const result = await up(host, point, stack, kind, n);
        // Only the benchmark changed: the server must not have been restarted.
        const restart = round(launchSecondsOf(result.outputs.restartTimings?.value));
        const restarted = restart !== record.restartSeconds;
        // A pass should restart nothing; if the server was restarted for it, that restart is GPU time too.
        if (restarted) {
          record.launchSeconds = round(record.launchSeconds + restart);
          record.restartSeconds = restart;
        }
        const figures = passFigures(storedResultOfOutputs(result.outputs)!, o.longContextTokens);
        record.passes.push({ kind, figures, heldSeconds: figures.benchmarkSeconds });
        record.wallSeconds = round((record.wallSeconds ?? 0) + (Date.now() - passStarted) / 1000);
        save(record);
        o.progress(host.name, `${point.name}: ${say()}${restarted ? " (the server was restarted for it)" : ""}`);
      } catch (e) {
        o.progress(host.name, `${point.name}: the ${kind} pass FAILED: ${failureCause((e as Error).message)}; keeping what it measured before`);
        return;
      }
    }
  };

  const worker = async (host: SweepHost) => {
    for (;;) {
      if (o.shouldStop()) return;
      if (failed && !o.keepGoing) {
        why = "a launch failed (without --keep-going)";
        return;
      }
      const d = next();
      if (d.kind === "stop") {
        why = d.why;
        if (inFlight.size === 0) return;
        await changed();
        continue;
      }
      inFlight.add(d.point);
      try {
        await launch(host, o.points.find((p) => p.name === d.point)!, d.why);
      } finally {
        inFlight.delete(d.point);
        recorded.delete(d.point);
        wake();
      }
    }
  };
  await Promise.all(o.hosts.map(worker));
  if (o.shouldStop() && !why) why = "stopped by request";
  return { records, why, resumed };
}
