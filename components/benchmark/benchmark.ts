// The component: benchmark numbers of the configuration a stack deployed, as outputs.
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import { Deployment, modelSchema, serviceSchema } from "../sglang-service/schema";
import { childUrn, connectionOf } from "../sglang-service/sglangService";
import { Benchmark, BENCHMARK_PROVIDER_VERSION } from "./provider";
import { benchmarkStackOutputs, type BenchmarkSummary } from "./summary";
import type { StoredResult } from "./compare";

export interface SglangBenchmarkArgs {
  deployment: Deployment;
  privateKey: pulumi.Input<string>;
  apiKey?: pulumi.Input<string>;
  /** The unit the service deployed; a new one re-runs the benchmark. */
  unitHash: pulumi.Input<string>;
  /** The server's public arguments as the service's readiness step proved them (checked before measuring). */
  serverArgs: pulumi.Input<Record<string, unknown>>;
  /**
   * Folder for the raw per-request JSONL files (one per stack), relative to the project
   * folder: the benchmark writes it in the checkout that runs `pulumi`, and state, shared
   * by everyone who deploys the stack, does not name anyone's checkout.
   */
  resultsDir: string;
}

export const BENCHMARK_TYPE = "dflash:sglang:Benchmark";

const sha12 = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 12);

/** Deterministic JSON (sorted keys), so that a hash changes only with a value. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().filter((k) => (v as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

/** The benchmark's code that decides what is sent and how it is counted: numbers of other code are not comparable. */
const BENCHMARK_CODE_FILES = ["run.ts", "client.ts", "workload.ts", "stats.ts", "coding.ts"];

/** sha256 (12 hex) of the benchmark's code, read once per program run. */
export const BENCHMARK_CODE_VERSION = sha12(BENCHMARK_CODE_FILES.map((f) => fs.readFileSync(path.join(__dirname, f), "utf8")).join("\0"));

/** A deployment setting as the configuration names it: its value, or a fingerprint where the value may be a secret. */
export type DeploymentSetting = string | number | boolean | null | string[];

/**
 * Pure: every setting of what runs but the speculative ones, by its key ("model.quantization"),
 * sorted: the report takes a no-speculation baseline only where all of them are the same, and
 * names the one that is not. Not how the host and server are reached (address, ports), nor the
 * drafter (speculative only); the environment as a fingerprint (it may hold a token).
 */
export function deploymentSettingsOf(d: Deployment): Record<string, DeploymentSetting> {
  const out: Record<string, DeploymentSetting> = {};
  // Every key the schemas know, set or not: an unset optional setting is null, never missing.
  const service = d.service as Record<string, unknown>;
  const model = d.model as Record<string, unknown>;
  for (const k of Object.keys(serviceSchema.shape).filter((k) => !["listenAddress", "port", "distInitPort", "environment"].includes(k))) out[`service.${k}`] = (service[k] ?? null) as DeploymentSetting;
  out["service.environment"] = Object.keys(d.service.environment).length === 0 ? "none" : `sha256 ${sha12(canonical(d.service.environment))}`;
  for (const k of Object.keys(modelSchema.shape).filter((k) => k !== "drafterPath")) out[`model.${k}`] = (model[k] ?? null) as DeploymentSetting;
  out.sglangBuild = typeof d.sglangBuild === "string" ? d.sglangBuild : `custom (sha256 ${sha12(canonical(d.sglangBuild))})`;
  out.nodes = d.nodes.length;
  return Object.fromEntries(Object.keys(out).sort().map((k) => [k, out[k]]));
}

/**
 * What a benchmark's numbers belong to (also how a sweep recognises a finished config): the
 * speculative settings in the clear for the report, and fingerprints of everything else
 * that changes the numbers. `deployment`: what runs (service, model, speculative settings,
 * build, node count), not how the host and server are reached (address, ports);
 * `deploymentSettings`: the same but the speculative settings, one by one
 * (deploymentSettingsOf); `benchmark`: the benchmark settings but
 * runId, enabled and the deadline; `benchmarkCode`: BENCHMARK_CODE_VERSION.
 */
export function configurationOf(d: Deployment, stack: string): Record<string, unknown> {
  const { runId: _runId, enabled: _enabled, timeoutSeconds: _timeout, ...settings } = d.benchmark;
  return {
    stack,
    ...d.speculative,
    sglangBuild: typeof d.sglangBuild === "string" ? d.sglangBuild : "custom",
    model: d.model.path,
    tpSize: d.model.tpSize,
    deployment: sha12(canonical({ service: { ...d.service, listenAddress: undefined, port: undefined, distInitPort: undefined }, model: d.model, speculative: d.speculative, sglangBuild: d.sglangBuild, nodes: d.nodes.length })),
    deploymentSettings: deploymentSettingsOf(d),
    benchmark: sha12(canonical(settings)),
    benchmarkCode: BENCHMARK_CODE_VERSION,
  };
}

export class SglangBenchmark extends pulumi.ComponentResource {
  /** The full numbers, in sglang.bench_serving's names (null when no benchmark ran: benchmark.enabled false). */
  readonly result: pulumi.Output<StoredResult | null>;
  /** A few lines of them for people: the terminal and `stack output` (summary.ts; null when no benchmark ran). */
  readonly summary: pulumi.Output<BenchmarkSummary | null>;
  /** When the numbers were taken (null when no benchmark ran). */
  readonly takenAt: pulumi.Output<string | null>;
  /** The raw per-request records of the last run, relative to the project folder of whoever ran it (null when no benchmark ran). */
  readonly resultsPath: pulumi.Output<string | null>;
  /** The configuration the numbers belong to. */
  readonly configuration: Record<string, unknown>;
  /** Acceptance length of the short phase's timed requests (null: no speculation, or no benchmark). */
  readonly acceptLength: pulumi.Output<number | null>;

  constructor(name: string, args: SglangBenchmarkArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super(BENCHMARK_TYPE, name, {}, opts);
    const d = args.deployment;
    const stack = pulumi.getStack();
    this.configuration = configurationOf(d, stack);
    const run = new Benchmark(
      `${name}-run`,
      {
        connection: connectionOf(d, args.privateKey),
        progressUrn: childUrn(BENCHMARK_TYPE, `${name}-run`),
        label: `${d.service.unitName} (stack ${stack})`,
        stack,
        unitName: d.service.unitName,
        serverArgs: args.serverArgs,
        lockWaitSeconds: d.safety.lockWaitSeconds,
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
    // Computed here, not stored by the provider: a state of an earlier version gets them too.
    const outputs = pulumi.all([run.result, run.takenAt, run.resultsPath, run.versusPrevious]).apply(([result, takenAt, resultsPath, versusPrevious]) => benchmarkStackOutputs(stack, { result, takenAt, resultsPath, versusPrevious }));
    this.result = outputs.apply((o) => o.result);
    this.summary = outputs.apply((o) => o.benchmark);
    this.acceptLength = this.result.apply((r) => r?.accept_length ?? null);
    this.takenAt = outputs.apply((o) => o.takenAt);
    this.resultsPath = outputs.apply((o) => o.resultsPath);
    this.registerOutputs({ result: this.result, summary: this.summary, takenAt: this.takenAt, resultsPath: this.resultsPath });
  }
}
