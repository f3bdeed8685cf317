// A process of its own running the adaptive sweep (components/sweep/adaptive/run.ts) through
// the real engine, so that a test can kill it as a user's kill would (kill.test.ts), and
// resume it. Argument: JSON { dir, hosts, resume }. Writes the sweep's progress lines to
// stdout, then "@@done <launches>".
import { simWorkspace } from "../../lib/workspace";
import { gridPoints } from "../../components/sweep/adaptive/space";
import { runAdaptive, PassSettings } from "../../components/sweep/adaptive/run";
import { DEFAULT_STRATEGY } from "../../components/sweep/adaptive/strategy";
import type { SweepHost } from "../../components/sweep/sweep";

/** Eight configurations: budgets 4-16, topk 2 or 4, one window. */
export const KILL_GRID = { budgets: [4, 8, 12, 16], topks: [2, 4], windows: [2048] as (number | "none")[], compactCache: "auto" as const };
/** Passes of a few short requests: the test is about launches, not figures. */
export const KILL_PASSES: PassSettings = {
  short: { runs: 2, warmupRuns: 0, maxTokens: 32, shortPromptTokens: 128, longContextTokens: [], concurrency: [1], coding: false },
  full: { runs: 3, warmupRuns: 0, maxTokens: 32, shortPromptTokens: 128, longContextTokens: [], concurrency: [1], coding: false },
};

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]) as { dir: string; hosts: SweepHost[]; resume: boolean };
  // As `npm run sweep` makes it: each engine in a session of its own, so a kill of the sweep's
  // process group leaves the `up` in flight running (and holding its stack's lock).
  const ws = simWorkspace({}, { dir: args.dir, engineInOwnSession: true });
  const run = await runAdaptive({
    ws,
    points: gridPoints(KILL_GRID),
    mode: "adaptive",
    strategy: { ...DEFAULT_STRATEGY, initialLaunches: 3, maxFullPasses: 1, objective: { kind: "short", longWeight: 0 }, budget: { launches: 5 }, seed: 1 },
    passes: KILL_PASSES,
    longContextTokens: 8192,
    base: { "dflash-sglang:safety": { stableSeconds: 0 } },
    hosts: args.hosts,
    resume: args.resume,
    keepGoing: true,
    hostsAreFresh: false,
    progress: (host, line) => process.stdout.write(`[${host}] ${line}\n`),
    shouldStop: () => false,
  });
  process.stdout.write(`@@done ${run.records.length}\n`);
}

void main();
