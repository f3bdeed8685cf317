// Pure: an adaptive sweep driven against a table of per-configuration results instead of
// hosts (a replay of a full-grid sweep's recorded figures, or of the performance model):
// each pass draws its requests around the configuration's recorded mean with its recorded
// noise, seeded, and costs what the recording says a launch and a pass cost. A launch may
// also draw one persistent offset (the entry's `launchSd`) that all of its passes share, as a
// real server (and the simulated one: simhost/sim/sglang/surface.ts) differs from launch to
// launch: repeating passes on one launch does not average it away. `hosts` hosts
// run in parallel, as the real sweep's workers do: a host that is free asks for the next
// launch with what has finished by then. The strategy's decisions see only the passes'
// figures, as in the real sweep.
import { mix, normal, prng } from "../../../lib/prng";
import { GridPoint } from "./space";
import { conclude, Conclusion, decide, firstPass, LaunchRecord, nextPass, PassFigures, PassKind, spentSeconds, StrategyOptions } from "./strategy";

/** One configuration's recorded figures (or the model's). */
export interface ReplayEntry {
  /** Failed to start: its cause, and whether it ran out of memory. */
  failure?: { cause: string; outOfMemory: boolean };
  /** Mean decode tok/s per request at short context, and its relative standard deviation per request. */
  short: { mean: number; sd: number };
  long: { mean: number; sd: number } | null;
  acceptLength: number | null;
  codingPassed: boolean | null;
  /** GPU seconds of a launch (a failed one: until it failed). */
  launchSeconds: number;
  /**
   * Relative sd of a launch's persistent offset: each launch multiplies every request of all
   * of its passes by one draw of 1 + launchSd * z. Defaults to none (0).
   */
  launchSd?: number;
}

export interface ReplayCosts {
  /** Requests per phase of a short pass and of a full pass. */
  shortRequests: number;
  fullRequests: number;
  /** GPU seconds of a short pass and of a full pass (their benchmarks). */
  shortPassSeconds: number;
  fullPassSeconds: number;
  /** What a pass after the first adds besides its benchmark: the `up` that starts it (the engine's fixed cost). */
  passOverheadSeconds: number;
}

export interface ReplayOutcome {
  records: LaunchRecord[];
  conclusion: Conclusion;
  gpuSeconds: number;
  /** The full grid: every configuration launched and measured in full once. */
  fullGridGpuSeconds: number;
  launches: number;
  why: string;
}

function phase(rand: () => number, m: { mean: number; sd: number }, n: number) {
  const draws = Array.from({ length: n }, () => m.mean * (1 + m.sd * normal(rand))).sort((a, b) => a - b);
  const median = n % 2 ? draws[(n - 1) / 2] : (draws[n / 2 - 1] + draws[n / 2]) / 2;
  const r = (x: number) => Math.round(x * 100) / 100;
  return { median: r(median), min: r(draws[0]), max: r(draws[n - 1]), requests: n };
}

/**
 * Pure: the persistent speed factor of one launch of `e`: 1 + launchSd * z, floored as the
 * simulator floors it (a fifth); 1 without a launchSd, drawing nothing then.
 */
export function drawLaunchOffset(rand: () => number, e: ReplayEntry): number {
  if (!e.launchSd) return 1;
  return Math.max(0.2, 1 + e.launchSd * normal(rand));
}

/**
 * Pure: the figures one pass of `kind` would report for `e`, on a launch whose persistent
 * offset is `launchOffset` (drawLaunchOffset; 1, the default, for none).
 */
export function drawPass(rand: () => number, e: ReplayEntry, kind: PassKind, c: ReplayCosts, launchOffset = 1): PassFigures {
  const n = kind === "short" ? c.shortRequests : c.fullRequests;
  const on = (m: { mean: number; sd: number }) => ({ mean: m.mean * launchOffset, sd: m.sd });
  return {
    short: phase(rand, on(e.short), n),
    long: e.long ? phase(rand, on(e.long), n) : null,
    acceptLength: e.acceptLength,
    codingPassed: kind === "full" ? e.codingPassed : null,
    benchmarkSeconds: kind === "short" ? c.shortPassSeconds : c.fullPassSeconds,
  };
}

/** Pure: the GPU seconds of the full grid on this table: every launch, and a full pass of each that starts. */
export function fullGridSeconds(table: Record<string, ReplayEntry>, c: ReplayCosts): number {
  return Object.values(table).reduce((s, e) => s + e.launchSeconds + (e.failure ? 0 : c.fullPassSeconds), 0);
}

/**
 * What drives a sweep: the next launch (a configuration may be launched again: launches
 * differ), the next pass on a launch's server, and the answer. The adaptive strategy is one;
 * bench/adaptive/baselines.ts has the sweeps it is compared with.
 */
export interface Policy {
  name: string;
  decide(points: GridPoint[], records: LaunchRecord[], inFlight: string[]): { kind: "launch"; point: string; why: string } | { kind: "stop"; why: string };
  /** The first pass of the launch `record` (in `records`, no passes yet) once its server is up. */
  firstPass(points: GridPoint[], records: LaunchRecord[], record: LaunchRecord): PassKind;
  /** After a pass on the launch `record` (in `records`): the next pass on the same server, or done. */
  nextPass(points: GridPoint[], records: LaunchRecord[], record: LaunchRecord): PassKind | "done";
  conclude(points: GridPoint[], records: LaunchRecord[]): { chosen?: string; tied: string[]; confidence?: number };
}

/** The adaptive strategy (strategy.ts) with options `o`, as a policy; `concluded` is its last whole conclusion (drawn once). */
export function adaptivePolicy(o: StrategyOptions): Policy & { concluded(): Conclusion | undefined } {
  let last: Conclusion | undefined;
  return {
    name: "adaptive",
    decide: (points, records, inFlight) => decide(points, records, inFlight, o),
    firstPass: (_points, records, record) => firstPass(records, record.point),
    nextPass: (points, records, record) => nextPass(points, records, record.point, o),
    conclude: (points, records) => {
      last = conclude(points, records, o);
      return { chosen: last.chosen?.point.name, tied: last.tied, confidence: last.confidence };
    },
    concluded: () => last,
  };
}

/** Runs the strategy against the table with `hosts` parallel hosts; seeded. */
export function replay(points: GridPoint[], table: Record<string, ReplayEntry>, costs: ReplayCosts, o: StrategyOptions, hosts: number): ReplayOutcome {
  const policy = adaptivePolicy(o);
  const r = replayPolicy(points, table, costs, policy, hosts, o.seed);
  return { ...r, conclusion: policy.concluded()! };
}

/** The launch offsets' stream (mixed from the seed: apart from the requests' and the answer's draws). */
export const LAUNCH_STREAM = 2;

/** Runs any policy against the table with `hosts` parallel hosts; seeded. */
export function replayPolicy(points: GridPoint[], table: Record<string, ReplayEntry>, costs: ReplayCosts, policy: Policy, hosts: number, seed: number): Omit<ReplayOutcome, "conclusion"> & { answer: ReturnType<Policy["conclude"]> } {
  const rand = prng(seed * 7919 + 17);
  // Launch offsets come from a stream of their own: a table with a launchSd draws the same
  // requests as one without (common random numbers), only shifted per launch.
  const launchRand = prng(mix(seed, LAUNCH_STREAM));
  const records: LaunchRecord[] = [];
  // Launches in progress: the host's time at which it finishes, and its point.
  const running: { host: number; point: string; at: number }[] = [];
  const free = Array.from({ length: hosts }, (_, i) => ({ host: i, at: 0 }));
  let why = "";
  let stopped = false;
  const runLaunch = (point: string, host: number, at: number) => {
    running.push({ host, point, at: at + table[point].launchSeconds });
  };
  for (;;) {
    // Every free host asks for a launch, in host order, with what has finished by now.
    free.sort((a, b) => a.at - b.at || a.host - b.host);
    while (!stopped && free.length > 0) {
      const h = free[0];
      const d = policy.decide(points, records, running.map((r) => r.point));
      if (d.kind === "stop") {
        why = d.why;
        if (running.length === 0) stopped = true;
        break;
      }
      free.shift();
      runLaunch(d.point, h.host, h.at);
    }
    if (running.length === 0) break;
    // The next launch to finish its start: its passes run on it, one after the other, each
    // decided with what has finished by then.
    running.sort((a, b) => a.at - b.at || a.host - b.host);
    const done = running.shift()!;
    const e = table[done.point];
    const record: LaunchRecord = { point: done.point, host: `h${done.host + 1}`, launchSeconds: e.launchSeconds, passes: [], ...(e.failure ? { failure: e.failure } : {}) };
    records.push(record);
    const first = policy.firstPass(points, records, record);
    let at = done.at;
    if (!e.failure) {
      const offset = drawLaunchOffset(launchRand, e);
      let kind: PassKind | "done" = first;
      while (kind !== "done") {
        const figures = drawPass(rand, e, kind, costs, offset);
        const heldSeconds = figures.benchmarkSeconds + (record.passes.length > 0 ? costs.passOverheadSeconds : 0);
        record.passes.push({ kind, figures, heldSeconds });
        at += heldSeconds;
        kind = policy.nextPass(points, records, record);
      }
    }
    free.push({ host: done.host, at });
    stopped = false;
  }
  return { records, answer: policy.conclude(points, records), gpuSeconds: spentSeconds(records), fullGridGpuSeconds: fullGridSeconds(table, costs), launches: records.length, why };
}
