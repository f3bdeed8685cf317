// Median and spread of repeated measurements.
export interface Summary {
  n: number;
  median: number;
  min: number;
  max: number;
}

export function summarize(values: number[]): Summary {
  if (values.length === 0) throw new Error("no measurements");
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { n: s.length, median, min: s[0], max: s[s.length - 1] };
}
