// `npm run sweep -- [options]`: runs `up` for every stack file in stacks/ matching a
// pattern, spread over the hosts (one configuration at a time per host), then writes the
// comparison report. The sweep keeps its workspace (stack files with the host each
// configuration ran on, and its state) in .sweep/, so --resume can skip finished work; on
// --hosts, in .sweep/real/ with the operator's passphrase, or, with PULUMI_BACKEND_URL set,
// its stack files in .sweep/team/ and its stacks in that backend. `npm run sweep -- --help` lists the options.
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { either, flag, inProjectFolder, integerBetween, listOf, oneOf, option, parseCommandOrExit, positiveInteger, positiveNumber, setUp, ValueType } from "../lib/cli";
import { KEPT_WORKSPACES, keptWorkspaceDir, simHostConfig, simWorkspace } from "../lib/workspace";
import { renderOutcomes, runSweep, sweepBackend, SweepHost } from "../components/sweep/sweep";
import { promotionText, type PromoteInput } from "../components/sweep/promote";
import { gridCommand, stackConfig } from "../components/sweep/grid";
import { choose } from "../components/verdict/choose";
import { hostSchema } from "../components/sglang-service/schema";
import { emptyPassphraseRefusal, missingPassphrase } from "../lib/secrets-passphrase";
import { collectRows } from "./report";
import { globMatcher, renderMarkdown, renderSvg } from "../components/benchmark/report";
import { gridPoints, type GridPoint } from "../components/sweep/adaptive/space";
import { DEFAULT_PASSES, runAdaptive } from "../components/sweep/adaptive/run";
import { conclude, DEFAULT_STRATEGY, StrategyOptions } from "../components/sweep/adaptive/strategy";
import { renderAdaptiveMarkdown, renderAdaptiveSvg } from "../components/sweep/adaptive/report";
import { parseSurface } from "../simhost/sim/sglang/surface";

const STACKS_DIR = path.join(REPO_ROOT, "stacks");

function stackNames(): string[] {
  return fs
    .readdirSync(STACKS_DIR)
    .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort();
}

/** The `config` of stacks/Pulumi.<name>.yaml. */
const stackFileConfig = (name: string): Record<string, unknown> => YAML.parse(fs.readFileSync(path.join(STACKS_DIR, `Pulumi.${name}.yaml`), "utf8"))?.config ?? {};

function stackFiles(glob: string): Record<string, Record<string, unknown>> {
  const match = globMatcher(glob);
  return Object.fromEntries(
    stackNames()
      .filter(match)
      .map((name) => [name, stackFileConfig(name)]),
  );
}

/** A pattern that must match at least one stack file. */
const stackFilePattern: ValueType<string> = {
  expects: "a pattern (* any characters, ? one) matching stack names of stacks/Pulumi.<name>.yaml",
  parse(glob) {
    if (glob === "") throw new Error("");
    if (Object.keys(stackFiles(glob)).length === 0) throw new Error(`it matches none of ${stackNames().join(", ")}`);
    return glob;
  },
};

/** A JSON file of the simulated hosts' performance surface (simhost/sim/sglang/surface.ts), checked. */
const surfaceFile: ValueType<unknown> = {
  expects: "a JSON file overriding the simulator's performance surface, e.g. bench/surfaces/two-peaks.json",
  parse(file) {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
      throw new Error((e as Error).message);
    }
    parseSurface(raw);
    return raw;
  },
};

/** A JSON file listing the hosts to sweep on, each checked by the schema of `dflash-sglang:host`. */
const hostsFile: ValueType<SweepHost[]> = {
  expects: 'a JSON file listing hosts: [{"name"?, "address", "port"?, "user"?, "privateKeyPath", "hostKey"}, ...]',
  parse(file) {
    let list: unknown;
    try {
      list = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
      throw new Error((e as Error).message);
    }
    if (!Array.isArray(list) || list.length === 0) throw new Error("it holds no list of hosts");
    return list.map((entry: unknown, i) => {
      const { name, ...host } = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>;
      const checked = hostSchema.safeParse(host);
      if (!checked.success) throw new Error(`host ${i + 1}: ${checked.error.issues.map((issue) => issue.message).join("; ")}`);
      return { name: typeof name === "string" ? name : checked.data.address, config: { "dflash-sglang:host": checked.data } };
    });
  },
};

const INVOCATION = "npm run sweep --";
const COMMAND = {
  summary: [
    "Runs `pulumi up` for every stack file in stacks/ whose name matches --stacks, one configuration",
    "at a time per host, hosts in parallel, then writes bench/out/sweep-report.md and sweep-report.svg.",
    "Without --hosts it boots simulated GPU hosts for the sweep and stops them after.",
    "--strategy adaptive makes its stacks from a grid (--budgets, --topks, --windows) in .sweep/adaptive/ and launches",
    "the configurations that can still be the best for --objective, then those likely in the surface's upper half (where a",
    "narrow peak can hide), until none is left or at --gpu-hours / --launches: the report names the ones it left.",
    "Either ends with the commands that deploy its best configuration: its stack file in stacks/, npx pulumi up, and a fleet's keys.",
  ].join("\n"),
  options: {
    stacks: option({ type: stackFilePattern, placeholder: "GLOB", description: "the stacks to sweep", default: "*" }),
    hosts: option({ type: inProjectFolder(hostsFile), placeholder: "FILE", description: "sweep on these hosts instead of simulated ones" }),
    "sim-hosts": option({ type: positiveInteger, placeholder: "N", description: "boot N simulated hosts for the sweep", default: "2", excludes: ["hosts"] }),
    "sim-load-seconds": option({ type: positiveNumber, placeholder: "S", description: "the simulated weight load time, in seconds", default: "6", excludes: ["hosts"] }),
    "sim-surface": option({ type: inProjectFolder(surfaceFile), placeholder: "FILE", description: "the simulated hosts' performance surface (JSON, see bench/surfaces/)", excludes: ["hosts"] }),
    resume: flag("full: skip stacks whose outputs already hold a benchmark of their current configuration (the same deployment, benchmark settings and benchmark code); adaptive: take the launches of the interrupted sweep from its journal and its stacks' outputs, launching none of them again"),
    "keep-going": flag("record a failed configuration with its cause and go on with the others"),
    strategy: option({ type: oneOf(["full", "adaptive"] as const), placeholder: "KIND", description: "full: every stack of --stacks; adaptive: launch only the configurations of the grid below that can still be the best", default: "full" }),
    budgets: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "adaptive: the grid's DDTree node budgets", default: "4,6,8,12,16,24,32" }),
    topks: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "adaptive: the grid's DDTree top-k values", default: "2,4,8" }),
    windows: option({ type: listOf(either(positiveInteger, oneOf(["none"]))), placeholder: "LIST", description: "adaptive: the grid's drafter windows in tokens", default: "2048,none" }),
    "compact-cache": option({ type: oneOf(["auto", "on", "off"]), placeholder: "MODE", description: "adaptive: compact the drafter's windowed cache; auto: whenever there is a window", default: "auto" }),
    objective: option({ type: oneOf(["short", "long", "mix"] as const), placeholder: "KIND", description: "adaptive: what to maximise: decode tok/s at short context, at --long-context, or a mix (--long-weight)", default: "short" }),
    "long-context": option({ type: positiveInteger, placeholder: "TOKENS", description: "adaptive: the long context the objective and the passes measure", default: "8192" }),
    "long-weight": option({ type: { expects: "a number from 0 to 1", parse: (t: string) => { const v = Number(t); if (t.trim() === "" || !(v >= 0 && v <= 1)) throw new Error(""); return v; } }, placeholder: "W", description: "adaptive, --objective mix: the long context's share", default: "0.5" }),
    "gpu-hours": option({ type: positiveNumber, placeholder: "H", description: "adaptive: stop before a launch would pass this many GPU-hours (all hosts together)", excludes: ["launches"] }),
    launches: option({ type: positiveInteger, placeholder: "N", description: "adaptive: stop after this many launches", excludes: ["gpu-hours"] }),
    seed: option({ type: integerBetween(1, 1_000_000), placeholder: "N", description: "adaptive: the seed of the first design", default: "1" }),
    relaunches: option({ type: integerBetween(0, 20), placeholder: "N", description: "adaptive: before it stops, launch a configuration of a tie it cannot separate again, up to N times in all (each a stack of its own, `<point>-launch-<n>`); the report says what they measured of the launch-to-launch offset", default: String(DEFAULT_STRATEGY.relaunches) }),
  },
  notes: [
    "Ctrl-C finishes the configurations in progress, starts no more, and writes the report; Ctrl-C again aborts.",
    "SIGTERM and SIGHUP abort at once. However the sweep ends, it stops the simulated hosts it booted before it exits",
    "(after a signal with 128 + the signal's number: 130, 143, 129).",
  ].join("\n"),
};

const { options } = parseCommandOrExit(INVOCATION, COMMAND);
/** Options that only the adaptive strategy reads, and the one only the full grid reads: refused with the other strategy. */
const ADAPTIVE_ONLY = ["budgets", "topks", "windows", "compact-cache", "objective", "long-context", "long-weight", "gpu-hours", "launches", "seed", "relaunches"];
{
  const given = (name: string) => process.argv.slice(2).some((a) => a === `--${name}` || a.startsWith(`--${name}=`));
  const wrong = options.strategy === "full" ? ADAPTIVE_ONLY.filter(given) : given("stacks") ? ["stacks"] : [];
  if (wrong.length) {
    process.stderr.write(`npm run sweep: --${wrong[0]} is ${options.strategy === "full" ? "an option of --strategy adaptive" : "an option of --strategy full (the adaptive sweep makes its stacks from the grid options)"}\nSee \`${INVOCATION} --help\` for what is valid.\n`);
    process.exit(2);
  }
  if (options.strategy === "adaptive" && gridPoints({ budgets: options.budgets, topks: options.topks, windows: options.windows, compactCache: options["compact-cache"] }).length < 2) {
    process.stderr.write(`npm run sweep: the grid of --budgets, --topks and --windows has fewer than 2 valid configurations (topk above budget and windows under the draft block are skipped)\nSee \`${INVOCATION} --help\` for what is valid.\n`);
    process.exit(2);
  }
}
let stopRequested = false;
const abort = new AbortController();

async function sweep(hosts: OwnedHosts): Promise<number> {
  const glob = options.stacks;
  const stacks = stackFiles(glob);
  // On real hosts the secrets are the operator's: their passphrase (never an empty one) or
  // their stacks' provider; only a sweep on simulated hosts keeps the workspace's fixed one.
  const onRealHosts = options.hosts !== undefined;
  if (onRealHosts) {
    const team = sweepBackend(true, process.env.PULUMI_BACKEND_URL) !== undefined;
    const refusal = emptyPassphraseRefusal(process.env) ?? (team ? undefined : missingPassphrase(process.env));
    if (refusal) throw new Error(`${refusal} Nothing was deployed.`);
  }
  setUp({ hosts: options.hosts === undefined });
  let sweepHosts: SweepHost[];
  if (options.hosts) {
    sweepHosts = options.hosts;
  } else {
    const n = options["sim-hosts"];
    const load = options["sim-load-seconds"];
    process.stdout.write(`booting ${n} simulated GPU hosts (load time ${load} s)\n`);
    sweepHosts = [];
    for (let i = 0; i < n; i++) {
      const name = `sweep-${process.pid}-${i + 1}`;
      const h = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: load, warmupSeconds: 0.5, ...(options["sim-surface"] !== undefined ? { surface: options["sim-surface"] } : {}) } });
      sweepHosts.push({ name, config: simHostConfig(h) });
    }
  }
  // The engine in a session of its own: a Ctrl-C at the terminal reaches this script only,
  // so the updates in progress finish (or, on an abort, are cancelled through `signal`).
  // See sweepBackend. With a team's backend, secrets use your passphrase (or provider), and
  // the stack files take the team's secrets settings: they get a folder of their own.
  const shared = sweepBackend(options.hosts !== undefined, process.env.PULUMI_BACKEND_URL);
  if (!options.hosts && process.env.PULUMI_BACKEND_URL) {
    process.stdout.write(`PULUMI_BACKEND_URL is set, but a sweep on simulated hosts keeps its state in ${KEPT_WORKSPACES.sweep}/state, away from the stacks there\n`);
  }
  const kept = shared ? path.join(keptWorkspaceDir("sweep"), "team") : onRealHosts ? path.join(keptWorkspaceDir("sweep"), "real") : keptWorkspaceDir("sweep");
  // The adaptive sweep's stacks are made from the grid in a workspace of their own (no stack files in stacks/).
  const dir = options.strategy === "adaptive" ? path.join(kept, "adaptive") : kept;
  const ws = simWorkspace({}, { dir, backendUrl: shared, realHosts: onRealHosts, engineInOwnSession: true });
  if (options.strategy === "adaptive") return adaptive(ws, sweepHosts);
  process.stdout.write(`sweeping ${Object.keys(stacks).length} configurations over ${sweepHosts.length} host(s)\n`);
  const outcomes = await runSweep({
    ws,
    stacks,
    hosts: sweepHosts,
    resume: options.resume,
    hostsAreFresh: options.hosts === undefined,
    keepGoing: options["keep-going"],
    progress: (host, line) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] [${host}] ${line}\n`),
    shouldStop: () => stopRequested,
    signal: abort.signal,
  });
  const rows = await collectRows(ws.dir, ws.env, glob);
  const outDir = path.join(REPO_ROOT, "bench", "out");
  fs.mkdirSync(outDir, { recursive: true });
  const md = `# Sweep report\n\nStacks matching \`${glob}\` on ${sweepHosts.map((h) => h.name).join(", ")}, ${new Date().toISOString()}.\n\n## Runs\n\n${renderOutcomes(outcomes)}\n## Results\n\n${renderMarkdown(rows)}\n![Decode tokens/s at short and long context with their spread and speedup, acceptance length and coding check by configuration](sweep-report.svg)\n`;
  // What to run to deploy the answer: the stack file it swept, pulumi up, a fleet's keys.
  const choice = choose(rows);
  const top = choice.kind === "winner" ? choice.stack : choice.kind === "tie" ? choice.stacks[0] : undefined;
  const promote = promotionText(top === undefined ? undefined : { stack: top, config: stacks[top] ?? {}, existing: stacks[top], ...(choice.kind === "tie" ? { tie: choice.stacks } : {}) });
  fs.writeFileSync(path.join(outDir, "sweep-report.md"), `${md}\n${promote}`);
  fs.writeFileSync(path.join(outDir, "sweep-report.svg"), renderSvg(rows));
  process.stdout.write(`\n${md}\nwrote ${path.join(outDir, "sweep-report.md")} and sweep-report.svg\n\n${promote}`);
  return outcomes.some((o) => o.status === "failed") ? 1 : 0;
}

async function adaptive(ws: ReturnType<typeof simWorkspace>, sweepHosts: SweepHost[]): Promise<number> {
  const grid = { budgets: options.budgets, topks: options.topks, windows: options.windows, compactCache: options["compact-cache"] };
  const points = gridPoints(grid);
  const longContext = options["long-context"];
  const passes = { short: { ...DEFAULT_PASSES.short, longContextTokens: [longContext] }, full: { ...DEFAULT_PASSES.full, longContextTokens: [longContext] } };
  const budget = options["gpu-hours"] !== undefined ? { gpuSeconds: options["gpu-hours"] * 3600 } : options.launches !== undefined ? { launches: options.launches } : {};
  const strategy: StrategyOptions = { ...DEFAULT_STRATEGY, objective: { kind: options.objective, longWeight: options.objective === "mix" ? options["long-weight"] : options.objective === "long" ? 1 : 0 }, budget, seed: options.seed, relaunches: options.relaunches };
  process.stdout.write(`adaptive sweep of ${points.length} configurations over ${sweepHosts.length} host(s), workspace ${path.relative(REPO_ROOT, ws.dir)}\n`);
  const run = await runAdaptive({
    ws,
    points,
    mode: "adaptive",
    strategy,
    passes,
    longContextTokens: longContext,
    base: {},
    hosts: sweepHosts,
    resume: options.resume,
    keepGoing: options["keep-going"],
    hostsAreFresh: options.hosts === undefined,
    progress: (host, line) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] [${host}] ${line}\n`),
    shouldStop: () => stopRequested,
    signal: abort.signal,
  });
  const report = { points, records: run.records, conclusion: conclude(points, run.records, strategy), objective: strategy.objective, longContextTokens: longContext, why: run.why, resumed: run.resumed };
  const outDir = path.join(REPO_ROOT, "bench", "out");
  fs.mkdirSync(outDir, { recursive: true });
  const md = `# Adaptive sweep report\n\nOn ${sweepHosts.map((h) => h.name).join(", ")}, ${new Date().toISOString()}.\n\n${renderAdaptiveMarkdown(report)}\n![Short vs long context decode tok/s of the measured configurations, the Pareto front and the best (or the tie's first); GPU hours spent against measuring the full grid once](sweep-report.svg)\n`;
  // Its stacks live in the sweep's workspace: the answer's stack file is the one `npm run grid` writes.
  const point = report.conclusion.chosen?.point;
  const promote = promotionText(point && promoteAdaptive(point, report.conclusion.tied));
  fs.writeFileSync(path.join(outDir, "sweep-report.md"), `${md}\n${promote}`);
  fs.writeFileSync(path.join(outDir, "sweep-report.svg"), renderAdaptiveSvg(report));
  process.stdout.write(`\n${md}\nwrote ${path.join(outDir, "sweep-report.md")} and sweep-report.svg\n\n${promote}`);
  return run.records.some((r) => r.failure) && !options["keep-going"] ? 1 : report.conclusion.chosen ? 0 : 1;
}

/** What promotes an adaptive sweep's answer: its grid stack file (grid.ts), the command that writes it, and the file of that name in stacks/ if any. */
function promoteAdaptive(point: GridPoint, tied: string[]): PromoteInput {
  const c = { budget: point.budget, topk: point.topk, window: point.window, compactCache: point.compactCache };
  return { stack: point.name, config: stackConfig(c), write: gridCommand(c), existing: stackNames().includes(point.name) ? stackFileConfig(point.name) : undefined, ...(tied.length > 1 ? { tie: tied } : {}) };
}

void runWithHosts(sweep, {
  name: "sweep",
  onInterrupt() {
    stopRequested = true;
    process.stdout.write("\nstopping after the configurations in progress (Ctrl-C again to abort now)\n");
  },
  onAbort: () => abort.abort(),
});
