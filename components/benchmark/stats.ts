// Pure statistics of repeated measurements: median and spread, mean, percentiles.
export interface Summary {
  n: number;
  median: number;
  mean: number;
  min: number;
  max: number;
  p99: number;
}

/** Linear-interpolated percentile (p in 0..100) of sorted values. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

export function summarize(values: number[]): Summary {
  if (values.length === 0) throw new Error("no measurements to summarize");
  const s = [...values].sort((a, b) => a - b);
  return {
    n: s.length,
    median: percentile(s, 50),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    min: s[0],
    max: s[s.length - 1],
    p99: percentile(s, 99),
  };
}
