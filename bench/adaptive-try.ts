// Benchmark (issue 62, training families only; held-out seeds are refused): variants of the
// adaptive strategy given as JSON on the command line, each beside the full grid measured once
// on the same surfaces, with the paired differences (sweep minus grid, points, 95 % bootstrap
// intervals, bench/adaptive/regret.ts). Figures in percent. Writes nothing; prints a table.
// Run: [REQUEST_SD=0.042] [LAUNCH_SD=0.015] SEEDS=1,2 SURFACES=300 npx tsx bench/adaptive-try.ts '{"name": {...StrategyOptions overrides (null: off), "budget": {...}}}'
import { gridPoints } from "../components/sweep/adaptive/space";
import { DEFAULT_STRATEGY } from "../components/sweep/adaptive/strategy";
import { GRID, MODEL_COSTS } from "./adaptive/grid";
import { baselinesAt, evaluateFamily, FamilyRun } from "./adaptive/family-eval";
import { FAMILY_SURFACES, TRAINING_FAMILY_SEEDS, HELD_OUT_FAMILY_SEEDS } from "./adaptive/families";
import { pairedDifferences, quantile, regretStats } from "./adaptive/regret";

const fail = (why: string): never => {
  process.stderr.write(`bench/adaptive-try.ts: ${why}\n`);
  process.exit(2);
};
const variants = JSON.parse(process.argv[2] ?? '{"defaults": {}}') as Record<string, Record<string, unknown>>;
// A misspelt option would run the defaults under another name: refuse it.
const KNOWN = new Set([...Object.keys(DEFAULT_STRATEGY), "maxShare", "maxConfigurations", "budget"]);
for (const [name, v] of Object.entries(variants)) for (const k of Object.keys(v)) if (!KNOWN.has(k)) fail(`variant "${name}": unknown option "${k}"; valid: ${[...KNOWN].sort().join(", ")}`);
const seeds = (process.env.SEEDS ?? TRAINING_FAMILY_SEEDS.join(",")).split(",").map(Number);
for (const s of seeds) {
  if (!Number.isInteger(s) || s < 1) fail(`SEEDS: ${process.env.SEEDS} is not a list of whole numbers (e.g. SEEDS=${TRAINING_FAMILY_SEEDS.join(",")})`);
  if (HELD_OUT_FAMILY_SEEDS.includes(s)) fail(`SEEDS: ${s} is a held-out family (bench/adaptive/families.ts): tune on the training families (${TRAINING_FAMILY_SEEDS.join(", ")}) only`);
}
const n = Number(process.env.SURFACES ?? FAMILY_SURFACES);
if (!Number.isInteger(n) || n < 1) fail(`SURFACES: ${process.env.SURFACES} is not a positive whole number`);
const noise = { requestSd: Number(process.env.REQUEST_SD ?? 0.042), launchSd: Number(process.env.LAUNCH_SD ?? 0.015) };
for (const [k, v] of Object.entries(noise)) if (!(v >= 0 && v < 1)) fail(`${k === "requestSd" ? "REQUEST_SD" : "LAUNCH_SD"}: ${v} is not a relative standard deviation in [0, 1)`);
const points = gridPoints(GRID);
const grid = { "full grid": baselinesAt(MODEL_COSTS, 420)["full grid"] };
const pct = (x: number) => `${(x * 100).toFixed(2)}`;
let gridRuns: FamilyRun[] | undefined;
console.log("| variant | mean regret | p95 regret | within 3 % | isolated | needle | median GPU | p90 GPU | paired mean regret | paired within 3 % | paired p95 | s |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|");
for (const [name, v] of Object.entries(variants)) {
  const t0 = Date.now();
  const { budget, ...given } = v as { budget?: object };
  // null: the option off (undefined), as JSON cannot say it.
  const rest = Object.fromEntries(Object.entries(given).map(([k, x]) => [k, x === null ? undefined : x]));
  const runs = seeds.flatMap((seed) => evaluateFamily(points, seed, n, noise, MODEL_COSTS, 420, { ...DEFAULT_STRATEGY, ...rest, objective: { kind: "short", longWeight: 0.5 }, budget: budget ?? {} } as never, gridRuns ? {} : grid, 2).runs);
  if (!gridRuns) gridRuns = runs.filter((r) => r.policy === "full grid");
  const a = runs.filter((r) => r.policy === "adaptive");
  const show = (label: string, rs: FamilyRun[], secs: number) => {
    const s = regretStats(rs.map((r) => r.regret));
    const f = (feat: string) => regretStats(rs.filter((r) => r.features.includes(feat)).map((r) => r.regret)).within3;
    const fr = rs.map((r) => r.fraction);
    const p = pairedDifferences(rs.map((r) => r.regret), gridRuns!.map((r) => r.regret), 1);
    const iv = (x: { point: number; low: number; high: number }) => `${pct(x.point)} [${pct(x.low)}, ${pct(x.high)}]`;
    console.log(`| ${label} | ${pct(s.meanRegret)} | ${pct(s.p95Regret)} | ${pct(s.within3)} | ${pct(f("isolated-peak"))} | ${pct(f("needle"))} | ${pct(quantile(fr, 0.5))} | ${pct(quantile(fr, 0.9))} | ${iv(p.meanRegret)} | ${iv(p.within3)} | ${iv(p.p95Regret)} | ${secs.toFixed(0)} |`);
  };
  if (name === Object.keys(variants)[0]) show("full grid", gridRuns, 0);
  show(name, a, (Date.now() - t0) / 1000);
}
