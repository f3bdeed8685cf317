// Fits the adaptive sweep's confidence (components/sweep/adaptive/calibration.ts): replays the
// strategy on a training family of generated surfaces (bench/adaptive/family.ts, a recorded
// seed; never the held-out family that bench/adaptive-sweep.ts draws from the commit), at the
// noise the headline uses, and writes the isotonic fit of "the answer was a hit" on the chance
// the answer computed to components/sweep/adaptive/calibration.json.
// Run: npx tsx bench/adaptive-calibrate.ts [--surfaces 300] [--seed 1] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { option, parseCommandOrExit, positiveInteger, positiveNumber } from "../lib/cli";
import { gridPoints } from "../components/sweep/adaptive/space";
import { replay } from "../components/sweep/adaptive/replay";
import { DEFAULT_STRATEGY } from "../components/sweep/adaptive/strategy";
import { isotonicFit } from "../components/sweep/adaptive/calibration";
import { GRID, MODEL_COSTS } from "./adaptive/grid";
import { drawFamily, toReplayTable, truthOf } from "./adaptive/family";
import { score } from "./adaptive/evaluate";

const COMMAND = "npx tsx bench/adaptive-calibrate.ts";
const { options } = parseCommandOrExit(COMMAND, {
  summary: "Fits the adaptive sweep's stated confidence on a training family of generated surfaces; writes components/sweep/adaptive/calibration.json.",
  options: {
    surfaces: option({ type: positiveInteger, placeholder: "N", description: "surfaces of the training family", default: "300" }),
    seed: option({ type: positiveInteger, placeholder: "N", description: "the training family's seed (the strategy was tuned on its first 60)", default: "1" }),
    hosts: option({ type: positiveInteger, placeholder: "N", description: "hosts in parallel", default: "2" }),
    "request-noise": option({ type: positiveNumber, placeholder: "SD", description: "relative per-request sd", default: "0.042" }),
    "launch-noise": option({ type: positiveNumber, placeholder: "SD", description: "relative sd of a launch's persistent offset", default: "0.015" }),
    "launch-seconds": option({ type: positiveNumber, placeholder: "S", description: "GPU seconds of a launch", default: "420" }),
  },
});


function main(): void {
  const points = gridPoints(GRID);
  const runs: { chance: number; hit: boolean }[] = [];
  for (const surface of drawFamily(points, options.seed, options.surfaces, { requestSd: options["request-noise"], launchSd: options["launch-noise"] })) {
    const table = toReplayTable(surface, options["launch-seconds"]);
    const truth = truthOf(surface);
    // Seeded as bench/adaptive/family-eval.ts seeds each surface's run.
    const r = replay(points, table, MODEL_COSTS, { ...DEFAULT_STRATEGY, objective: { kind: "short", longWeight: 0 }, budget: {}, seed: (surface.seed % 100000) + 1 }, options.hosts);
    runs.push({ chance: r.conclusion.chance, hit: score(r.conclusion.tied, truth, DEFAULT_STRATEGY.tolerance).hit });
  }
  const blocks = isotonicFit(runs).map((b) => ({ chance: Math.round(b.chance * 1e4) / 1e4, hitRate: Math.round(b.hitRate * 1e4) / 1e4, runs: b.runs }));
  const argv = process.argv.slice(2).join(" ");
  const out = {
    command: `${COMMAND}${argv ? ` ${argv}` : ""}`,
    family: { seed: options.seed, surfaces: options.surfaces, requestSd: options["request-noise"], launchSd: options["launch-noise"] },
    hits: runs.filter((r) => r.hit).length,
    blocks,
  };
  fs.writeFileSync(path.join(REPO_ROOT, "components", "sweep", "adaptive", "calibration.json"), JSON.stringify(out, null, 1) + "\n");
  process.stdout.write(`${out.hits}/${runs.length} hits; ${blocks.length} blocks:\n${blocks.map((b) => `  chance ${b.chance.toFixed(3)} -> ${(b.hitRate * 100).toFixed(1)} % (${b.runs} runs)`).join("\n")}\n`);
}

main();
