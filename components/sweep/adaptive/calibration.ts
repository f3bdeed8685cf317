// Pure: the sweep's stated confidence, calibrated. The chance the answer computes (strategy.ts
// answerOf: draws from the estimates and the surrogate) is a model's: on a family of generated
// surfaces it came true less often than it said at the top (a surrogate is surest exactly where
// it has not looked). So the confidence a report states is that chance mapped through what it
// was worth on a training family: an isotonic regression (pool-adjacent-violators) of "the answer
// was a hit" on the chance, fitted by bench/adaptive-calibrate.ts on surfaces drawn from a
// recorded seed (never the held-out family), stored with its command in calibration.json. It is
// calibrated to this project's yardstick (the simulator's noise and the generated family), not
// to real GPUs: a real grid's surprises are not in it.
import fitted from "./calibration.json";

/** One pooled block of the fit: the mean chance of its runs and the share of them that hit. */
export interface CalibrationBlock {
  chance: number;
  hitRate: number;
  runs: number;
}

/** A block of fewer runs says little (one run is a hit rate of 0 or 1): it is pooled with a neighbour. */
export const MIN_BLOCK_RUNS = 10;

/** Pure: the isotonic (non-decreasing) fit of hits on chances: pool adjacent violators, then pool blocks under MIN_BLOCK_RUNS with their smaller neighbour. */
export function isotonicFit(points: readonly { chance: number; hit: boolean }[], minRuns = MIN_BLOCK_RUNS): CalibrationBlock[] {
  const sorted = [...points].sort((a, b) => a.chance - b.chance);
  const blocks: { sumChance: number; hits: number; runs: number }[] = [];
  for (const p of sorted) {
    blocks.push({ sumChance: p.chance, hits: p.hit ? 1 : 0, runs: 1 });
    while (blocks.length >= 2 && blocks[blocks.length - 2].hits / blocks[blocks.length - 2].runs >= blocks[blocks.length - 1].hits / blocks[blocks.length - 1].runs) {
      const last = blocks.pop()!;
      const prev = blocks[blocks.length - 1];
      prev.sumChance += last.sumChance;
      prev.hits += last.hits;
      prev.runs += last.runs;
    }
  }
  // Pooling two adjacent blocks of a non-decreasing fit keeps it non-decreasing.
  for (let i = blocks.findIndex((b) => b.runs < minRuns); i >= 0 && blocks.length > 1; i = blocks.findIndex((b) => b.runs < minRuns)) {
    const j = i === 0 ? 1 : i === blocks.length - 1 ? i - 1 : blocks[i - 1].runs <= blocks[i + 1].runs ? i - 1 : i + 1;
    const [lo, hi] = [Math.min(i, j), Math.max(i, j)];
    const merged = { sumChance: blocks[lo].sumChance + blocks[hi].sumChance, hits: blocks[lo].hits + blocks[hi].hits, runs: blocks[lo].runs + blocks[hi].runs };
    blocks.splice(lo, 2, merged);
  }
  return blocks.map((b) => ({ chance: b.sumChance / b.runs, hitRate: b.hits / b.runs, runs: b.runs }));
}

/**
 * Pure: a chance through a fit: linear between the blocks' (chance, hit rate); below the first
 * block, in proportion to the chance (the fit saw no such chance: a sweep cut short by its
 * budget must not read as the fit's lowest block); flat above the last.
 */
export function calibrate(chance: number, blocks: readonly CalibrationBlock[]): number {
  if (blocks.length === 0) return chance;
  if (chance <= blocks[0].chance) return (blocks[0].hitRate * chance) / blocks[0].chance;
  for (let i = 1; i < blocks.length; i++) {
    const [a, b] = [blocks[i - 1], blocks[i]];
    if (chance <= b.chance) return a.hitRate + ((b.hitRate - a.hitRate) * (chance - a.chance)) / (b.chance - a.chance || 1);
  }
  return blocks[blocks.length - 1].hitRate;
}

/** The fit in use (calibration.json): what a report's confidence is mapped through. */
export const CALIBRATION: readonly CalibrationBlock[] = (fitted as { blocks: CalibrationBlock[] }).blocks;
