// Benchmark: variants of the adaptive strategy's defaults on the training families only (the
// held-out ones of bench/adaptive/families.ts are refused), each beside the full grid measured
// once on the same surfaces: what each saves in GPU time and what it costs in regret (the
// answer's top, bench/adaptive/regret.ts), with the paired differences (variant minus grid,
// points, 95 % bootstrap intervals) that issue 62's targets are stated in. The evidence behind
// DEFAULT_STRATEGY (docs/design/sweeps.md).
// Without --variants it runs the fixed list below; --out NAME writes bench/results/NAME.{md,json}.
// Run: npx tsx bench/adaptive-variants.ts [--variants JSON] [--seeds 1,2] [--surfaces 300] [--out NAME] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { json, listOf, option, parseCommandOrExit, positiveInteger, text, type ValueType } from "../lib/cli";
import { gridPoints } from "../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY, type StrategyOptions } from "../components/sweep/adaptive/strategy";
import { GRID, MODEL_COSTS } from "./adaptive/grid";
import { baselinesAt, evaluateFamily, type FamilyRun } from "./adaptive/family-eval";
import { FAMILY_SURFACES, HELD_OUT_FAMILY_SEEDS, TRAINING_FAMILY_SEEDS } from "./adaptive/families";
import { pairedDifferences, quantile, regretStats } from "./adaptive/regret";

const COMMAND = "npx tsx bench/adaptive-variants.ts";

/** A variant: overrides of DEFAULT_STRATEGY (null: the option off), and a budget. */
type Variant = Record<string, unknown>;

const DEFAULT_VARIANTS: Record<string, Variant> = {
  defaults: {},
  "repeats to 0.6 % (repeatSe 0.006)": { repeatSe: 0.006 },
  "at most 3 full passes": { maxFullPasses: 3 },
  "stop at 25 %": { stopChance: 0.25 },
  "stop at 10 %": { stopChance: 0.1 },
  "first design of 6": { initialLaunches: 6 },
  "neighbours at 20 %": { neighbourChance: 0.2 },
  "repeatSe 0.006, 3 full passes, stop at 20 %": { repeatSe: 0.006, maxFullPasses: 3, stopChance: 0.2 },
};

// A misspelt option would run the defaults under the variant's name: refuse it.
const KNOWN = [...Object.keys(DEFAULT_STRATEGY), "maxShare", "maxConfigurations", "budget"].sort();
const variantsJson = json<Record<string, Variant>>('a JSON object of variants, {"name": {"option": value, ...}} (null: the option off)', (v) => {
  if (typeof v !== "object" || v === null || Array.isArray(v) || Object.keys(v).length === 0) throw new Error('expected a non-empty object such as {"cover 0.9": {"cover": 0.9}}');
  for (const [name, o] of Object.entries(v)) {
    if (typeof o !== "object" || o === null || Array.isArray(o)) throw new Error(`variant "${name}" is not an object of options`);
    for (const k of Object.keys(o)) if (!KNOWN.includes(k)) throw new Error(`variant "${name}": unknown option "${k}"; valid: ${KNOWN.join(", ")}`);
  }
  return v as Record<string, Variant>;
});
const trainingSeed: ValueType<number> = {
  expects: `a family seed that is not held out (training: ${TRAINING_FAMILY_SEEDS.join(", ")}; bench/adaptive/families.ts)`,
  parse(t) {
    const n = positiveInteger.parse(t);
    if (HELD_OUT_FAMILY_SEEDS.includes(n)) throw new Error(`${n} is a held-out family: tune on the training families (${TRAINING_FAMILY_SEEDS.join(", ")}) only`);
    return n;
  },
};
const relativeSd: ValueType<number> = {
  expects: "a relative standard deviation in [0, 1)",
  parse(t) {
    const n = Number(t);
    if (t.trim() === "" || !(n >= 0 && n < 1)) throw new Error("");
    return n;
  },
};
const resultName: ValueType<string> = {
  expects: "a file name under bench/results/, without extension (letters, digits, '-')",
  parse(t) {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(t)) throw new Error("");
    return t;
  },
};

const { options } = parseCommandOrExit(COMMAND, {
  summary: "Variants of the adaptive strategy replayed on the training families, each beside the full grid measured once,\nwith paired intervals; prints a table, and with --out writes bench/results/NAME.{md,json}.",
  options: {
    variants: option({ type: variantsJson, placeholder: "JSON", description: "the variants (default: this file's fixed list)" }),
    seeds: option({ type: listOf(trainingSeed), placeholder: "N,N", description: "training family seeds (held-out seeds are refused)", default: TRAINING_FAMILY_SEEDS.join(",") }),
    surfaces: option({ type: positiveInteger, placeholder: "N", description: "surfaces per family", default: String(FAMILY_SURFACES) }),
    "request-sd": option({ type: relativeSd, placeholder: "SD", description: "per-request relative noise (0.042: 4.2 %)", default: "0.042" }),
    "launch-sd": option({ type: relativeSd, placeholder: "SD", description: "per-launch relative offset", default: "0.015" }),
    out: option({ type: resultName, placeholder: "NAME", description: "also write bench/results/NAME.md and NAME.json" }),
    title: option({ type: text, placeholder: "TEXT", description: "what the variants ask (the results' heading)", default: "variants of its defaults" }),
  },
});

const variants = options.variants ?? DEFAULT_VARIANTS;
const noise = { requestSd: options["request-sd"], launchSd: options["launch-sd"] };
const points = gridPoints(GRID);
const grid = { "full grid": baselinesAt(MODEL_COSTS, 420)["full grid"] };
const pct = (x: number) => (x * 100).toFixed(2);
const interval = (x: { point: number; low: number; high: number }) => `${pct(x.point)} [${pct(x.low)}, ${pct(x.high)}]`;
const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
const command = [COMMAND, ...(options.variants ? ["--variants", quote(JSON.stringify(options.variants))] : []), "--seeds", options.seeds.join(","), "--surfaces", String(options.surfaces), "--request-sd", String(noise.requestSd), "--launch-sd", String(noise.launchSd), ...(options.out ? ["--out", options.out] : []), ...(options.title !== "variants of its defaults" ? ["--title", quote(options.title)] : [])].join(" ");

const rows: Record<string, unknown>[] = [];
const table = [
  "| variant | mean regret | p95 regret | within 3 % | isolated peak | needle | median GPU | p90 GPU | paired mean regret | paired within 3 % | paired p95 | replay s |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|",
];
let gridRuns: FamilyRun[] | undefined;
const show = (label: string, options: Variant, runs: FamilyRun[], seconds: number) => {
  const s = regretStats(runs.map((r) => r.regret));
  const feature = (f: string) => regretStats(runs.filter((r) => r.features.includes(f)).map((r) => r.regret)).within3;
  const fr = runs.map((r) => r.fraction);
  const p = pairedDifferences(runs.map((r) => r.regret), gridRuns!.map((r) => r.regret), 1);
  rows.push({ variant: label, options, ...s, isolated: feature("isolated-peak"), needle: feature("needle"), medianGpu: quantile(fr, 0.5), p90Gpu: quantile(fr, 0.9), paired: p });
  table.push(`| ${label} | ${pct(s.meanRegret)} | ${pct(s.p95Regret)} | ${pct(s.within3)} | ${pct(feature("isolated-peak"))} | ${pct(feature("needle"))} | ${pct(quantile(fr, 0.5))} | ${pct(quantile(fr, 0.9))} | ${interval(p.meanRegret)} | ${interval(p.within3)} | ${interval(p.p95Regret)} | ${seconds.toFixed(0)} |`);
  process.stderr.write(`${table[table.length - 1]}\n`);
};
for (const [name, v] of Object.entries(variants)) {
  const t0 = Date.now();
  const { budget, ...given } = v as { budget?: StrategyOptions["budget"] };
  const overrides = Object.fromEntries(Object.entries(given).map(([k, x]) => [k, x === null ? undefined : x]));
  const strategy = { ...DEFAULT_STRATEGY, ...overrides, objective: { kind: "short", longWeight: 0.5 }, budget: budget ?? {} } as StrategyOptions;
  const runs = options.seeds.flatMap((seed) => evaluateFamily(points, seed, options.surfaces, noise, MODEL_COSTS, 420, strategy, gridRuns ? {} : grid, 2).runs);
  if (!gridRuns) {
    gridRuns = runs.filter((r) => r.policy === "full grid");
    show("full grid, one pass each", {}, gridRuns, 0);
  }
  show(name, v, runs.filter((r) => r.policy === "adaptive"), (Date.now() - t0) / 1000);
}

const lines = [
  `# Adaptive sweep: ${options.title} (training families only)`,
  "",
  `Command: \`${command}\` (${new Date().toISOString()}).`,
  "",
  `Training families ${options.seeds.join(", ")} (bench/adaptive/families.ts), ${options.surfaces} surfaces each, ${(noise.requestSd * 100).toFixed(1)} % per-request noise, ${(noise.launchSd * 100).toFixed(1)} % launch offset, 2 hosts, a launch 420 s, a full pass ${MODEL_COSTS.fullPassSeconds} s. Held-out families are not run here.`,
  "Figures in per cent: the answer's top scored by its regret (1 - true value / true best); isolated peak and needle: the top within 3 % on the surfaces with that feature; GPU time as a share of the full grid's. Paired: the variant minus the full grid measured once on the same surfaces, points, with the 95 % bootstrap interval (issue 62's targets, on the bound: mean regret at most +0.25, within 3 % at most 2 lower, 95th percentile at most +0.75). replay s: the replay's seconds on this machine (not a result).",
  "",
  ...table,
];
process.stdout.write(`${lines.join("\n")}\n`);
if (options.out) {
  const dir = path.join(REPO_ROOT, "bench", "results");
  fs.writeFileSync(path.join(dir, `${options.out}.md`), `${lines.join("\n")}\n`);
  fs.writeFileSync(path.join(dir, `${options.out}.json`), `${JSON.stringify({ command, seeds: options.seeds, surfaces: options.surfaces, noise, rows }, null, 1)}\n`);
}
