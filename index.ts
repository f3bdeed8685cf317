// One stack = one SGLang configuration on one GPU host. Reads and validates the stack's
// config, builds the component, exports what reviewers and benchmarks read.
import { readStackDeployment, SglangService } from "./components/sglang-service";
import { SglangBenchmark } from "./components/benchmark";

const { deployment, privateKey, nodeKeys, secrets } = readStackDeployment();
const service = new SglangService("sglang", { deployment, privateKey, nodeKeys, secrets });
const bench = new SglangBenchmark(
  "benchmark",
  { deployment, privateKey, apiKey: secrets.apiKey, unitHash: service.unitHash, serverArgs: service.serverArgs, resultsDir: "bench/out" },
  { dependsOn: [service] },
);

export const host = deployment.host.address;
export const unitName = deployment.service.unitName;
export const unitHash = service.unitHash;
export const launchCommand = service.launchCommand;
export const serverArgs = service.serverArgs;
export const restartTimings = service.timings;
// The generation serving on node 0 (its configuration kept whole on the host; README, "Generations").
export const generation = service.generation;
// Of the benchmark's timed short-context requests (null without speculation or benchmark);
// the server's own average at readiness, from a few probe tokens, is `readinessAcceptLength`.
export const acceptLength = bench.acceptLength;
export const readinessAcceptLength = service.acceptLength;
export const benchmark = bench.result;
export const benchmarkTakenAt = bench.takenAt;
export const benchmarkResultsPath = bench.resultsPath;
export const configuration = bench.configuration;
