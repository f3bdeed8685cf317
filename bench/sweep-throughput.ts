// Benchmark: sweep throughput, configurations per hour on 1, 2 and 4 simulated hosts at a
// fixed simulated load time, and the scaling efficiency against linear. Each sweep uses a
// fresh workspace (every configuration is a first deploy on its host, then a
// reconfiguration). Writes bench/results/sweep-throughput.{json,md}.
// Run: npx tsx bench/sweep-throughput.ts [--configs 8] [--load 20] [--hosts 1,2,4] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { simHostConfig, simWorkspace } from "../lib/workspace";
import { runSweep } from "../components/sweep/sweep";
import { gridStacks } from "../components/sweep/grid";
import { integerBetween, listOf, option, parseCommandOrExit, positiveInteger, positiveNumber } from "../lib/cli";

const GRID = gridStacks({ budgets: [4, 8, 12, 16], topks: [4], windows: [2048, 4096, 8192, "none"], compactCache: "auto" }).stacks;
const { options } = parseCommandOrExit("npx tsx bench/sweep-throughput.ts", {
  summary: "Measures sweep throughput (configurations per hour) on 1, 2, 4 ... simulated hosts at a fixed simulated\nload time, and the scaling against linear. Writes bench/results/sweep-throughput.{json,md}.",
  options: {
    configs: option({ type: integerBetween(1, GRID.length), placeholder: "N", description: "configurations per sweep, from a DDTree grid", default: "8" }),
    load: option({ type: positiveNumber, placeholder: "S", description: "simulated weight load time, in seconds", default: "20" }),
    hosts: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "host counts, one sweep each", default: "1,2,4" }),
  },
});
const CONFIGS = options.configs;
const LOAD = options.load;
const HOST_COUNTS = options.hosts;

async function main(owned: OwnedHosts): Promise<void> {
  const grid = GRID.slice(0, CONFIGS);
  const stackConfigs = Object.fromEntries(
    grid.map((g) => [g.name, { ...YAML.parse(g.yaml).config, "dflash-sglang:safety": { stableSeconds: 0 }, "dflash-sglang:benchmark": { enabled: false } }]),
  );
  const names = Array.from({ length: Math.max(...HOST_COUNTS) }, (_, i) => `tput-${process.pid}-${i + 1}`);
  const started = await Promise.all(names.map((n) => owned.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: LOAD, warmupSeconds: 0.5 } })));
  const rows: { hosts: number; seconds: number; configsPerHour: number; failed: number }[] = [];
  try {
    for (const n of HOST_COUNTS) {
      const ws = simWorkspace({});
      try {
        const t0 = Date.now();
        const outcomes = await runSweep({
          ws,
          stacks: stackConfigs,
          hosts: started.slice(0, n).map((h) => ({ name: h.name, config: simHostConfig(h) })),
          resume: false,
          keepGoing: true,
          progress: (host, line) => process.stderr.write(`[${n} hosts] [${host}] ${line}\n`),
          shouldStop: () => false,
        });
        const seconds = (Date.now() - t0) / 1000;
        rows.push({ hosts: n, seconds, configsPerHour: (CONFIGS / seconds) * 3600, failed: outcomes.filter((o) => o.status !== "succeeded").length });
      } finally {
        ws.cleanup();
      }
    }
  } finally {
    await Promise.all(names.map((n) => hosts.stop(n)));
  }
  const base = rows.find((r) => r.hosts === 1)?.configsPerHour ?? rows[0].configsPerHour / rows[0].hosts;
  const out = { command: `npx tsx bench/sweep-throughput.ts --configs ${CONFIGS} --load ${LOAD} --hosts ${HOST_COUNTS.join(",")}`, date: new Date().toISOString(), machine: "2 cores, 24 GB", rows: rows.map((r) => ({ ...r, scaling: r.configsPerHour / (base * r.hosts) })) };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "sweep-throughput.json"), JSON.stringify(out, null, 2) + "\n");
  const md = [
    "# Sweep throughput",
    "",
    `Command: \`${out.command}\` (${out.date}, ${out.machine}).`,
    "",
    `${CONFIGS} configurations (DDTree grid), simulated weight load ${LOAD} s, benchmark resource and stability window off,`,
    "each configuration a full `pulumi up` through the Automation API. Scaling = configs/hour / (hosts x configs/hour on 1 host).",
    "One sweep per host count (each takes minutes; the per-configuration times inside it vary by under a second).",
    "",
    "| hosts | sweep s | configs/hour | scaling vs linear | failed |",
    "|---:|---:|---:|---:|---:|",
    ...out.rows.map((r) => `| ${r.hosts} | ${r.seconds.toFixed(1)} | ${r.configsPerHour.toFixed(1)} | ${r.scaling.toFixed(3)} | ${r.failed} |`),
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, "sweep-throughput.md"), md);
  process.stdout.write(md);
}

void runWithHosts(main, { name: "sweep throughput benchmark" });
