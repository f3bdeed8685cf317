// The component: benchmark numbers of the configuration a stack deployed, as outputs.
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { Deployment } from "../sglang-service/schema";
import { childUrn, connectionOf } from "../sglang-service/sglangService";
import { Benchmark, BENCHMARK_PROVIDER_VERSION } from "./provider";

export interface SglangBenchmarkArgs {
  deployment: Deployment;
  privateKey: pulumi.Input<string>;
  apiKey?: pulumi.Input<string>;
  /** The unit the service deployed; a new one re-runs the benchmark. */
  unitHash: pulumi.Input<string>;
  /**
   * Folder for the raw per-request JSONL files (one per stack), relative to the project
   * folder: the benchmark writes it in the checkout that runs `pulumi`, and state, shared
   * by everyone who deploys the stack, does not name anyone's checkout.
   */
  resultsDir: string;
}

export const BENCHMARK_TYPE = "dflash:sglang:Benchmark";

/** What a benchmark's numbers belong to (also how a sweep recognises a finished config). */
export function configurationOf(d: Deployment, stack: string): Record<string, unknown> {
  return { stack, ...d.speculative, sglangBuild: typeof d.sglangBuild === "string" ? d.sglangBuild : "custom", model: d.model.path };
}

export class SglangBenchmark extends pulumi.ComponentResource {
  /** Summary in sglang.bench_serving's names (null when benchmark.enabled is false). */
  readonly result: pulumi.Output<unknown>;
  /** When the numbers were taken. */
  readonly takenAt: pulumi.Output<string>;
  /** The raw per-request records of the last run, relative to the project folder of whoever ran it. */
  readonly resultsPath: pulumi.Output<string>;
  /** The configuration the numbers belong to. */
  readonly configuration: Record<string, unknown>;

  constructor(name: string, args: SglangBenchmarkArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super(BENCHMARK_TYPE, name, {}, opts);
    const d = args.deployment;
    const stack = pulumi.getStack();
    this.configuration = configurationOf(d, stack);
    const run = new Benchmark(
      `${name}-run`,
      {
        connection: connectionOf(d, args.privateKey),
        urn: childUrn(BENCHMARK_TYPE, `${name}-run`),
        label: `${d.service.unitName} (stack ${stack})`,
        listenAddress: d.service.listenAddress,
        port: d.service.port,
        model: d.model.servedModelName ?? d.model.path,
        apiKey: args.apiKey ? pulumi.secret(args.apiKey) : "",
        settings: d.benchmark,
        unitHash: args.unitHash,
        configuration: this.configuration,
        resultsPath: path.join(args.resultsDir, `${stack}.jsonl`),
        providerVersion: BENCHMARK_PROVIDER_VERSION,
      },
      { parent: this },
    );
    this.result = run.result;
    this.takenAt = run.takenAt;
    this.resultsPath = run.resultsPath;
    this.registerOutputs({ result: this.result, takenAt: this.takenAt, resultsPath: this.resultsPath });
  }
}
