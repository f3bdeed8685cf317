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
import { flag, inProjectFolder, option, parseCommandOrExit, positiveInteger, positiveNumber, setUp, ValueType } from "../lib/cli";
import { KEPT_WORKSPACES, keptWorkspaceDir, simHostConfig, simWorkspace } from "../lib/workspace";
import { renderOutcomes, runSweep, sweepBackend, SweepHost } from "../components/sweep/sweep";
import { hostSchema } from "../components/sglang-service/schema";
import { emptyPassphraseRefusal, missingPassphrase } from "../lib/secrets-passphrase";
import { collectRows } from "./report";
import { globMatcher, renderMarkdown, renderSvg } from "../components/benchmark/report";

const STACKS_DIR = path.join(REPO_ROOT, "stacks");

function stackNames(): string[] {
  return fs
    .readdirSync(STACKS_DIR)
    .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort();
}

function stackFiles(glob: string): Record<string, Record<string, unknown>> {
  const match = globMatcher(glob);
  return Object.fromEntries(
    stackNames()
      .filter(match)
      .map((name) => [name, YAML.parse(fs.readFileSync(path.join(STACKS_DIR, `Pulumi.${name}.yaml`), "utf8"))?.config ?? {}]),
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
  ].join("\n"),
  options: {
    stacks: option({ type: stackFilePattern, placeholder: "GLOB", description: "the stacks to sweep", default: "*" }),
    hosts: option({ type: inProjectFolder(hostsFile), placeholder: "FILE", description: "sweep on these hosts instead of simulated ones" }),
    "sim-hosts": option({ type: positiveInteger, placeholder: "N", description: "boot N simulated hosts for the sweep", default: "2", excludes: ["hosts"] }),
    "sim-load-seconds": option({ type: positiveNumber, placeholder: "S", description: "the simulated weight load time, in seconds", default: "6", excludes: ["hosts"] }),
    resume: flag("skip stacks whose outputs already hold a benchmark of their current configuration: the same deployment, benchmark settings and benchmark code"),
    "keep-going": flag("record a failed configuration with its cause and go on with the others"),
  },
  notes: [
    "Ctrl-C finishes the configurations in progress, starts no more, and writes the report; Ctrl-C again aborts.",
    "SIGTERM and SIGHUP abort at once. However the sweep ends, it stops the simulated hosts it booted before it exits",
    "(after a signal with 128 + the signal's number: 130, 143, 129).",
  ].join("\n"),
};

const { options } = parseCommandOrExit(INVOCATION, COMMAND);
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
      const h = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: load, warmupSeconds: 0.5 } });
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
  const dir = shared ? path.join(keptWorkspaceDir("sweep"), "team") : onRealHosts ? path.join(keptWorkspaceDir("sweep"), "real") : keptWorkspaceDir("sweep");
  const ws = simWorkspace({}, { dir, backendUrl: shared, realHosts: onRealHosts, engineInOwnSession: true });
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
  fs.writeFileSync(path.join(outDir, "sweep-report.md"), md);
  fs.writeFileSync(path.join(outDir, "sweep-report.svg"), renderSvg(rows));
  process.stdout.write(`\n${md}\nwrote ${path.join(outDir, "sweep-report.md")} and sweep-report.svg\n`);
  return outcomes.some((o) => o.status === "failed") ? 1 : 0;
}

void runWithHosts(sweep, {
  name: "sweep",
  onInterrupt() {
    stopRequested = true;
    process.stdout.write("\nstopping after the configurations in progress (Ctrl-C again to abort now)\n");
  },
  onAbort: () => abort.abort(),
});
