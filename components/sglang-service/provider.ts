// The readiness dynamic provider: the one step @pulumi/command cannot do. Proving that a
// configuration serves needs a loop with deadlines, the group's journals and a real
// generation, and its failure must roll the host back and leave this resource's state at
// the last proven configuration, so that the next `up` re-runs the restart (a Command
// whose create already succeeded would not). Pulumi serializes this object into state; it
// captures only strings and loads the real code (remote/handlers.ts) at run time.
import * as pulumi from "@pulumi/pulumi";
import type * as Handlers from "./remote/handlers";

/** Bump to make every resource of this component update (not restart) with new provider code. */
export const PROVIDER_VERSION = "3";

const HANDLERS_PATH = require.resolve("./remote/handlers");

/** Inputs whose change means the host must be proven again (everything else updates state only). */
const READY_CHANGES = ["nodes", "expectedArgs", "modelName", "target.unitName", "target.port", "secretStdin", "providerVersion"];

/** The keys (dotted paths) whose values differ between two input bags. */
export function changedKeys(olds: Record<string, unknown>, news: Record<string, unknown>, keys: string[]): string[] {
  const pick = (o: Record<string, unknown>, dotted: string): unknown =>
    dotted.split(".").reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);
  return keys.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
}

function makeProvider(): pulumi.dynamic.ResourceProvider {
  const handlersPath = HANDLERS_PATH;
  const load = (): typeof Handlers => require("tsx/cjs/api").require(handlersPath, handlersPath);
  const changes = changedKeys;
  return {
    // Diff runs on every `up` and `preview`: it is plain code here, so it does not load
    // (and compile) the handlers, which only create/update/read need.
    async diff(_id: string, olds: any, news: any) {
      const changed = changes(olds, news, READY_CHANGES);
      return { changes: changed.length > 0, replaces: [], deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      const outs = await load().applyReady(inputs);
      return { id: `${outs.target.unitName}:${outs.target.stack}:ready`, outs };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyReady(news) };
    },
    async read(id: string, props: any) {
      return { id, props: props ? await load().readReady(props) : props };
    },
  };
}

const readyProvider = makeProvider();

type Inputs<T> = { [K in keyof T]: pulumi.Input<T[K]> };

/**
 * Proves the restarted configuration serves on its own arguments (a real generation, then
 * stable for safety.stableSeconds); records it as known-good, or rolls every node back.
 */
export class Ready extends pulumi.dynamic.Resource {
  declare readonly timings: pulumi.Output<{ drainSeconds: number; stopSeconds: number; gpuReleaseSeconds: number; loadToReadySeconds: number; requestsCut: number | null }>;
  declare readonly mainPid: pulumi.Output<number>;
  declare readonly acceptLength: pulumi.Output<number | null>;
  declare readonly serverArgs: pulumi.Output<Record<string, unknown>>;
  constructor(name: string, args: Inputs<Handlers.ReadyInputs>, opts?: pulumi.CustomResourceOptions) {
    const outputs = { timings: undefined, mainPid: undefined, acceptLength: undefined, serverArgs: undefined };
    super(readyProvider, name, { ...args, ...outputs }, { ...opts, additionalSecretOutputs: ["nodes", "secretStdin"] });
  }
}
