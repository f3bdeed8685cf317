// Dynamic providers for the three steps of a reconfiguration. Pulumi serializes these
// objects into state; they capture only strings and load the real code
// (remote/handlers.ts) at run time, so no project module or zod schema is serialized.
import * as pulumi from "@pulumi/pulumi";
import type * as Handlers from "./remote/handlers";

/** Bump to make every resource of this component update (not restart) with new provider code. */
export const PROVIDER_VERSION = "2";

const HANDLERS_PATH = require.resolve("./remote/handlers");

const STAGED_UNIT_CHANGES = ["unitText", "helpers", "secretFiles", "python", "flags", "paths", "tpSize", "unitName", "connection.host", "connection.port", "connection.user", "connection.hostKey", "providerVersion"];
const ROLLOUT_CHANGES = ["unitHash", "secretsDigest", "expectedArgs", "modelName", "workers", "target.unitName", "connection.host", "connection.port", "providerVersion"];
const REPLACES = ["connection.host", "connection.port", "unitName", "target.unitName"];

function makeProvider(kind: "staged" | "rollout", changeKeys: string[]): pulumi.dynamic.ResourceProvider {
  const handlersPath = HANDLERS_PATH;
  const load = (): typeof Handlers => require("tsx/cjs/api").require(handlersPath, handlersPath);
  const apply = async (inputs: any): Promise<any> => {
    const h = load();
    return kind === "staged" ? h.applyStagedUnit(inputs) : h.applyRollout(inputs);
  };
  return {
    async diff(_id: string, olds: any, news: any) {
      const h = load();
      const changed = h.changedKeys(olds, news, changeKeys);
      const replaces = changed.filter((k) => REPLACES.includes(k));
      return { changes: changed.length > 0, replaces, deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      const outs = await apply(inputs);
      return { id: `${outs.connection.host}:${outs.target?.unitName ?? outs.unitName}:${kind}`, outs };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await apply(news) };
    },
    async read(id: string, props: any) {
      return { id, props: kind === "rollout" && props ? await load().readRollout(props) : props };
    },
    async delete(_id: string, outs: any) {
      if (kind === "rollout") await load().deleteRollout(outs);
    },
  };
}

const stagedUnitProvider = makeProvider("staged", STAGED_UNIT_CHANGES);
const rolloutProvider = makeProvider("rollout", ROLLOUT_CHANGES);

type Inputs<T> = { [K in keyof T]: pulumi.Input<T[K]> };

/** Preflight on the host, then the new unit written beside the live one and verified. */
export class StagedUnit extends pulumi.dynamic.Resource {
  declare readonly unitHash: pulumi.Output<string>;
  declare readonly stagedPath: pulumi.Output<string>;
  declare readonly gpuCount: pulumi.Output<number>;
  constructor(name: string, args: Inputs<Handlers.StagedUnitInputs>, opts?: pulumi.CustomResourceOptions) {
    super(stagedUnitProvider, name, { ...args, unitHash: undefined, stagedPath: undefined, gpuCount: undefined, gpuMemoryMiB: undefined }, { ...opts, additionalSecretOutputs: ["connection", "secretFiles"] });
  }
}

/**
 * Drain, stop, wait for the old process and its GPU memory, install, start, then the
 * readiness wait: passes only when the new configuration itself serves a real generation
 * (rollback to the last known-good configuration otherwise).
 */
export class Rollout extends pulumi.dynamic.Resource {
  declare readonly drainSeconds: pulumi.Output<number>;
  declare readonly stopSeconds: pulumi.Output<number>;
  declare readonly requestsCut: pulumi.Output<number | null>;
  declare readonly gpuReleaseSeconds: pulumi.Output<number>;
  declare readonly loadToReadySeconds: pulumi.Output<number>;
  declare readonly mainPid: pulumi.Output<number>;
  declare readonly acceptLength: pulumi.Output<number | null>;
  declare readonly serverArgs: pulumi.Output<Record<string, unknown>>;
  constructor(name: string, args: Inputs<Handlers.RolloutInputs>, opts?: pulumi.CustomResourceOptions) {
    const outputs = { applied: undefined, drainSeconds: undefined, stopSeconds: undefined, requestsCut: undefined, gpuReleaseSeconds: undefined, previousMainPid: undefined, loadToReadySeconds: undefined, mainPid: undefined, acceptLength: undefined, serverArgs: undefined };
    super(rolloutProvider, name, { ...args, ...outputs }, { ...opts, additionalSecretOutputs: ["connection", "secretsDigest"] });
  }
}
