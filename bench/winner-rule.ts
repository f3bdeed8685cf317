// Benchmark: how often the report's winner rule names a winner between identical
// configurations (A/A), and how often it finds a true 3 % difference, at the simulator's
// measured per-request noise, with and without a launch-to-launch offset. Each trial draws
// the benchmark's rows as a benchmark would measure them (a baseline and two speculative
// configurations, each launched K times with `runs` short-context requests per launch; every
// launch a persistent offset, every request its own noise) and asks the report's own
// `choose()` (components/verdict/choose.ts) under several rule settings, and the rule before
// issue 40 (the top's slowest request beats every other's fastest) on the same rows.
// Writes bench/results/winner-rule.{json,md}.
// Run: npx tsx bench/winner-rule.ts [--seeds 4040,4041] [--trials 1000] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { normal, prng } from "../lib/prng";
import { listOf, option, parseCommandOrExit, positiveInteger, positiveNumber } from "../lib/cli";
import { choose } from "../components/verdict/choose";
import { figuresOf } from "../components/benchmark/compare";
import type { ReportRow } from "../components/verdict/rows";
import type { HistoryRecord } from "../components/benchmark/history";
import { DEFAULT_VERDICT, verdictSchema, type VerdictSettings } from "../components/verdict/schema";
import { benchmarkSchema } from "../components/benchmark/schema";
import { phase, resultOf } from "../test/support/benchmarkResults";

const COMMAND = "npx tsx bench/winner-rule.ts";
const { options } = parseCommandOrExit(COMMAND, {
  summary: "Trials of the report's winner rule on simulated benchmark rows: identical configurations (A/A) and a true 3 % difference,\nwith and without a launch offset, several rule settings and benchmark sizes, and the old rule side by side.\nWrites bench/results/winner-rule.{json,md}.",
  options: {
    seeds: option({ type: listOf(positiveInteger), placeholder: "N,N", description: "seeds of the trials (each seed a full set of trials)", default: "4040,4041" }),
    trials: option({ type: positiveInteger, placeholder: "N", description: "trials per seed and cell", default: "1000" }),
    "request-sd": option({ type: positiveNumber, placeholder: "X", description: "relative sd of one request's decode rate (bench/results/adaptive-sweep.md measured 0.042 on the simulator)", default: "0.042" }),
    "launch-sd": option({ type: listOf(positiveNumber), placeholder: "X,X", description: "true launch offsets tried besides none (relative sd)", default: "0.015" }),
  },
});

const SEEDS = options.seeds as number[];
const TRIALS = options.trials as number;
const REQUEST_SD = options["request-sd"] as number;
const OFFSETS = [0, ...(options["launch-sd"] as number[])];
/** The default benchmark: its short phase's measured requests per launch. */
const DEFAULT_RUNS = benchmarkSchema.parse({}).runs;
/** The true speeds: a baseline well below (speculation more than doubles it), A, and B = A or A + 3 %. */
const BASE_TPS = 80;
const A_TPS = 180;
const DIFFERENCE = 0.03;

/** Benchmark sizes tried: measured short-context requests per launch, launches per configuration. */
const SIZES: { runs: number; launches: number }[] = [
  ...[1, 2, 4, 8, 12, 16].map((launches) => ({ runs: DEFAULT_RUNS, launches })),
  ...[1, 4, 8, 12].map((launches) => ({ runs: 10, launches })),
  ...[1, 4, 6, 8, 10].map((launches) => ({ runs: 30, launches })),
];
/** Rule settings tried (the launch prior is the assumed 1.5 % throughout). */
const SETTINGS: VerdictSettings[] = [0, 0.005, 0.01].flatMap((threshold) => [0.9, 0.95].map((confidence) => verdictSchema.parse({ threshold, confidence })));
const isDefault = (s: VerdictSettings) => s.threshold === DEFAULT_VERDICT.threshold && s.confidence === DEFAULT_VERDICT.confidence && s.launchSd === DEFAULT_VERDICT.launchSd;

/**
 * GPU seconds per configuration, from bench/results/adaptive-sweep.md's measured costs: a launch
 * 420 s (the weight load), a full pass 18 s at the default 3 runs, which the extra runs lengthen
 * in proportion (an upper bound: the concurrency phases and the coding check do not grow).
 */
const LAUNCH_S = 420;
const FULL_PASS_S = 18;
const gpuSeconds = (size: { runs: number; launches: number }) => size.launches * (LAUNCH_S + (FULL_PASS_S * size.runs) / DEFAULT_RUNS);


const SETTINGS_HASHES = { benchmark: "6afe5e8f6155", benchmarkCode: "00fecfdfc67e" };
const DEPLOYED = { "model.contextLength": null, "model.extraArgs": [], "model.memFractionStatic": null, "model.quantization": null, "service.environment": "none", nodes: 0, sglangBuild: "ddtree-fork" };
const configurationOf = (stack: string, speculative: boolean): Record<string, unknown> => ({
  stack,
  ...(speculative ? { algorithm: "DDTREE", budget: stack === "a" ? 8 : 16, topk: 4, draftWindowSize: 2048, compactCache: true } : { algorithm: null, draftWindowSize: "none", compactCache: false }),
  sglangBuild: "ddtree-fork",
  model: "/models/Kimi-K2.6",
  tpSize: 8,
  deploymentSettings: DEPLOYED,
  ...SETTINGS_HASHES,
});

let pid = 1000;
const T0 = Date.parse("2026-12-01T00:00:00.000Z");

/** One launch's short phase as the benchmark reports it: median, min and max of its requests' decode rates. */
function launchResult(rand: () => number, truth: number, offsetSd: number, runs: number) {
  const launch = truth * (1 + offsetSd * normal(rand));
  const rates = Array.from({ length: runs }, () => launch * (1 + REQUEST_SD * normal(rand))).sort((x, y) => x - y);
  const median = runs % 2 ? rates[(runs - 1) / 2] : (rates[runs / 2 - 1] + rates[runs / 2]) / 2;
  const base = resultOf({ decode: median, on: { mainPid: pid++ } });
  return { ...base, short: { ...phase("short", { decode: median, requests: runs }), decode_tokens_per_s_min: rates[0], decode_tokens_per_s_max: rates[runs - 1] } };
}

/** A configuration measured on `launches` server starts, as the report reads it: its last run, and every run kept. */
function rowOf(rand: () => number, stack: string, truth: number, speculative: boolean, offsetSd: number, size: { runs: number; launches: number }, minute: number): ReportRow {
  const configuration = configurationOf(stack, speculative);
  const runs: HistoryRecord[] = Array.from({ length: size.launches }, (_, k) => ({
    format: 1,
    stack,
    backend: "",
    takenAt: new Date(T0 + (minute + 10 * k) * 60_000).toISOString(),
    unitHash: `${stack}`.padEnd(64, "0"),
    host: "10.0.0.5",
    configuration,
    result: launchResult(rand, truth, offsetSd, size.runs),
  }));
  const last = runs[runs.length - 1];
  return { stack, configuration, result: last.result, takenAt: last.takenAt, runs };
}

/** The rule before issue 40 (components/benchmark/compare.ts at 30ef2c7): the top's slowest request beats every other's fastest. */
function oldRuleWinner(rows: ReportRow[]): string | undefined {
  const eligible = rows.filter((r) => r.configuration.algorithm).map((r) => ({ stack: r.stack, d: figuresOf(r.result!).short })).sort((x, y) => y.d.median - x.d.median);
  const [top, ...rest] = eligible;
  const within = rest.filter((e) => e.d.max >= top.d.min);
  const few = eligible.filter((e) => e.d.requests < 3);
  return within.length === 0 && (rest.length === 0 || few.length === 0) ? top.stack : undefined;
}

interface Cell {
  scenario: "A/A" | "3 %";
  offset: number;
  runs: number;
  launches: number;
  seed: number;
  trials: number;
  /** Per setting ("threshold/confidence"): winners named, and of them the truly faster one (B). */
  rule: Record<string, { winner: number; winnerB: number; tie: number; none: number }>;
  /** The old rule on the same rows: its last run only, as it read them. */
  oldWinner: number;
}

const key = (s: VerdictSettings) => `${s.threshold}/${s.confidence}`;
const cells: Cell[] = [];
const started = Date.now();
for (const seed of SEEDS) {
  for (const scenario of ["A/A", "3 %"] as const) {
    for (const offset of OFFSETS) {
      for (const size of SIZES) {
        const rand = prng(seed * 1_000_003 + cells.length);
        const cell: Cell = { scenario, offset, ...size, seed, trials: TRIALS, rule: Object.fromEntries(SETTINGS.map((s) => [key(s), { winner: 0, winnerB: 0, tie: 0, none: 0 }])), oldWinner: 0 };
        for (let t = 0; t < TRIALS; t++) {
          const rows = [
            rowOf(rand, "baseline", BASE_TPS, false, offset, size, 0),
            rowOf(rand, "a", A_TPS, true, offset, size, 1),
            rowOf(rand, "b", scenario === "A/A" ? A_TPS : A_TPS * (1 + DIFFERENCE), true, offset, size, 2),
          ];
          for (const s of SETTINGS) {
            const c = choose(rows, s);
            const tally = cell.rule[key(s)];
            if (c.kind === "winner") {
              tally.winner += 1;
              if (c.stack === "b") tally.winnerB += 1;
            } else if (c.kind === "tie") tally.tie += 1;
            else tally.none += 1;
          }
          // The old rule saw one run per stack: the last.
          if (oldRuleWinner(rows.map((r) => ({ ...r, runs: undefined })))) cell.oldWinner += 1;
        }
        cells.push(cell);
      }
    }
  }
}
const seconds = (Date.now() - started) / 1000;

// ---- the result: rates pooled over the seeds, each seed's own beside where it matters.
const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const pooled = (scenario: Cell["scenario"], offset: number, size: { runs: number; launches: number }) => cells.filter((c) => c.scenario === scenario && c.offset === offset && c.runs === size.runs && c.launches === size.launches);
const rate = (cs: Cell[], pick: (c: Cell) => number) => cs.reduce((t, c) => t + pick(c), 0) / cs.reduce((t, c) => t + c.trials, 0);
const aaTie = (cs: Cell[], s: VerdictSettings) => rate(cs, (c) => c.rule[key(s)].tie);
const detected = (cs: Cell[], s: VerdictSettings) => rate(cs, (c) => c.rule[key(s)].winnerB);
const wrong = (cs: Cell[], s: VerdictSettings) => rate(cs, (c) => c.rule[key(s)].winner - c.rule[key(s)].winnerB);
const perSeed = (cs: Cell[], f: (c: Cell[]) => number) => cs.map((c) => pct(f([c]))).join(", ");

const sizeText = (z: { runs: number; launches: number }) => `${z.launches} × ${z.runs}`;
const lines: string[] = [];
lines.push(
  "# Winner rule: A/A ties and a true 3 % difference",
  "",
  `Command: \`${COMMAND} --seeds ${SEEDS.join(",")} --trials ${TRIALS} --request-sd ${REQUEST_SD} --launch-sd ${OFFSETS.slice(1).join(",")}\` (${new Date().toISOString()}, ${seconds.toFixed(0)} s).`,
  "",
  `Each trial: a no-speculation baseline (true ${BASE_TPS} tok/s) and two speculative configurations, A (${A_TPS} tok/s) and B (A/A: the same; "3 %": ${(A_TPS * (1 + DIFFERENCE)).toFixed(1)} tok/s), all on one host, each launched K times (a server start: a persistent offset of relative sd 0 or ${OFFSETS.slice(1).map(pct).join(", ")}) with \`runs\` measured short-context requests per launch (each request's decode rate with a relative sd of ${pct(REQUEST_SD)}, the simulator's as bench/results/adaptive-sweep.md measured it). The benchmark reports each launch's median, min and max, as a format-2 result; the report reads the rows with every launch's run kept (bench/history: one unit hash, a main PID per launch) and \`choose()\` decides. The default benchmark is 1 launch × ${DEFAULT_RUNS} requests (components/benchmark/schema.ts: \`runs\`).`,
  `Seeds ${SEEDS.join(", ")}, ${TRIALS} trials per seed and cell; rates are pooled over the seeds, each seed's own in brackets where it decides. The old rule (before issue 40: the top's slowest request beats every other's fastest, over the last run) sees the same rows.`,
  "",
  `Cost per configuration: GPU seconds = launches × (${LAUNCH_S} s load + ${FULL_PASS_S} s full pass × runs / ${DEFAULT_RUNS}), from the launch and pass times measured in bench/results/adaptive-sweep.md (scaling the whole pass with runs is an upper bound).`,
  "",
  `## The default settings (threshold ${pct(DEFAULT_VERDICT.threshold)}, confidence ${pct(DEFAULT_VERDICT.confidence)}, launch prior ${pct(DEFAULT_VERDICT.launchSd)})`,
  "",
  "| launches × requests | requests per configuration | GPU s per configuration | A/A tie, no offset | A/A tie, offset " + OFFSETS.slice(1).map(pct).join(", ") + " | 3 % found, no offset | 3 % found, offset | 3 % wrong winner (worst) | old rule: A/A false winner, no offset | old rule: A/A false winner, offset |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
);
const D = SETTINGS.find(isDefault);
if (!D) throw new Error(`the default settings (${key(DEFAULT_VERDICT)}) are not among those tried`);
const withOffset = OFFSETS.slice(1);
for (const size of SIZES) {
  const aa0 = pooled("A/A", 0, size);
  const aaO = withOffset.flatMap((o) => pooled("A/A", o, size));
  const d0 = pooled("3 %", 0, size);
  const dO = withOffset.flatMap((o) => pooled("3 %", o, size));
  const wrongRate = Math.max(wrong(d0, D), wrong(dO, D));
  lines.push(
    `| ${sizeText(size)}${size.launches === 1 && size.runs === DEFAULT_RUNS ? " (default)" : ""} | ${size.launches * size.runs} | ${gpuSeconds(size).toFixed(0)} | ${pct(aaTie(aa0, D))} (${perSeed(aa0, (c) => aaTie(c, D))}) | ${pct(aaTie(aaO, D))} (${perSeed(aaO, (c) => aaTie(c, D))}) | ${pct(detected(d0, D))} (${perSeed(d0, (c) => detected(c, D))}) | ${pct(detected(dO, D))} (${perSeed(dO, (c) => detected(c, D))}) | ${pct(wrongRate)} | ${pct(rate(aa0, (c) => c.oldWinner))} | ${pct(rate(aaO, (c) => c.oldWinner))} |`,
  );
}
const smallest = SIZES.filter((z) => {
  const ok = (o: number) => aaTie(pooled("A/A", o, z), D) >= 0.95 && detected(pooled("3 %", o, z), D) >= 0.8;
  return OFFSETS.every(ok);
}).sort((x, y) => gpuSeconds(x) - gpuSeconds(y))[0];
lines.push(
  "",
  smallest
    ? `Smallest benchmark tried that ties A/A in ≥ 95 % and finds the 3 % difference in ≥ 80 % at every offset, with the default settings: **${sizeText(smallest)}** (${smallest.launches} launches of ${smallest.runs} requests per configuration: ${smallest.launches * smallest.runs} requests, ${gpuSeconds(smallest).toFixed(0)} GPU s per configuration, ${(gpuSeconds(smallest) / gpuSeconds({ runs: DEFAULT_RUNS, launches: 1 })).toFixed(1)} times the default benchmark's ${gpuSeconds({ runs: DEFAULT_RUNS, launches: 1 }).toFixed(0)} GPU s).`
    : "No benchmark size tried ties A/A in ≥ 95 % and finds the 3 % difference in ≥ 80 % at every offset with the default settings.",
  "",
  "## Every setting tried",
  "",
  "The rule's settings: threshold (a difference under it is none) / confidence of the intervals; the launch prior 1.5 % throughout. Per size: the worst A/A tie rate over the offsets, and the worst rate of finding the 3 % difference.",
  "",
  `| launches × requests | ${SETTINGS.map((s) => `${pct(s.threshold)} / ${pct(s.confidence)}${isDefault(s) ? " (default)" : ""}`).join(" | ")} |`,
  `|---|${SETTINGS.map(() => "---:").join("|")}|`,
);
for (const size of SIZES) {
  lines.push(
    `| ${sizeText(size)} | ${SETTINGS.map((s) => {
      const aa = Math.min(...OFFSETS.map((o) => aaTie(pooled("A/A", o, size), s)));
      const found = Math.min(...OFFSETS.map((o) => detected(pooled("3 %", o, size), s)));
      return `A/A ${pct(aa)}, 3 % ${pct(found)}`;
    }).join(" | ")} |`,
  );
}
// The defaults' choice: of the settings that tie A/A in >= 95 % at every size and offset, the one that finds 3 % most often at the largest size.
const largest = SIZES[SIZES.length - 1];
const safe = SETTINGS.filter((s) => SIZES.every((z) => OFFSETS.every((o) => aaTie(pooled("A/A", o, z), s) >= 0.95)));
const strongest = [...safe].sort((x, y) => Math.min(...OFFSETS.map((o) => detected(pooled("3 %", o, largest), y))) - Math.min(...OFFSETS.map((o) => detected(pooled("3 %", o, largest), x))))[0];
const name = (s: VerdictSettings) => `${pct(s.threshold)} / ${pct(s.confidence)}`;
lines.push("", `Settings that tie A/A in ≥ 95 % at every size and offset tried: ${safe.map(name).join(", ") || "none"}; of them the one that finds the 3 % difference most often at ${sizeText(largest)}: ${strongest ? name(strongest) : "none"}${strongest && isDefault(strongest) ? " (the default, components/verdict/schema.ts)" : ` (the default is ${name(D)})`}.`);
const noneRate = rate(cells, (c) => c.rule[key(D)].none);
lines.push(
  "",
  `"No best" (the top not faster than the baseline, which is far slower here) with the default settings: ${pct(noneRate)} of all trials. The A/A false-winner rate of the rule is 100 % minus its tie rate and that; the old rule's is in its own columns. "3 % wrong winner": A named best although B is the faster.`,
);
const out = path.join(REPO_ROOT, "bench", "results");
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "winner-rule.json"), `${JSON.stringify({ command: COMMAND, seeds: SEEDS, trials: TRIALS, requestSd: REQUEST_SD, offsets: OFFSETS, defaults: DEFAULT_VERDICT, cells }, null, 1)}\n`);
fs.writeFileSync(path.join(out, "winner-rule.md"), `${lines.join("\n")}\n`);
process.stdout.write(`${lines.join("\n")}\n`);
