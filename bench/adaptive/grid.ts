// The grid and surfaces of the adaptive sweep's benchmarks (bench/adaptive-sweep.ts, bench/adaptive-e2e.ts).
import * as fs from "node:fs";
import type { GridSpec } from "../../components/sweep/grid";
import type { ReplayCosts } from "../../components/sweep/adaptive/replay";

/** Budgets 4-32, topk 2-8, a window or none (compact cache with the window): 38 valid configurations. */
export const GRID: GridSpec = { budgets: [4, 6, 8, 12, 16, 24, 32], topks: [2, 4, 8], windows: [2048, "none"], compactCache: "auto" };

/** The surfaces the benchmarks run on, in bench/surfaces/. */
export const SURFACES = ["single-peak", "ridge", "two-peaks", "oom", "noisy"] as const;

export function readSurfaceFile(file: string): unknown {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

/** The passes' costs at the seed's scale: the benchmarks as the simulator measures them (it decodes at real speed), and the engine's fixed cost of an `up` (bench/results/reconfigure.md). */
export const MODEL_COSTS: ReplayCosts = { shortRequests: 3, fullRequests: 6, shortPassSeconds: 6, fullPassSeconds: 18, passOverheadSeconds: 10 };
