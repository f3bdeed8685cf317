// The benchmarks use the same statistics as the benchmark component.
export { summarize, Summary } from "../components/benchmark/stats";
