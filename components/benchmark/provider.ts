// The benchmark as a dynamic resource: it runs when the deployed unit changes or when
// benchmark.runId (or its settings) change, never on a no-op `up`. Like the service's
// providers, it captures only strings and loads its code at run time, from the checkout
// that runs `pulumi` (see loadHandler).
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { REPO_ROOT } from "../../lib/pulumi-env";
import type * as Handler from "./handler";

/** Bump to make benchmark resources update with new provider code. */
export const BENCHMARK_PROVIDER_VERSION = "2";

/** handler.ts, relative to the project folder. */
const HANDLER_MODULE = path.relative(REPO_ROOT, require.resolve("./handler"));
const RERUN_ON = ["unitHash", "settings", "model", "listenAddress", "port", "connection.host", "providerVersion", "configuration.benchmarkCode"];

/**
 * The handler of the checkout that runs `pulumi` now, as the service's loadHandlers (Pulumi
 * starts provider processes in the project folder): state names no checkout.
 */
function loadHandler(): typeof Handler {
  const file = require("node:path").resolve(HANDLER_MODULE);
  if (!require("node:fs").existsSync(file)) {
    throw new Error(`dflash-sglang's benchmark provider code ${HANDLER_MODULE} is not in ${process.cwd()}, where Pulumi started this provider: run pulumi in the folder of a checkout of this project (the one with Pulumi.yaml and index.ts), with its npm dependencies installed`);
  }
  return require("tsx/cjs/api").require(file, file);
}

function benchmarkProvider(): pulumi.dynamic.ResourceProvider {
  const rerunOn = RERUN_ON;
  const load = loadHandler;
  return {
    async diff(_id: string, olds: any, news: any) {
      const pick = (o: any, k: string) => k.split(".").reduce((v, p) => (v && typeof v === "object" ? v[p] : undefined), o);
      const changed = rerunOn.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
      return { changes: changed.length > 0 };
    },
    async create(inputs: any) {
      const outs = await load().measure(inputs);
      return { id: `${inputs.connection.host}:${inputs.port}:benchmark`, outs };
    },
    async update(_id: string, olds: any, news: any) {
      // The run before this one: the new one is compared with it (summary.ts).
      return { outs: await load().measure(news, olds) };
    },
  };
}

const provider = benchmarkProvider();

type Inputs<T> = { [K in keyof T]: pulumi.Input<T[K]> };

export class Benchmark extends pulumi.dynamic.Resource {
  declare readonly result: pulumi.Output<Handler.BenchmarkOutputs["result"]>;
  declare readonly takenAt: pulumi.Output<string | null>;
  declare readonly resultsPath: pulumi.Output<string>;
  /** Absent (undefined) in the state of an earlier version. */
  declare readonly versusPrevious: pulumi.Output<Handler.BenchmarkOutputs["versusPrevious"] | undefined>;
  constructor(name: string, args: Inputs<Handler.BenchmarkInputs>, opts?: pulumi.CustomResourceOptions) {
    super(provider, name, { ...args, result: undefined, takenAt: undefined, versusPrevious: undefined }, { ...opts, additionalSecretOutputs: ["connection", "apiKey"] });
  }
}
