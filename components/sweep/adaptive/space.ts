// Pure: the configurations of a grid as points an adaptive sweep can reason about: their
// stack names (the users' convention, grid.ts), their speculative block, and coordinates in
// which "near" means "alike" (octaves of budget and topk, window or none).
import { GridSpec, stackName } from "../grid";

export interface GridPoint {
  /** The stack name, e.g. b16t4-w2048. */
  name: string;
  budget: number;
  topk: number;
  window: number | "none";
  compactCache: boolean;
  /** Coordinates in [0, 1]: log2 budget, log2 topk, window (log2, none as the largest). */
  x: [number, number, number];
}

const NO_WINDOW_OCTAVES = 16;

/** Pure: the grid's valid configurations, in stack-name order (the same skips as `npm run grid`). */
export function gridPoints(g: GridSpec): GridPoint[] {
  const span = (values: number[]) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    return (v: number) => (hi > lo ? (v - lo) / (hi - lo) : 0);
  };
  const octave = (w: number | "none") => (w === "none" ? NO_WINDOW_OCTAVES : Math.log2(w));
  const ub = span(g.budgets.map(Math.log2));
  const ut = span(g.topks.map(Math.log2));
  const uw = span(g.windows.map(octave));
  const points: GridPoint[] = [];
  for (const budget of g.budgets) {
    for (const topk of g.topks) {
      for (const window of g.windows) {
        if (topk > budget || (window !== "none" && window < (g.draftTokens ?? 16))) continue;
        points.push({ name: stackName(budget, topk, window), budget, topk, window, compactCache: window !== "none" && g.compactCache !== "off", x: [ub(Math.log2(budget)), ut(Math.log2(topk)), uw(octave(window))] });
      }
    }
  }
  return points.sort((a, b) => a.name.localeCompare(b.name));
}

/** Pure: the `dflash-sglang:speculative` block of a point (what its stack deploys). */
export function speculativeOf(p: GridPoint, draftTokens?: number): Record<string, unknown> {
  return { algorithm: "DDTREE", budget: p.budget, topk: p.topk, draftWindowSize: p.window, compactCache: p.compactCache, ...(draftTokens !== undefined ? { draftTokens } : {}) };
}

/**
 * Pure: whether `p` needs at least the memory of `q`: a tree at least as large (budget and
 * topk) and a drafter cache at least as large (no window counts as the largest). A point that
 * ran out of memory rules out every point that needs at least its memory.
 */
export function needsAtLeast(p: GridPoint, q: GridPoint): boolean {
  const w = (x: GridPoint) => (x.window === "none" ? Infinity : x.window);
  return p.budget >= q.budget && p.topk >= q.topk && w(p) >= w(q);
}
