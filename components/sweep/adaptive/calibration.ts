// Pure: the sweep's stated confidence, calibrated. The chance the answer computes (strategy.ts
// answerOf: draws from the estimates and the surrogate) is a model's: on families of generated
// surfaces it came true less often than it said (a surrogate is surest exactly where it has not
// looked). So the confidence a report states is that chance mapped through what it was worth on
// training families: a logistic regression of "the answer was a hit" on the chance's log-odds
// (Platt scaling: two numbers, so it cannot chase one family's quirks as a table of blocks
// did), fitted by bench/adaptive-calibrate.ts on several families drawn from recorded seeds
// (never the held-out family), stored with its command in calibration.json. It is calibrated to
// this project's yardstick (the simulator's noise and the generated family), not to real GPUs:
// a real grid's surprises are not in it.
import fitted from "./calibration.json";

/** The fit: confidence = 1 / (1 + exp(-(intercept + slope * logit(chance)))), from chances of `lowestChance` up. */
export interface CalibrationFit {
  intercept: number;
  slope: number;
  /** The lowest chance of the runs it was fitted on (absent: no floor). */
  lowestChance?: number;
}

/** Chances are clamped this far from 0 and 1 before their log-odds (a chance of 1 from 400 draws is not certainty). */
const CLAMP = 1e-3;

const logit = (p: number) => {
  const q = Math.min(1 - CLAMP, Math.max(CLAMP, p));
  return Math.log(q / (1 - q));
};

/**
 * Pure: a chance through a fit. Below the lowest chance the fit saw, in proportion to the chance
 * (the fit's line would lift a sweep cut short by its budget toward the base rate; nothing it
 * was fitted on says a chance that low is worth more).
 */
export function calibrate(chance: number, fit: CalibrationFit): number {
  const through = (c: number) => 1 / (1 + Math.exp(-(fit.intercept + fit.slope * logit(c))));
  const low = fit.lowestChance;
  return low !== undefined && chance < low ? (through(low) * chance) / low : through(chance);
}

/**
 * Pure: the maximum-likelihood fit of hits on the chances' log-odds (Newton's method). Refuses
 * what cannot be fitted: fewer than ten runs, runs that all hit or all missed, chances that do
 * not vary, or chances that split hits from misses exactly (no maximum).
 */
export function logisticFit(points: readonly { chance: number; hit: boolean }[]): CalibrationFit {
  const hits = points.filter((p) => p.hit).length;
  if (points.length < 10 || hits === 0 || hits === points.length) throw new Error(`logisticFit: ${points.length} runs with ${hits} hits: a fit needs at least ten runs, some hits and some misses`);
  const xs = points.map((p) => logit(p.chance));
  if (Math.max(...xs) - Math.min(...xs) < 1e-9) throw new Error(`logisticFit: the ${points.length} runs' chances do not vary (all ${points[0].chance}): no slope to fit`);
  let [a, b] = [0, 0];
  let converged = false;
  for (let iteration = 0; iteration < 100 && !converged; iteration++) {
    // Gradient and Hessian of the negative log-likelihood in (a, b).
    let [ga, gb, haa, hab, hbb] = [0, 0, 0, 0, 0];
    points.forEach((p, i) => {
      const q = 1 / (1 + Math.exp(-(a + b * xs[i])));
      const r = q - (p.hit ? 1 : 0);
      const w = q * (1 - q);
      ga += r;
      gb += r * xs[i];
      haa += w;
      hab += w * xs[i];
      hbb += w * xs[i] * xs[i];
    });
    const det = haa * hbb - hab * hab;
    if (!(det > 0)) break;
    const da = (hbb * ga - hab * gb) / det;
    const db = (haa * gb - hab * ga) / det;
    a -= da;
    b -= db;
    converged = Math.abs(da) + Math.abs(db) < 1e-10;
  }
  // Hits and misses split cleanly by the chance have no fit: the slope grows without end.
  if (!converged) throw new Error(`logisticFit: no fit of ${points.length} runs after 100 steps (do the chances split hits from misses exactly?)`);
  return { intercept: a, slope: b, lowestChance: Math.min(...points.map((p) => p.chance)) };
}

/** The fit in use (calibration.json): what a report's confidence is mapped through. */
export const CALIBRATION: CalibrationFit = (fitted as { fit: CalibrationFit }).fit;
