// The performance model's own table of a grid on a surface: what a full-grid sweep on a
// simulated host with that surface would measure, on average, and the true best (known only
// in simulation). The replay (components/sweep/adaptive/replay.ts) draws its passes from it.
import { readSurfaceFile } from "./grid";
import { generationDecodeRate, acceptLength, SpecSettings } from "../../simhost/sim/sglang/perf";
import { outOfMemory, parseSurface, PerfSurface } from "../../simhost/sim/sglang/surface";
import type { GridPoint } from "../../components/sweep/adaptive/space";
import type { ReplayEntry } from "../../components/sweep/adaptive/replay";
import type { Objective } from "../../components/sweep/adaptive/strategy";

export function readSurface(file: string): PerfSurface {
  return parseSurface(readSurfaceFile(file));
}

export function specOf(p: GridPoint): SpecSettings {
  return { algorithm: "DDTREE", blockSize: 16, budget: p.budget, topk: p.topk, window: p.window === "none" ? null : p.window, compactCache: p.compactCache, steps: 3 };
}

export interface ModelTableOptions {
  shortPromptTokens: number;
  longContextTokens: number;
  maxTokens: number;
  /** Relative standard deviation of one request's decode rate without the surface's own noise (the text's). */
  baseNoise: number;
  launchSeconds: number;
  /** The simulated hosts' speedScale (decode and prefill that many times as fast). Defaults to 1. */
  speedScale?: number;
  /**
   * Relative sd of a launch's persistent offset (ReplayEntry.launchSd). Defaults to the
   * surface's own, as the simulated hosts draw it (noise.launchSd: 1.5 % unless the surface
   * says otherwise; none without a noise section).
   */
  launchSd?: number;
}

/** The model's mean figures per point (a failed launch, in the out-of-memory region, costs half a load). */
export function modelTable(points: GridPoint[], surface: PerfSurface, o: ModelTableOptions): Record<string, ReplayEntry> {
  const sd = Math.hypot(o.baseNoise, surface.noise?.sd ?? 0);
  const launchSd = o.launchSd ?? surface.noise?.launchSd ?? 0;
  return Object.fromEntries(
    points.map((p) => {
      const s = specOf(p);
      const oom = outOfMemory(surface, s);
      const entry: ReplayEntry = {
        ...(oom ? { failure: { cause: "Capture cuda graph failed: CUDA out of memory", outOfMemory: true } } : {}),
        short: { mean: generationDecodeRate(s, o.shortPromptTokens, o.maxTokens, o.speedScale ?? 1, surface), sd },
        long: { mean: generationDecodeRate(s, o.longContextTokens, o.maxTokens, o.speedScale ?? 1, surface), sd },
        acceptLength: acceptLength(s, o.shortPromptTokens, surface),
        codingPassed: true,
        launchSeconds: oom ? o.launchSeconds / 2 : o.launchSeconds,
        ...(launchSd > 0 ? { launchSd } : {}),
      };
      return [p.name, entry];
    }),
  );
}

/** The true objective of every point that starts (noise-free means). */
export function trueValues(table: Record<string, ReplayEntry>, o: Objective): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, e] of Object.entries(table)) {
    if (e.failure || e.codingPassed === false) continue;
    const long = e.long?.mean ?? 0;
    out.set(name, o.kind === "short" ? e.short.mean : o.kind === "long" ? long : (1 - o.longWeight) * e.short.mean + o.longWeight * long);
  }
  return out;
}
