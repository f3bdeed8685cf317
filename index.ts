// One stack = one SGLang configuration on one GPU host (or, with `fleet:`, on several
// replicas behind HAProxy). Reads and validates the stack's config, builds the components,
// exports what reviewers and benchmarks read.
import { readStackDeployment, SglangService } from "./components/sglang-service";
import { SglangBenchmark } from "./components/benchmark";
import { SglangFleet } from "./components/fleet";

const { deployment, privateKey, nodeKeys, fleetKeys, secrets } = readStackDeployment();
// A fleet rolls its replicas (replica 1 is `host`, as the single stack's component); the
// benchmark measures one host and is not run for a fleet (docs/design/fleet.md).
const fleet = deployment.fleet && fleetKeys ? new SglangFleet("fleet", { deployment, privateKey, fleetKeys, secrets }) : undefined;
const service = fleet ? fleet.replicas[0] : new SglangService("sglang", { deployment, privateKey, nodeKeys, secrets });
const bench = fleet
  ? undefined
  : new SglangBenchmark(
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
// The generation serving on node 0 (its configuration kept whole on the host; docs/design/safety.md, "Generations").
export const generation = service.generation;
// Of the benchmark's timed short-context requests (null without speculation or benchmark);
// the server's own average at readiness, from a few probe tokens, is `readinessAcceptLength`.
export const acceptLength = bench?.acceptLength ?? null;
export const readinessAcceptLength = service.acceptLength;
// The benchmark in a few lines (components/benchmark/summary.ts): what the terminal shows after
// each `up`, and `npx pulumi stack output benchmark`. Its full numbers, in sglang.bench_serving's
// names, are `__benchmarkResult` (compare.ts FULL_RESULT_OUTPUT; storedResultOf reads them): Pulumi
// shows no output whose name begins with "__" in `up` or `preview`. All null when no benchmark ran.
export const benchmark = bench?.summary ?? null;
export const __benchmarkResult = bench?.result ?? null;
export const benchmarkTakenAt = bench?.takenAt ?? null;
export const benchmarkResultsPath = bench?.resultsPath ?? null;
export const configuration = bench?.configuration ?? null;
// A fleet only (null otherwise): where clients reach it, and each replica's unit and generation.
export const fleetEndpoint = fleet?.endpoint ?? null;
export const fleetReplicas = fleet?.summary ?? null;
