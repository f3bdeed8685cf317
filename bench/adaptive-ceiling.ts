// Benchmark: how often could any ranking of measurements hold the true best, at the issue's
// noise, if every configuration were measured? Issue 40 asks the adaptive sweep for >= 95 % of
// runs within 1 % of the true best (or a tie of <= 3 holding it) at <= 35 % of the full grid's
// GPU time. This replays the other end: every configuration launched `r` times (r x the full
// grid's GPU time), each launch with its persistent offset and one full pass (or a pass without
// per-request noise, as if repeated without end), and the answer the scoring favours most: the
// three highest measured means as a tie (bench/adaptive/evaluate.ts score; a set of three holds
// the best whenever a smaller one does). It runs on the training family only (seed 1, the
// surfaces the strategy was tuned on); the held-out family is not drawn here.
// Run: npx tsx bench/adaptive-ceiling.ts [--surfaces 300] [--draws 20] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { option, parseCommandOrExit, positiveInteger, positiveNumber, listOf } from "../lib/cli";
import { gridPoints } from "../components/sweep/adaptive/space";
import { drawLaunchOffset, drawPass } from "../components/sweep/adaptive/replay";
import { mix, prng } from "../lib/prng";
import { GRID, MODEL_COSTS } from "./adaptive/grid";
import { drawFamily, toReplayTable, truthOf } from "./adaptive/family";
import { score } from "./adaptive/evaluate";

const COMMAND = "npx tsx bench/adaptive-ceiling.ts";
const { options } = parseCommandOrExit(COMMAND, {
  summary: "The hit rate of ranking every configuration's measurements (r launches each) on the training family; writes bench/results/adaptive-ceiling.{md,json}.",
  options: {
    surfaces: option({ type: positiveInteger, placeholder: "N", description: "surfaces of the training family (seed 1)", default: "300" }),
    draws: option({ type: positiveInteger, placeholder: "N", description: "seeded replays per surface and setting", default: "20" }),
    launches: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "launches per configuration", default: "1,2,3,4,6" }),
    seed: option({ type: positiveInteger, placeholder: "N", description: "the draws' seed (recorded in the result)", default: "4040" }),
    "request-noise": option({ type: positiveNumber, placeholder: "SD", description: "relative per-request sd (the simulator's measured spread)", default: "0.042" }),
    "launch-noise": option({ type: positiveNumber, placeholder: "SD", description: "relative sd of a launch's persistent offset", default: "0.015" }),
  },
});

interface Row {
  passes: "one full pass" | "no per-request noise";
  launches: number;
  top3: number;
  top1: number;
  trials: number;
  /** The rate of each fifth of the surfaces: its spread says how much the family decides. */
  blocks: number[];
}

function main(): void {
  const points = gridPoints(GRID);
  const family = drawFamily(points, 1, options.surfaces, { requestSd: options["request-noise"], launchSd: options["launch-noise"] });
  const rows: Row[] = [];
  for (const passes of ["one full pass", "no per-request noise"] as const) {
    for (const r of options.launches) {
      let top3 = 0;
      let top1 = 0;
      const blockHits = [0, 0, 0, 0, 0];
      const blockTrials = [0, 0, 0, 0, 0];
      family.forEach((surface, i) => {
        const table = toReplayTable(surface, 420);
        const truth = truthOf(surface);
        const rand = prng(mix(options.seed, i * 1000 + r * 10 + (passes === "one full pass" ? 1 : 2)));
        for (let d = 0; d < options.draws; d++) {
          const measured: [string, number][] = [];
          for (const [name, e] of Object.entries(table)) {
            if (e.failure) continue;
            let sum = 0;
            for (let k = 0; k < r; k++) {
              const offset = drawLaunchOffset(rand, e);
              sum += passes === "one full pass" ? drawPass(rand, e, "full", MODEL_COSTS, offset).short.median : e.short.mean * offset;
            }
            measured.push([name, sum / r]);
          }
          measured.sort((a, b) => b[1] - a[1]);
          const h3 = score(measured.slice(0, 3).map(([n]) => n), truth, 0.01).hit;
          const h1 = score(measured.slice(0, 1).map(([n]) => n), truth, 0.01).hit;
          top3 += h3 ? 1 : 0;
          top1 += h1 ? 1 : 0;
          const b = Math.floor((i * 5) / family.length);
          blockHits[b] += h3 ? 1 : 0;
          blockTrials[b] += 1;
        }
      });
      const trials = family.length * options.draws;
      rows.push({ passes, launches: r, top3: top3 / trials, top1: top1 / trials, trials, blocks: blockHits.map((h, b) => h / Math.max(1, blockTrials[b])) });
    }
  }

  // How crowded the top is: configurations within 1 %, 1-3 % and 3-5 % below each surface's best.
  const crowd = family.map((s) => {
    const v = [...truthOf(s).values()].sort((a, b) => b - a);
    const best = v[0];
    const within = (lo: number, hi: number) => v.slice(1).filter((x) => x < best * (1 - lo) && x >= best * (1 - hi)).length;
    return { w1: v.slice(1).filter((x) => x >= best * 0.99).length, w3: within(0.01, 0.03), w5: within(0.03, 0.05) };
  });
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  const command = [COMMAND, ...process.argv.slice(2)].join(" ");
  const lines = [
    "# The ceiling of ranking measurements, every configuration measured",
    "",
    `Command: \`${command}\` (${new Date().toISOString()}).`,
    "",
    `Training family only: bench/adaptive/family.ts, seed 1, ${family.length} surfaces (the ones the adaptive sweep was tuned on; the held-out family is not drawn here). Noise as the headline of bench/results/adaptive-sweep.md: ${pct(options["request-noise"])} per request, a launch's persistent offset of ${pct(options["launch-noise"])}. ${options.draws} seeded replays per surface and setting (draw seed ${options.seed}).`,
    "",
    "Every configuration that starts is launched r times (r x the full grid's GPU time), each launch with its own offset and either one full pass (6 requests, their median, as the replay draws it) or a pass without per-request noise (as if repeated without end on that server). The answer is the three highest measured means as a tie (a set of three holds the best whenever a smaller one does: the most favourable answer the scoring allows), or the highest alone. A hit as in bench/adaptive/evaluate.ts.",
    "",
    "| passes | launches per configuration | GPU time / full grid | top 3 hold the best | spread over fifths of the family | top alone within 1 % |",
    "|---|---:|---:|---:|---|---:|",
    ...rows.map((r) => `| ${r.passes} | ${r.launches} | ${r.launches * 100} % | ${pct(r.top3)} | ${pct(Math.min(...r.blocks))}-${pct(Math.max(...r.blocks))} | ${pct(r.top1)} |`),
    "",
    `How crowded the top is (configurations other than the best, per surface; median / 90th percentile): within 1 % of the best ${q(crowd.map((c) => c.w1), 0.5)} / ${q(crowd.map((c) => c.w1), 0.9)}; 1-3 % below it ${q(crowd.map((c) => c.w3), 0.5)} / ${q(crowd.map((c) => c.w3), 0.9)}; 3-5 % below it ${q(crowd.map((c) => c.w5), 0.5)} / ${q(crowd.map((c) => c.w5), 0.9)}. Surfaces with three or more configurations 1-3 % below the best: ${crowd.filter((c) => c.w3 >= 3).length} of ${family.length}.`,
    "",
    "What it says: ranking measurements holds the best in 95 % of runs only with the whole grid launched about twice, each server benchmarked without end, or about six times with one full pass each (see the rows above); with one launch each it holds it in the first row's share. A sweep at 35 % of the full grid's GPU time measures about a third of the configurations once, so it reaches 95 % only through an estimator far better than ranking: one that pools neighbours on a smooth surface averages launch offsets across configurations there, and smooths isolated peaks away doing it. This is evidence about ranking, not a bound on every estimator.",
    "",
  ];
  const dir = path.join(REPO_ROOT, "bench", "results");
  fs.writeFileSync(path.join(dir, "adaptive-ceiling.md"), lines.join("\n"));
  fs.writeFileSync(path.join(dir, "adaptive-ceiling.json"), JSON.stringify({ command, options, rows }, null, 1) + "\n");
  process.stdout.write(lines.join("\n"));
}

main();
