export { SglangBenchmark, SglangBenchmarkArgs } from "./benchmark";
export { benchmarkSchema, BenchmarkSettings } from "./schema";
