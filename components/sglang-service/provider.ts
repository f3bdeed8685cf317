// The readiness dynamic provider: the one step @pulumi/command cannot do. Proving that a
// configuration serves needs a loop with deadlines, the group's journals and a real
// generation, and its failure must roll the host back and leave this resource's state at
// the last proven configuration, so that the next `up` re-runs the restart (a Command
// whose create already succeeded would not). Pulumi serializes this object into state; it
// captures only strings and loads the real code (remote/handlers.ts) at run time.
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { REPO_ROOT } from "../../lib/pulumi-env";
import type * as Handlers from "./remote/handlers";

/**
 * Bump to make every resource of this component update (not restart) with new provider code.
 * 5: the code recorded in state names no checkout path (see loadHandlers).
 * 6: a presence's delete says whether it is half of a replacement (a destroy never is).
 */
export const PROVIDER_VERSION = "6";

/** remote/handlers.ts, relative to the project folder. */
const HANDLERS_MODULE = path.relative(REPO_ROOT, require.resolve("./remote/handlers"));

/**
 * The handlers of the checkout that runs `pulumi` now. Pulumi starts provider processes in
 * the project folder, and `refresh` and `destroy` run the provider code recorded in state:
 * were it to name the checkout that recorded it, a colleague's clone elsewhere would change
 * state on a no-op `up`, and nobody could refresh or destroy once that checkout was gone.
 */
function loadHandlers(): typeof Handlers {
  const file = require("node:path").resolve(HANDLERS_MODULE);
  if (!require("node:fs").existsSync(file)) {
    throw new Error(`dflash-sglang's provider code ${HANDLERS_MODULE} is not in ${process.cwd()}, where Pulumi started this provider: run pulumi in the folder of a checkout of this project (the one with Pulumi.yaml and index.ts), with its npm dependencies installed`);
  }
  return require("tsx/cjs/api").require(file, file);
}

/** Inputs whose change means the host must be proven again (everything else updates state only). */
const READY_CHANGES = ["nodes", "expectedArgs", "modelName", "target.unitName", "target.port", "secretStdin", "providerVersion"];

/** The keys (dotted paths) whose values differ between two input bags. */
export function changedKeys(olds: Record<string, unknown>, news: Record<string, unknown>, keys: string[]): string[] {
  const pick = (o: Record<string, unknown>, dotted: string): unknown =>
    dotted.split(".").reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);
  return keys.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
}

/**
 * `configure`: keeps the stack's configuration as the engine hands it over (the last `up`'s,
 * or the current one with --run-program), so that a rotated SSH key or host key reaches the
 * host before state holds it. Kept on the process: Pulumi serializes captured variables by
 * value, so a closure variable set here would not be the one the other methods read.
 */
async function keepStackConfig(req: pulumi.dynamic.ConfigureRequest): Promise<void> {
  (globalThis as any).__dflashStackConfig = req.config;
}

/** The stack's configuration kept by `configure`, as a getter. */
function stackConfig(): ((key: string) => string | undefined) | undefined {
  const c = (globalThis as any).__dflashStackConfig as pulumi.dynamic.Config | undefined;
  return c && ((key: string) => c.get(key));
}

/**
 * Pure: whether the program found a node running something else than this stack's unit
 * (`hostRuns`, observe.ts, which names the unit and when it was installed): then `up` must
 * put this stack's configuration back, as `preview` said, even though no input changed. Only
 * a reading other than the one recorded at the last proven `up` counts: `refresh` hands the
 * diff the recorded inputs again (the same reading), and once the node runs this stack's unit
 * again, the next `up` changes nothing.
 */
export function hostTakenOver(olds: { hostRuns?: unknown }, news: { hostRuns?: unknown }): boolean {
  // observe.ts RUNS_THIS_UNIT, written out: the provider captures strings, not project modules.
  if (!Array.isArray(news.hostRuns) || !news.hostRuns.some((r) => r !== "this stack's unit")) return false;
  return JSON.stringify(news.hostRuns) !== JSON.stringify(olds.hostRuns);
}

function makeProvider(): pulumi.dynamic.ResourceProvider {
  const load = loadHandlers;
  const changes = changedKeys;
  const takenOver = hostTakenOver;
  return {
    configure: keepStackConfig,
    // Diff runs on every `up` and `preview`: it is plain code here, so it does not load
    // (and compile) the handlers, which only create/update/read need.
    async diff(_id: string, olds: any, news: any) {
      const changed = changes(olds, news, READY_CHANGES);
      return { changes: changed.length > 0 || takenOver(olds, news), replaces: [], deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      const outs = await load().applyReady(inputs);
      return { id: `${outs.target.unitName}:${outs.target.stack}:ready`, outs };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyReady(news) };
    },
    async read(id: string, props: any) {
      return { id, props: props ? await load().readReady(props, stackConfig()) : props };
    },
    // A destroy: what an interrupted rename left serving (the presences remove the rest).
    async delete(_id: string, outs: any) {
      await load().removeInterruptedRenames(outs, stackConfig());
    },
  };
}

const readyProvider = makeProvider();

/**
 * This stack's presence on one node, the first resource of the node and the last one
 * deleted. Its delete is the teardown (drain, stop, remove the unit, its secrets and staged
 * files); @pulumi/command's own delete cannot do it, because it runs with the connection in
 * state: after an SSH key or host key rotation, `destroy` would fail with the old ones. A
 * dynamic provider gets the stack's current configuration. Its replacement (the node's
 * address, port or the unit's name changed) deletes the old one first, before the commands
 * that depend on it stage and start the new unit.
 */
function makePresenceProvider(): pulumi.dynamic.ResourceProvider {
  const load = loadHandlers;
  const changes = changedKeys;
  return {
    configure: keepStackConfig,
    async diff(id: string, olds: any, news: any) {
      const changed = changes(olds, news, ["where", "connection", "transaction", "stageRemoval", "rank", "urn", "providerVersion"]);
      const replaces = changed.includes("where") ? ["where"] : [];
      // Remembered for the delete that follows in this same \`up\` (one provider process per
      // run): only a replacement's teardown may leave the unit serving for the restart that
      // follows. A destroy (no diff before its delete) always removes it, even when the stack's
      // configuration names another address, port or unit name that was never applied.
      const g = globalThis as { __dflashPresenceReplacing?: Set<string> };
      if (replaces.length > 0) (g.__dflashPresenceReplacing ??= new Set()).add(id);
      return { changes: changed.length > 0, replaces, deleteBeforeReplace: true };
    },
    async create(inputs: any) {
      return { id: `${inputs.where.join(":")}:${inputs.stack}`, outs: inputs };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: news };
    },
    async delete(id: string, outs: any) {
      const replacing = (globalThis as { __dflashPresenceReplacing?: Set<string> }).__dflashPresenceReplacing?.has(id) === true;
      await load().removePresence(outs, stackConfig(), replacing);
    },
  };
}

const presenceProvider = makePresenceProvider();

/**
 * The restart of a group, driven from one place (remote/group-restart.ts; why: script.ts,
 * GROUP_PREPARE_MARGIN_SECONDS): @pulumi/command runs each node's restart on its own, and
 * nothing could hold one node's stop until every other node had passed its checks. It runs
 * again when what a node must run (its unit, its staged transaction, its connection) or the
 * secrets change, like the restart commands it replaces; a failure leaves its state as it was,
 * so the next `up` runs it again.
 */
function makeGroupRestartProvider(): pulumi.dynamic.ResourceProvider {
  const load = loadHandlers;
  const changes = changedKeys;
  return {
    async diff(_id: string, olds: any, news: any) {
      return { changes: changes(olds, news, ["nodes", "secretStdin", "providerVersion"]).length > 0, replaces: [], deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      const outs = await load().applyGroupRestart(inputs);
      return { id: `${inputs.label}:group-restart`, outs };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyGroupRestart(news) };
    },
  };
}

const groupRestartProvider = makeGroupRestartProvider();

let dynamicProvidersStarted = false;

/**
 * Has the engine start the dynamic providers' process now, alongside the program's host read.
 * The engine starts a provider only when a resource or an invoke first needs it; this
 * program's first dynamic resource (a node's presence) waits for the host read and the
 * preflight, and the process then takes about 0.3 s to start, so every `preview` and `up`
 * waited for it in turn. An invoke it answers "unknown function" (a dynamic provider has no
 * functions) starts it at once: 0.25-0.3 s less per operation (bench/results/engine-cost-baseline.md).
 * That answer is the expected one and is dropped; a provider that cannot start still fails
 * at its first resource, with its own error. Once per program.
 */
export function startDynamicProviders(): void {
  if (dynamicProvidersStarted) return;
  dynamicProvidersStarted = true;
  pulumi.runtime.invoke("pulumi-nodejs:dynamic:start", {}).catch(() => undefined);
}

type Inputs<T> = { [K in keyof T]: pulumi.Input<T[K]> };

/** Restarts every node of a group behind one barrier; `outputs` holds each node's transaction output. */
export class GroupRestart extends pulumi.dynamic.Resource {
  declare readonly outputs: pulumi.Output<string[]>;
  constructor(name: string, args: Inputs<Handlers.GroupRestartInputs>, opts?: pulumi.CustomResourceOptions) {
    super(groupRestartProvider, name, { ...args, outputs: undefined }, { ...opts, additionalSecretOutputs: ["nodes", "secretStdin"] });
  }
}

/**
 * Proves the restarted configuration serves on its own arguments (a real generation, then
 * stable for safety.stableSeconds); records it as known-good, or rolls every node back.
 */
export class Ready extends pulumi.dynamic.Resource {
  declare readonly timings: pulumi.Output<{ drainSeconds: number; stopSeconds: number; gpuReleaseSeconds: number; loadToReadySeconds: number; requestsCut: number | null; drained?: boolean }>;
  declare readonly mainPid: pulumi.Output<number>;
  declare readonly acceptLength: pulumi.Output<number | null>;
  declare readonly serverArgs: pulumi.Output<Record<string, unknown>>;
  /** Node 0's generation that readiness proved (host/generations.sh); null from an earlier version's state. */
  declare readonly generation: pulumi.Output<number | null>;
  constructor(name: string, args: Inputs<Handlers.ReadyInputs>, opts?: pulumi.CustomResourceOptions) {
    const outputs = { timings: undefined, mainPid: undefined, acceptLength: undefined, serverArgs: undefined, generation: undefined };
    super(readyProvider, name, { ...args, ...outputs }, { ...opts, additionalSecretOutputs: ["nodes", "secretStdin", "balancer"] });
  }
}

/** This stack on one node: deleting it removes the stack's unit and files from the node. */
export class Presence extends pulumi.dynamic.Resource {
  declare readonly where: pulumi.Output<[string, number, string]>;
  constructor(name: string, args: Inputs<Handlers.PresenceInputs>, opts?: pulumi.CustomResourceOptions) {
    super(presenceProvider, name, { ...args }, { ...opts, additionalSecretOutputs: ["connection"], deleteBeforeReplace: true });
  }
}
