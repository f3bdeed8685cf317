// Benchmark: how often the report's winner rule names a winner among identical configurations
// (A/A: 2, 5 or 38 of them, beside a no-speculation baseline), when the benchmark is re-run and
// the report read again after every re-run (up to 10 looks: rows.ts pools every kept run), at
// the assumed launch offset and at twice it; and how often it finds a configuration truly 3, 5
// or 10 % faster, with the smallest difference it says it could detect. Each trial draws the
// rows as a benchmark measures them (every launch a persistent offset, every request its own
// noise) and asks the report's own `choose()` (components/verdict/choose.ts); the rule before
// issue 62 (a fixed 95 % interval, each configuration's own launches pooled with the assumed
// 1.5 % offset) decides on the same launches, side by side.
// Writes bench/results/winner-rule.{json,md} (or --out NAME).
// Run: npx tsx bench/winner-rule.ts [--seeds 6202,6203] [--trials 400] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { normal, prng } from "../lib/prng";
import { listOf, option, parseCommandOrExit, positiveInteger, positiveNumber, text } from "../lib/cli";
import { choose } from "../components/verdict/choose";
import type { ReportRow } from "../components/verdict/rows";
import type { HistoryRecord } from "../components/benchmark/history";
import { DEFAULT_VERDICT } from "../components/verdict/schema";
import { estimate, normalQuantile, type LaunchMeasure } from "../components/verdict/rule";
import { benchmarkSchema } from "../components/benchmark/schema";
import { phase, resultOf } from "../test/support/benchmarkResults";
import { WINNER_RULE_HELD_OUT_SEEDS, WINNER_RULE_TRAINING_SEEDS } from "./adaptive/families";

const COMMAND = "npx tsx bench/winner-rule.ts";
const { options } = parseCommandOrExit(COMMAND, {
  summary: "Trials of the report's winner rule on simulated benchmark rows re-run and read again up to 10 times: identical\nconfigurations (A/A: 2, 5, 38) at the assumed launch offset and twice it, and a true 3, 5, 10 % difference; the rule\nbefore issue 62 side by side. Writes bench/results/winner-rule.{json,md}.",
  options: {
    seeds: option({ type: listOf(positiveInteger), placeholder: "N,N", description: `seeds of the trials (tuned on ${WINNER_RULE_TRAINING_SEEDS.join(", ")}; held out ${WINNER_RULE_HELD_OUT_SEEDS.join(", ")}, bench/adaptive/families.ts)`, default: WINNER_RULE_HELD_OUT_SEEDS.join(",") }),
    trials: option({ type: positiveInteger, placeholder: "N", description: "trials per seed and cell", default: "400" }),
    "request-sd": option({ type: positiveNumber, placeholder: "X", description: "relative sd of one request's decode rate (bench/results/adaptive-sweep.md measured 0.042 on the simulator)", default: "0.042" }),
    looks: option({ type: positiveInteger, placeholder: "N", description: "re-runs of every configuration, the report read after each", default: "10" }),
    out: option({ type: text, placeholder: "NAME", description: "results name under bench/results/", default: "winner-rule" }),
  },
});

const SEEDS = options.seeds as number[];
const TRIALS = options.trials as number;
const REQUEST_SD = options["request-sd"] as number;
const LOOKS = options.looks as number;
const ASSUMED = DEFAULT_VERDICT.launchSd;
const OFFSETS = [ASSUMED, 2 * ASSUMED];
/** The default benchmark's measured short-context requests per launch, and a long one. */
const DEFAULT_RUNS = benchmarkSchema.parse({}).runs;
const RUNS = [DEFAULT_RUNS, 30];
const BASE_TPS = 80;
const A_TPS = 180;
const COUNTS = [2, 5, 38];
const DIFFERENCES = [0.03, 0.05, 0.1];
/** Looks reported (the rule is read after every re-run; a false winner at any look up to L counts at L). */
const REPORTED_LOOKS = [1, 2, 4, LOOKS].filter((l, i, a) => l <= LOOKS && a.indexOf(l) === i);

const SETTINGS_HASHES = { benchmark: "6afe5e8f6155", benchmarkCode: "00fecfdfc67e" };
const DEPLOYED = { "model.contextLength": null, "model.extraArgs": [], "model.memFractionStatic": null, "model.quantization": null, "service.environment": "none", nodes: 0, sglangBuild: "ddtree-fork" };
const configurationOf = (stack: string, speculative: boolean): Record<string, unknown> => ({
  stack,
  ...(speculative ? { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048, compactCache: true } : { algorithm: null, draftWindowSize: "none", compactCache: false }),
  sglangBuild: "ddtree-fork",
  model: "/models/Kimi-K2.6",
  tpSize: 8,
  deploymentSettings: DEPLOYED,
  ...SETTINGS_HASHES,
});

let pid = 1000;
const T0 = Date.parse("2026-12-01T00:00:00.000Z");

/** One launch: its short phase as the benchmark reports it (median, min, max of its requests), and the rule's measure of it. */
function drawLaunch(rand: () => number, truth: number, offsetSd: number, runs: number) {
  const launch = truth * (1 + offsetSd * normal(rand));
  const rates = Array.from({ length: runs }, () => launch * (1 + REQUEST_SD * normal(rand))).sort((x, y) => x - y);
  const median = runs % 2 ? rates[(runs - 1) / 2] : (rates[runs / 2 - 1] + rates[runs / 2]) / 2;
  const base = resultOf({ decode: median, on: { mainPid: pid++ } });
  return { result: { ...base, short: { ...phase("short", { decode: median, requests: runs }), decode_tokens_per_s_min: rates[0], decode_tokens_per_s_max: rates[runs - 1] } }, median };
}

interface Config {
  stack: string;
  truth: number;
  speculative: boolean;
  runs: HistoryRecord[];
  medians: number[];
}

/** Every configuration re-run once more: a new launch each, kept beside the earlier ones. */
function rerun(rand: () => number, configs: Config[], offsetSd: number, runs: number, look: number): void {
  configs.forEach((c, i) => {
    const l = drawLaunch(rand, c.truth, offsetSd, runs);
    c.runs.push({ format: 1, stack: c.stack, backend: "", takenAt: new Date(T0 + (look * 60 + i) * 60_000).toISOString(), unitHash: c.stack.padEnd(64, "0"), host: "10.0.0.5", configuration: configurationOf(c.stack, c.speculative), result: l.result });
    c.medians.push(l.median);
  });
}

const rowsOf = (configs: Config[]): ReportRow[] =>
  configs.map((c) => {
    const last = c.runs[c.runs.length - 1];
    return { stack: c.stack, configuration: last.configuration, result: last.result, takenAt: last.takenAt, runs: [...c.runs] };
  });

/**
 * The rule before issue 62, on the same launches: each configuration's launches pooled with the
 * assumed 1.5 % offset (its own spread where relaunched), a fixed 95 % interval, a winner when the
 * top's interval over every other and over the baseline lies above 1.005.
 */
function oldWinner(configs: Config[], runs: number): string | undefined {
  const launches = (c: Config): LaunchMeasure[] => c.medians.map((value) => ({ value, requests: runs, requestSd: REQUEST_SD }));
  const est = configs.map((c) => ({ c, e: estimate(launches(c), { launchSd: ASSUMED }) }));
  const z = normalQuantile(0.975);
  const spec = est.filter((x) => x.c.speculative).sort((a, b) => b.e.value - a.e.value);
  const base = est.find((x) => !x.c.speculative)!;
  const [top, ...rest] = spec;
  const beats = (o: typeof top) => (top.e.value / o.e.value) * Math.exp(-z * Math.hypot(top.e.relSe, o.e.relSe)) > 1 + DEFAULT_VERDICT.threshold;
  return rest.length > 0 && rest.every(beats) && beats(base) ? top.c.stack : undefined;
}

interface Cell {
  kind: "A/A" | "difference";
  count: number;
  difference: number;
  offset: number;
  runs: number;
  seed: number;
  trials: number;
  /** Per look (index 0: look 1): trials with a winner named at that look or before (A/A), or the truly faster one named best at that look (difference). */
  winnerBy: number[];
  /** Per look: a wrong winner named at that look or before. */
  wrongBy: number[];
  oldWinnerBy: number[];
  /** Per look: trials whose top and runner-up are "equal within" (A/A) at that look; and "inconclusive". */
  equal: number[];
  inconclusive: number[];
  /** Per look: the smallest difference the top's comparison with its closest rival says it could detect, per trial. */
  detectable: number[][];
}

const cells: Cell[] = [];
const started = Date.now();
const scenarios: { kind: Cell["kind"]; count: number; difference: number }[] = [
  ...COUNTS.map((count) => ({ kind: "A/A" as const, count, difference: 0 })),
  ...DIFFERENCES.map((difference) => ({ kind: "difference" as const, count: 5, difference })),
];
for (const seed of SEEDS) {
  for (const sc of scenarios) {
    for (const offset of OFFSETS) {
      for (const runs of RUNS) {
        const rand = prng(seed * 1_000_003 + cells.length);
        const zero = () => Array.from({ length: LOOKS }, () => 0);
        const cell: Cell = { ...sc, offset, runs, seed, trials: TRIALS, winnerBy: zero(), wrongBy: zero(), oldWinnerBy: zero(), equal: zero(), inconclusive: zero(), detectable: Array.from({ length: LOOKS }, () => []) };
        const trials = sc.count >= 38 ? Math.max(1, Math.round(TRIALS / 4)) : TRIALS;
        cell.trials = trials;
        for (let t = 0; t < trials; t++) {
          const configs: Config[] = [
            { stack: "baseline", truth: BASE_TPS, speculative: false, runs: [], medians: [] },
            ...Array.from({ length: sc.count }, (_, i) => ({ stack: `c${i}`, truth: A_TPS * (i === 0 ? 1 + sc.difference : 1), speculative: true, runs: [], medians: [] })),
          ];
          let named = false;
          let wrong = false;
          let oldNamed = false;
          for (let look = 0; look < LOOKS; look++) {
            rerun(rand, configs, offset, runs, look);
            const c = choose(rowsOf(configs));
            if (c.kind === "winner") {
              if (sc.kind === "A/A" || c.stack !== "c0") wrong = true;
              named = true;
            }
            if (!oldNamed && oldWinner(configs, runs)) oldNamed = true;
            if (sc.kind === "A/A") {
              if (named) cell.winnerBy[look] += 1;
            } else if (c.kind === "winner" && c.stack === "c0") cell.winnerBy[look] += 1;
            if (wrong) cell.wrongBy[look] += 1;
            if (oldNamed) cell.oldWinnerBy[look] += 1;
            const vs = c.kind === "winner" ? c.runnerUp?.comparison : c.kind === "tie" ? [...c.against].sort((x, y) => x.comparison.low - y.comparison.low)[0]?.comparison : undefined;
            if (vs) {
              cell.detectable[look].push(vs.detectable);
              if (vs.verdict === "equal") cell.equal[look] += 1;
              if (vs.verdict === "inconclusive") cell.inconclusive[look] += 1;
            }
          }
        }
        cells.push(cell);
      }
    }
  }
}
const seconds = (Date.now() - started) / 1000;

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const pick = (kind: Cell["kind"], count: number, difference: number, offset: number, runs: number) => cells.filter((c) => c.kind === kind && c.count === count && c.difference === difference && c.offset === offset && c.runs === runs);
const rate = (cs: Cell[], f: (c: Cell) => number) => cs.reduce((t, c) => t + f(c), 0) / cs.reduce((t, c) => t + c.trials, 0);
/** Wilson 95 % upper bound of a rate. */
const upper = (cs: Cell[], f: (c: Cell) => number) => {
  const n = cs.reduce((t, c) => t + c.trials, 0);
  const p = rate(cs, f);
  const z = 1.96;
  return (p + (z * z) / (2 * n) + z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n);
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)];
};
const perSeed = (cs: Cell[], f: (c: Cell) => number) => cs.map((c) => pct(f(c) / c.trials)).join(", ");

const lines: string[] = [];
lines.push(
  "# Winner rule: false winners over re-runs, equal or inconclusive, and what a benchmark can detect",
  "",
  `Command: \`${COMMAND} --seeds ${SEEDS.join(",")} --trials ${TRIALS} --request-sd ${REQUEST_SD} --looks ${LOOKS}${options.out !== "winner-rule" ? ` --out ${options.out}` : ""}\` (${new Date().toISOString()}, ${seconds.toFixed(0)} s).`,
  "",
  `Seeds ${SEEDS.join(", ")} (bench/adaptive/families.ts: the rule's constants were set on seed ${WINNER_RULE_TRAINING_SEEDS.join(", ")}; held out ${WINNER_RULE_HELD_OUT_SEEDS.join(", ")}). ${TRIALS} trials per seed and cell (${Math.max(1, Math.round(TRIALS / 4))} with 38 configurations); rates pooled over the seeds, each seed's own in brackets.`,
  "",
  `Each trial: a no-speculation baseline (true ${BASE_TPS} tok/s) and N speculative configurations (true ${A_TPS} tok/s; in "difference" trials the first of 5 is faster by 3, 5 or 10 %), all on one host. A look: every configuration re-run once (a new server start: a persistent offset of relative sd 1x or 2x the assumed ${pct(ASSUMED)}, and \`runs\` measured short-context requests, each with a relative sd of ${pct(REQUEST_SD)}), then the report read with every kept run (rows.ts: one unit hash, a main PID per launch) and \`choose()\` deciding. A false winner at any look up to L counts at L. The default benchmark is 1 launch × ${DEFAULT_RUNS} requests (components/benchmark/schema.ts: \`runs\`).`,
  "",
  `The rule (components/verdict/rule.ts): an always-valid 95 % interval of each ratio (a normal-mixture confidence sequence), the launch offset measured from the relaunches of every row (twice the assumed ${pct(ASSUMED)} where nothing was relaunched, pooled with that, never below it), "better" only when the whole interval lies above ${pct(DEFAULT_VERDICT.threshold)}. The rule before issue 62, on the same launches: a fixed 95 % interval, each configuration's own launches pooled with the assumed ${pct(ASSUMED)}.`,
  "",
  "## A/A: identical configurations, a false winner at any look up to L",
  "",
  `Target: at most 5 % for 2, 5 and 38 configurations, at 1x and 2x the assumed offset, with up to 10 looks. The last column: the Wilson 95 % upper bound of the rate at ${LOOKS} looks.`,
  "",
  `| configurations | launch offset | requests per launch | ${REPORTED_LOOKS.map((l) => `look ${l}`).join(" | ")} | ${LOOKS} looks, 95 % upper bound | rule before issue 62: look 1 | before: ${LOOKS} looks |`,
  `|---:|---:|---:|${REPORTED_LOOKS.map(() => "---:").join("|")}|---:|---:|---:|`,
);
let worstUpper = 0;
for (const count of COUNTS) {
  for (const offset of OFFSETS) {
    for (const runs of RUNS) {
      const cs = pick("A/A", count, 0, offset, runs);
      const up = upper(cs, (c) => c.winnerBy[LOOKS - 1]);
      worstUpper = Math.max(worstUpper, rate(cs, (c) => c.winnerBy[LOOKS - 1]));
      lines.push(`| ${count} | ${pct(offset)} (${offset / ASSUMED}x) | ${runs} | ${REPORTED_LOOKS.map((l) => `${pct(rate(cs, (c) => c.winnerBy[l - 1]))} (${perSeed(cs, (c) => c.winnerBy[l - 1])})`).join(" | ")} | ${pct(up)} | ${pct(rate(cs, (c) => c.oldWinnerBy[0]))} | ${pct(rate(cs, (c) => c.oldWinnerBy[LOOKS - 1]))} |`);
    }
  }
}
lines.push("", `Highest A/A false-winner rate at ${LOOKS} looks over every cell: **${pct(worstUpper)}** (target ≤ 5 %).`, "");
lines.push(
  "## Equal within 2 % or inconclusive (2 identical configurations)",
  "",
  `"equal within ${pct(DEFAULT_VERDICT.equalWithin)}": the whole interval of the top over its closest rival lies inside ±${pct(DEFAULT_VERDICT.equalWithin)} (verdict.equalWithin); "inconclusive": it is neither that nor beyond the threshold (this benchmark cannot tell). Shares of trials at each look; the median smallest difference the comparison says it could detect (80 % of the time at the next look).`,
  "",
  `| launch offset | requests per launch | ${REPORTED_LOOKS.map((l) => `look ${l}: equal / inconclusive / detectable`).join(" | ")} |`,
  `|---:|---:|${REPORTED_LOOKS.map(() => "---").join("|")}|`,
);
for (const offset of OFFSETS) {
  for (const runs of RUNS) {
    const cs = pick("A/A", 2, 0, offset, runs);
    lines.push(`| ${pct(offset)} | ${runs} | ${REPORTED_LOOKS.map((l) => `${pct(rate(cs, (c) => c.equal[l - 1]))} / ${pct(rate(cs, (c) => c.inconclusive[l - 1]))} / ${pct(median(cs.flatMap((c) => c.detectable[l - 1])))}`).join(" | ")} |`);
  }
}
lines.push(
  "",
  "## A true difference: the faster of 5 named best (at that look), and a wrong winner (at any look up to it)",
  "",
  `| difference | launch offset | requests per launch | ${REPORTED_LOOKS.map((l) => `look ${l}: found / wrong`).join(" | ")} | median detectable at look 1 / ${LOOKS} |`,
  `|---:|---:|---:|${REPORTED_LOOKS.map(() => "---").join("|")}|---|`,
);
for (const difference of DIFFERENCES) {
  for (const offset of OFFSETS) {
    for (const runs of RUNS) {
      const cs = pick("difference", 5, difference, offset, runs);
      lines.push(`| ${pct(difference)} | ${pct(offset)} | ${runs} | ${REPORTED_LOOKS.map((l) => `${pct(rate(cs, (c) => c.winnerBy[l - 1]))} / ${pct(rate(cs, (c) => c.wrongBy[l - 1]))}`).join(" | ")} | ${pct(median(cs.flatMap((c) => c.detectable[0])))} / ${pct(median(cs.flatMap((c) => c.detectable[LOOKS - 1])))} |`);
    }
  }
}
lines.push(
  "",
  `"Detectable": the smallest true difference the rule would call faster 80 % of the time at the next look, from the interval's width at this many launches (rule.ts Comparison.detectable); every tie the report prints says it.`,
);
const out = path.join(REPO_ROOT, "bench", "results");
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, `${options.out}.json`), `${JSON.stringify({ command: COMMAND, seeds: SEEDS, trials: TRIALS, requestSd: REQUEST_SD, looks: LOOKS, offsets: OFFSETS, defaults: DEFAULT_VERDICT, cells: cells.map((c) => ({ ...c, detectable: c.detectable.map(median) })) }, null, 1)}\n`);
fs.writeFileSync(path.join(out, `${options.out}.md`), `${lines.join("\n")}\n`);
process.stdout.write(`${lines.join("\n")}\n`);
