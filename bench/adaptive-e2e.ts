// Benchmark: one surface end to end through real `pulumi up` on simulated hosts, the full
// grid and the adaptive sweep side by side (the same code path: components/sweep/adaptive/
// run.ts), each in a fresh workspace on the same hosts. Writes the full grid's per-
// configuration figures (the recording bench/adaptive-sweep.ts can replay) and both runs'
// launches, GPU time and choice to bench/results/adaptive-e2e-<surface>.json.
// The hosts keep the seed's ratio of weight loading to benchmark, scaled down: they decode K
// times as fast as the model (--speed, speedScale) and load in 420 / K seconds (--load).
// Run: npx tsx bench/adaptive-e2e.ts [--surface bench/surfaces/single-peak.json] [--modes full,adaptive] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { simHostConfig, simWorkspace } from "../lib/workspace";
import { inProjectFolder, integerBetween, listOf, oneOf, option, parseCommandOrExit, positiveInteger, positiveNumber, setUp, text } from "../lib/cli";
import { gridPoints } from "../components/sweep/adaptive/space";
import { DEFAULT_PASSES, runAdaptive } from "../components/sweep/adaptive/run";
import { conclude, DEFAULT_STRATEGY, spentSeconds, StrategyOptions } from "../components/sweep/adaptive/strategy";
import { parseSurface } from "../simhost/sim/sglang/surface";
import { GRID, readSurfaceFile } from "./adaptive/grid";

const { options } = parseCommandOrExit("npx tsx bench/adaptive-e2e.ts", {
  summary: "Runs the full grid and the adaptive sweep of one surface through pulumi up on simulated hosts, side by side,\nand writes bench/results/adaptive-e2e-<surface>.json (the full grid's figures are the replay's recording).",
  options: {
    surface: option({ type: inProjectFolder(text), placeholder: "FILE", description: "the simulated hosts' performance surface (JSON)", default: "bench/surfaces/single-peak.json" }),
    speed: option({ type: positiveNumber, placeholder: "K", description: "the simulated hosts decode and prefill K times as fast as the performance model (speedScale), so that a benchmark is K times shorter", default: "4" }),
    load: option({ type: positiveNumber, placeholder: "S", description: "simulated weight load time, in seconds (the seed's 420 s at the same scale: 420 / K)", default: "105" }),
    hosts: option({ type: positiveInteger, placeholder: "N", description: "simulated hosts", default: "2" }),
    points: option({ type: integerBetween(1, gridPoints(GRID).length), placeholder: "N", description: "only the first N configurations of the grid (a smoke run)" }),
    modes: option({ type: listOf(oneOf(["full", "adaptive"] as const)), placeholder: "LIST", description: "the runs, in order", default: "full,adaptive" }),
    seed: option({ type: positiveInteger, placeholder: "N", description: "the adaptive sweep's seed (its first design)", default: "1" }),
  },
});

async function main(owned: OwnedHosts): Promise<void> {
  setUp({ hosts: true });
  const surfaceFile = options.surface;
  const surfaceJson = readSurfaceFile(surfaceFile);
  parseSurface(surfaceJson);
  const name = path.basename(surfaceFile, ".json");
  const points = gridPoints(GRID).slice(0, options.points);
  const strategy: StrategyOptions = { ...DEFAULT_STRATEGY, objective: { kind: "short", longWeight: 0 }, budget: {}, seed: options.seed };
  const names = Array.from({ length: options.hosts }, (_, i) => `ae2e-${process.pid}-${i + 1}`);
  const infos = await Promise.all(names.map((n) => owned.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: options.load, warmupSeconds: 0.5, speedScale: options.speed, surface: surfaceJson } })));
  const hosts = infos.map((h) => ({ name: h.name, config: simHostConfig(h) }));
  const out: Record<string, unknown> = { command: `npx tsx bench/adaptive-e2e.ts ${process.argv.slice(2).join(" ")}`.trim(), surface: name, surfaceSpec: surfaceJson, loadSeconds: options.load, speedScale: options.speed, hosts: options.hosts, points: points.map((p) => p.name), passes: DEFAULT_PASSES, strategy, started: new Date().toISOString() };
  const file = path.join(REPO_ROOT, "bench", "results", `adaptive-e2e-${name}${options.points ? `-${options.points}` : ""}.json`);
  // A run of one mode keeps the other mode's run of the same set-up (run them one after the other).
  if (fs.existsSync(file)) {
    const before = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>;
    const same = (k: string) => JSON.stringify(before[k]) === JSON.stringify(out[k]);
    if (["surfaceSpec", "loadSeconds", "speedScale", "hosts", "points", "passes"].every(same)) {
      for (const mode of ["full", "adaptive"]) if (!options.modes.includes(mode as "full") && before[mode]) out[mode] = before[mode];
      out.commands = [...((before.commands as string[] | undefined) ?? [before.command as string]), out.command];
    }
  }
  for (const mode of options.modes) {
    const ws = simWorkspace({});
    const t0 = Date.now();
    try {
      const run = await runAdaptive({
        ws,
        points,
        mode,
        strategy,
        passes: DEFAULT_PASSES,
        longContextTokens: 8192,
        base: { "dflash-sglang:safety": { stableSeconds: 0 } },
        hosts,
        resume: false,
        keepGoing: true,
        hostsAreFresh: true,
        progress: (host, line) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] [${mode}] [${host}] ${line}\n`),
        shouldStop: () => false,
      });
      const c = conclude(points, run.records, strategy);
      out[mode] = { started: new Date(t0).toISOString(), strategy: mode === "adaptive" ? strategy : undefined, wallSeconds: (Date.now() - t0) / 1000, why: run.why, gpuSeconds: spentSeconds(run.records), launches: run.records.length, chosen: c.chosen?.point.name ?? null, confidence: c.confidence, records: run.records };
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, JSON.stringify(out, null, 1) + "\n");
      process.stderr.write(`${mode}: ${run.records.length} launches, ${spentSeconds(run.records).toFixed(0)} GPU s, chose ${c.chosen?.point.name} (${run.why})\n`);
    } finally {
      ws.cleanup();
    }
  }
  process.stdout.write(`wrote ${path.relative(REPO_ROOT, file)}\n`);
}

void runWithHosts(main, { name: "adaptive-e2e" });
