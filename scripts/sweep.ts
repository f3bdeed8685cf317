// `npm run sweep -- [--stacks GLOB] [--hosts hosts.json | --sim-hosts N] [--resume] [--keep-going]`
//
// Runs `up` for every stack file in stacks/ matching GLOB, spread over the hosts (one
// configuration at a time per host), then writes the comparison report. The sweep keeps
// its workspace (stack files with the host each configuration ran on, and, unless
// PULUMI_BACKEND_URL is set, its state) in .sweep/, so --resume can skip finished work.
//   --hosts FILE     JSON list of {"name", "address", "port"?, "user"?, "privateKeyPath", "hostKey"}
//   --sim-hosts N    boot N simulated hosts for the sweep (the default: 2) and stop them after
//   --sim-load-seconds S   simulated weight load time (default 6)
// Ctrl-C: finishes the configurations in progress, starts no more, writes the report.
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import * as hosts from "../simhost/hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { simHostConfig, simWorkspace } from "../lib/workspace";
import { renderOutcomes, runSweep, SweepHost } from "../components/sweep/sweep";
import { collectRows } from "./report";
import { globMatcher, renderMarkdown, renderSvg } from "../components/benchmark/report";

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}
const flag = (name: string) => process.argv.includes(`--${name}`);

function stackFiles(glob: string): Record<string, Record<string, unknown>> {
  const match = globMatcher(glob);
  const out: Record<string, Record<string, unknown>> = {};
  for (const f of fs.readdirSync(path.join(REPO_ROOT, "stacks")).sort()) {
    const name = /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1];
    if (name && match(name)) out[name] = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "stacks", f), "utf8"))?.config ?? {};
  }
  return out;
}

function hostsFromFile(file: string): SweepHost[] {
  const list = JSON.parse(fs.readFileSync(file, "utf8")) as { name?: string; address: string; port?: number; user?: string; privateKeyPath: string; hostKey: string }[];
  return list.map((h) => ({
    name: h.name ?? h.address,
    config: { "dflash-sglang:host": { address: h.address, port: h.port ?? 22, user: h.user ?? "root", privateKeyPath: h.privateKeyPath, hostKey: h.hostKey } },
  }));
}

async function main(): Promise<void> {
  const glob = arg("stacks") ?? "*";
  const stacks = stackFiles(glob);
  if (Object.keys(stacks).length === 0) throw new Error(`no stack file in stacks/ matches "${glob}"`);
  const started: string[] = [];
  let sweepHosts: SweepHost[];
  const hostsFile = arg("hosts");
  if (hostsFile) {
    sweepHosts = hostsFromFile(hostsFile);
  } else {
    const n = Number(arg("sim-hosts") ?? "2");
    const load = Number(arg("sim-load-seconds") ?? "6");
    process.stdout.write(`booting ${n} simulated GPU hosts (load time ${load} s)\n`);
    sweepHosts = [];
    for (let i = 0; i < n; i++) {
      const name = `sweep-${process.pid}-${i + 1}`;
      const h = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: load, warmupSeconds: 0.5 } });
      started.push(name);
      sweepHosts.push({ name, config: simHostConfig(h) });
    }
  }
  const dir = path.join(REPO_ROOT, ".sweep");
  const ws = simWorkspace({}, { dir });
  let stopping = false;
  process.on("SIGINT", () => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stdout.write("\nstopping after the configurations in progress (Ctrl-C again to abort now)\n");
  });
  try {
    process.stdout.write(`sweeping ${Object.keys(stacks).length} configurations over ${sweepHosts.length} host(s)\n`);
    const outcomes = await runSweep({
      ws,
      stacks,
      hosts: sweepHosts,
      resume: flag("resume"),
      keepGoing: flag("keep-going"),
      progress: (host, line) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] [${host}] ${line}\n`),
      shouldStop: () => stopping,
    });
    const rows = await collectRows(ws.dir, ws.env, glob);
    const outDir = path.join(REPO_ROOT, "bench", "out");
    fs.mkdirSync(outDir, { recursive: true });
    const md = `# Sweep report\n\nStacks matching \`${glob}\` on ${sweepHosts.map((h) => h.name).join(", ")}, ${new Date().toISOString()}.\n\n## Runs\n\n${renderOutcomes(outcomes)}\n## Results\n\n${renderMarkdown(rows)}\n![tokens/s by configuration](sweep-report.svg)\n`;
    fs.writeFileSync(path.join(outDir, "sweep-report.md"), md);
    fs.writeFileSync(path.join(outDir, "sweep-report.svg"), renderSvg(rows));
    process.stdout.write(`\n${md}\nwrote ${path.join(outDir, "sweep-report.md")} and sweep-report.svg\n`);
    if (outcomes.some((o) => o.status === "failed")) process.exitCode = 1;
  } finally {
    for (const name of started) await hosts.stop(name);
  }
}

main().catch((e) => {
  process.stderr.write(`sweep failed: ${(e as Error).message}\n`);
  process.exit(1);
});
