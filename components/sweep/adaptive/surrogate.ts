// Pure: a Gaussian-process surrogate of the objective over the grid's coordinates (what
// Vidur-Search and SCOOT replace launches with, here in a plain form): a squared-exponential
// kernel with one length per axis, plus a share of an additive kernel (one per axis: budget,
// topk and window mostly act on their own, so a launch informs every configuration that
// shares one of its settings), lengths and share chosen among a few by the marginal
// likelihood, each observation with its own noise (its measured standard error). It
// predicts a mean and a standard deviation for every configuration.

export interface Observation {
  x: readonly number[];
  /** The objective, relative (e.g. tok/s divided by the best measured). */
  y: number;
  /** Standard deviation of the measurement, same units as y. */
  sd: number;
}

export interface Prediction {
  mean: number;
  sd: number;
}

/** Length scales tried per axis (budget, topk, window), in grid units of [0, 1]. */
const LENGTHS: number[][] = [
  [0.2, 0.35, 0.6, 1.0],
  [0.35, 0.6, 1.2],
  [0.5, 2.0],
];

/** Shares of the additive part tried. */
const ADDITIVE = [0, 0.5, 0.8];

function kernel(a: readonly number[], b: readonly number[], lengths: number[], variance: number, additive: number): number {
  let d2 = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const di = ((a[i] - b[i]) / lengths[i]) ** 2;
    d2 += di;
    sum += Math.exp(-di / 2);
  }
  return variance * ((1 - additive) * Math.exp(-d2 / 2) + (additive * sum) / a.length);
}

/** Cholesky factor (lower) of a symmetric positive-definite matrix. */
function cholesky(m: number[][]): number[][] {
  const n = m.length;
  const l = m.map(() => new Array<number>(n).fill(0));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = m[i][j];
      for (let k = 0; k < j; k++) s -= l[i][k] * l[j][k];
      l[i][j] = i === j ? Math.sqrt(Math.max(s, 1e-12)) : s / l[j][j];
    }
  }
  return l;
}

function solveLower(l: number[][], b: number[]): number[] {
  const x = new Array<number>(b.length).fill(0);
  for (let i = 0; i < b.length; i++) {
    let s = b[i];
    for (let k = 0; k < i; k++) s -= l[i][k] * x[k];
    x[i] = s / l[i][i];
  }
  return x;
}

function solveUpper(l: number[][], b: number[]): number[] {
  const n = b.length;
  const x = new Array<number>(n).fill(0);
  for (let i = n - 1; i >= 0; i--) {
    let s = b[i];
    for (let k = i + 1; k < n; k++) s -= l[k][i] * x[k];
    x[i] = s / l[i][i];
  }
  return x;
}

interface Fit {
  lengths: number[];
  additive: number;
  variance: number;
  mean: number;
  chol: number[][];
  alpha: number[];
  logLikelihood: number;
}

function fitWith(obs: Observation[], lengths: number[], additive: number, mean: number, variance: number): Fit {
  const k = obs.map((a, i) => obs.map((b, j) => kernel(a.x, b.x, lengths, variance, additive) + (i === j ? a.sd ** 2 + 1e-9 : 0)));
  const chol = cholesky(k);
  const r = obs.map((o) => o.y - mean);
  const z = solveLower(chol, r);
  const alpha = solveUpper(chol, z);
  const logDet = chol.reduce((s, row, i) => s + Math.log(row[i]), 0);
  const logLikelihood = -0.5 * z.reduce((s, v) => s + v * v, 0) - logDet;
  return { lengths, additive, variance, mean, chol, alpha, logLikelihood };
}

/** The surrogate of `obs`: a predictor for any point. Needs at least one observation. */
export function surrogate(obs: Observation[]): (x: readonly number[]) => Prediction {
  const ys = obs.map((o) => o.y);
  const mean = ys.reduce((s, y) => s + y, 0) / ys.length;
  // The spread a configuration can have around the mean, at least a few per cent (one
  // observation, or a flat start, says nothing about how far the grid reaches).
  const spread = Math.max(0.03, Math.sqrt(ys.reduce((s, y) => s + (y - mean) ** 2, 0) / ys.length), (Math.max(...ys) - Math.min(...ys)) / 2);
  const variance = spread ** 2;
  let best: Fit | undefined;
  for (const a of LENGTHS[0]) for (const b of LENGTHS[1]) for (const c of LENGTHS[2]) for (const share of ADDITIVE) {
    const fit = fitWith(obs, [a, b, c], share, mean, variance);
    if (!best || fit.logLikelihood > best.logLikelihood) best = fit;
  }
  const f = best!;
  return (x) => {
    const kx = obs.map((o) => kernel(x, o.x, f.lengths, f.variance, f.additive));
    const m = f.mean + kx.reduce((s, v, i) => s + v * f.alpha[i], 0);
    const v = solveLower(f.chol, kx);
    const var_ = f.variance - v.reduce((s, t) => s + t * t, 0);
    return { mean: m, sd: Math.sqrt(Math.max(var_, 1e-12)) };
  };
}

/** Standard normal cumulative distribution (Abramowitz-Stegun 7.1.26, error under 1.5e-7). */
export function normalCdf(z: number): number {
  const t = 1 / (1 + (0.3275911 * Math.abs(z)) / Math.SQRT2);
  const erf = 1 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * Math.exp(-(z * z) / 2);
  return z >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}
