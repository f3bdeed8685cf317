// Benchmark: variants of the adaptive strategy's defaults on the training families only (never
// the held-out ones of bench/adaptive/families.ts), beside the defaults: what each saves in GPU
// time and what it costs in regret (the answer's top, bench/adaptive/regret.ts). The evidence
// behind keeping DEFAULT_STRATEGY as it is (docs/design/sweeps.md).
// Writes bench/results/adaptive-variants.{md,json}.
// Run: npx tsx bench/adaptive-variants.ts [--seeds 1,2] [--surfaces 300] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { listOf, option, parseCommandOrExit, positiveInteger } from "../lib/cli";
import { gridPoints } from "../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, type StrategyOptions } from "../components/sweep/adaptive/strategy";
import { GRID, MODEL_COSTS } from "./adaptive/grid";
import { baselinesAt, evaluateFamily } from "./adaptive/family-eval";
import { FAMILY_SURFACES, TRAINING_FAMILY_SEEDS } from "./adaptive/families";
import { quantile, regretStats } from "./adaptive/regret";

const COMMAND = "npx tsx bench/adaptive-variants.ts";
const { options } = parseCommandOrExit(COMMAND, {
  summary: "Variants of the adaptive strategy's defaults replayed on the training families, with the defaults and the full grid;\nwrites bench/results/adaptive-variants.{md,json}.",
  options: {
    seeds: option({ type: listOf(positiveInteger), placeholder: "N,N", description: "training family seeds (bench/adaptive/families.ts)", default: TRAINING_FAMILY_SEEDS.join(",") }),
    surfaces: option({ type: positiveInteger, placeholder: "N", description: "surfaces per family", default: String(FAMILY_SURFACES) }),
  },
});

type Variant = Partial<Omit<StrategyOptions, "objective" | "budget" | "seed">>;
const VARIANTS: Record<string, Variant> = {
  defaults: {},
  "repeats to 0.6 % (repeatSe 0.006)": { repeatSe: 0.006 },
  "at most 3 full passes": { maxFullPasses: 3 },
  "stop at 25 %": { stopChance: 0.25 },
  "stop at 10 %": { stopChance: 0.1 },
  "first design of 6": { initialLaunches: 6 },
  "neighbours at 20 %": { neighbourChance: 0.2 },
  "repeatSe 0.006, 3 full passes, stop at 20 %": { repeatSe: 0.006, maxFullPasses: 3, stopChance: 0.2 },
};

const points = gridPoints(GRID);
const grid = { "full grid": baselinesAt(MODEL_COSTS, 420)["full grid"] };
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const started = Date.now();
const rows: Record<string, unknown>[] = [];
const lines = [
  "# Adaptive sweep: variants of its defaults (training families only)",
  "",
  `Command: \`${COMMAND} --seeds ${options.seeds.join(",")} --surfaces ${options.surfaces}\` (${new Date().toISOString()}).`,
  "",
  `Training families ${options.seeds.join(", ")} (bench/adaptive/families.ts), ${options.surfaces} surfaces each, 4.2 % request noise, 1.5 % launch offset, 2 hosts, a launch 420 s, a full pass ${MODEL_COSTS.fullPassSeconds} s. The answer's top scored by regret (bench/adaptive/regret.ts). Held-out families are not run here.`,
  "",
  "| variant | mean regret | 95th percentile regret | top within 3 % | isolated peak: within 3 % | needle: within 3 % | median GPU time / full grid | 90th percentile |",
  "|---|---:|---:|---:|---:|---:|---:|---:|",
];
let gridLine = "";
for (const [name, v] of Object.entries(VARIANTS)) {
  const runs = options.seeds.flatMap((seed) => evaluateFamily(points, seed, options.surfaces, { requestSd: 0.042, launchSd: 0.015 }, MODEL_COSTS, 420, { ...DEFAULT_STRATEGY, ...v, objective: { kind: "short", longWeight: 0.5 }, budget: {} }, name === "defaults" ? grid : {}, 2).runs);
  const line = (policy: string, label: string) => {
    const a = runs.filter((r) => r.policy === policy);
    const s = regretStats(a.map((r) => r.regret));
    const feature = (f: string) => regretStats(a.filter((r) => r.features.includes(f)).map((r) => r.regret)).within3;
    const fr = a.map((r) => r.fraction);
    rows.push({ variant: label, options: v, ...s, isolated: feature("isolated-peak"), needle: feature("needle"), medianGpu: quantile(fr, 0.5), p90Gpu: quantile(fr, 0.9) });
    return `| ${label} | ${pct(s.meanRegret)} | ${pct(s.p95Regret)} | ${pct(s.within3)} | ${pct(feature("isolated-peak"))} | ${pct(feature("needle"))} | ${pct(quantile(fr, 0.5))} | ${pct(quantile(fr, 0.9))} |`;
  };
  lines.push(line("adaptive", name));
  if (name === "defaults") gridLine = line("full grid", "full grid, one pass each");
}
lines.push(gridLine, "", `${((Date.now() - started) / 1000).toFixed(0)} s.`);
const dir = path.join(REPO_ROOT, "bench", "results");
fs.writeFileSync(path.join(dir, "adaptive-variants.md"), `${lines.join("\n")}\n`);
fs.writeFileSync(path.join(dir, "adaptive-variants.json"), `${JSON.stringify({ command: COMMAND, seeds: options.seeds, surfaces: options.surfaces, rows }, null, 1)}\n`);
process.stdout.write(`${lines.join("\n")}\n`);
