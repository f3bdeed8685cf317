// The benchmarks use the same statistics as the benchmark component.
export { summarize, Summary } from "../components/benchmark/stats";

/** Seconds `fn` took, wall clock. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = Date.now();
  await fn();
  return (Date.now() - t) / 1000;
}
