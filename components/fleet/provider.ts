// A replica's restart in a fleet: a dynamic resource in place of the single host's restart
// command, because the replica must leave the balancer before its transaction runs, and be put
// back when that transaction fails (a command cannot run a step after its own failure).
// Pulumi serializes this object into state: it captures only strings and loads the real code
// (remote/balancer.ts) at run time, from the checkout that runs `pulumi` (as
// sglang-service/provider.ts does, for the same reasons).
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { REPO_ROOT } from "../../lib/pulumi-env";
import type * as Balancer from "./remote/balancer";

/** Bump to make every replica restart update with new provider code. */
export const FLEET_PROVIDER_VERSION = "1";

const BALANCER_MODULE = path.relative(REPO_ROOT, require.resolve("./remote/balancer"));

function makeReplicaRestartProvider(): pulumi.dynamic.ResourceProvider {
  const module = BALANCER_MODULE;
  const load = (): typeof Balancer => {
    const file = require("node:path").resolve(module);
    if (!require("node:fs").existsSync(file)) {
      throw new Error(`dflash-sglang's provider code ${module} is not in ${process.cwd()}, where Pulumi started this provider: run pulumi in the folder of a checkout of this project, with its npm dependencies installed`);
    }
    return require("tsx/cjs/api").require(file, file);
  };
  // What the restart command it replaces re-ran on (its unit, its transaction, the secrets),
  // plus a replica the program found drained or in maintenance in the balancer: a rollout cut
  // short (a killed `pulumi`) left it out, and only this step (followed by readiness) puts it back.
  // `rejoin`: the program found it out of the balancer by a rollout cut short, never put in
  // (a new replica), or held by an operator where the stack clears holds (render.ts mustRejoin).
  const KEYS = ["unitHash", "transaction", "secretStdin", "connection", "providerVersion"];
  return {
    async diff(_id: string, olds: any, news: any) {
      const changed = KEYS.filter((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
      return { changes: changed.length > 0 || news.rejoin === true, replaces: [], deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      return { id: `${inputs.label}:replica-restart`, outs: await load().applyReplicaRestart(inputs) };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyReplicaRestart(news) };
    },
  };
}

const replicaRestartProvider = makeReplicaRestartProvider();

type Inputs<T> = { [K in keyof T]: pulumi.Input<T[K]> };

/** Takes the replica out of the balancer, restarts it there, and puts it back if that fails; `stdout` is the transaction's. */
export class ReplicaRestart extends pulumi.dynamic.Resource {
  declare readonly stdout: pulumi.Output<string>;
  constructor(name: string, args: Inputs<Balancer.ReplicaRestartInputs>, opts?: pulumi.CustomResourceOptions) {
    super(replicaRestartProvider, name, { ...args, stdout: undefined }, { ...opts, additionalSecretOutputs: ["connection", "secretStdin", "balancer"] });
  }
}

/**
 * This stack's HAProxy on the balancer host (remote/balancer.ts applyBalancerConfig): a dynamic
 * resource, not a command, because it must also run when the host drifted from what it last
 * applied (its file edited, its unit stopped, another configuration loaded, not listening):
 * the program reads the host (`observed`), and anything but "in place" is a change that `up`
 * repairs. Its delete removes this stack's HAProxy and nothing else. A move to another balancer
 * host replaces it: the new one is configured first, then the old one removed.
 */
function makeBalancerConfigProvider(): pulumi.dynamic.ResourceProvider {
  const module = BALANCER_MODULE;
  const load = (): typeof Balancer => {
    const file = require("node:path").resolve(module);
    if (!require("node:fs").existsSync(file)) {
      throw new Error(`dflash-sglang's provider code ${module} is not in ${process.cwd()}, where Pulumi started this provider: run pulumi in the folder of a checkout of this project, with its npm dependencies installed`);
    }
    return require("tsx/cjs/api").require(file, file);
  };
  const where = (c: any) => `${c?.host}:${c?.port}`;
  return {
    async diff(_id: string, olds: any, news: any) {
      const replaces = where(olds.connection) !== where(news.connection) ? ["connection"] : [];
      const changes = replaces.length > 0 || ["script", "providerVersion"].some((k) => olds[k] !== news[k]) || news.observed !== "in place";
      return { changes, replaces, deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      return { id: `${inputs.label}:balancer`, outs: await load().applyBalancerConfig(inputs) };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyBalancerConfig(news) };
    },
    async delete(_id: string, olds: any) {
      await load().removeBalancerConfig(olds);
    },
  };
}

const balancerConfigProvider = makeBalancerConfigProvider();

/** This stack's own HAProxy on the balancer host: configured, started or reloaded, checked; removed on delete. */
export class BalancerConfig extends pulumi.dynamic.Resource {
  declare readonly result: pulumi.Output<string>;
  constructor(name: string, args: Inputs<Balancer.BalancerConfigInputs>, opts?: pulumi.CustomResourceOptions) {
    super(balancerConfigProvider, name, { ...args, result: undefined }, { ...opts, additionalSecretOutputs: ["connection"] });
  }
}

/**
 * HAProxy's agent check on one replica (remote/balancer.ts applyReplicaAgent): installed or
 * updated when its rendered installation changes, moved (new one first) when the replica's
 * address does; its delete removes it, and names it where the replica cannot be reached.
 */
function makeReplicaAgentProvider(): pulumi.dynamic.ResourceProvider {
  const module = BALANCER_MODULE;
  const load = (): typeof Balancer => {
    const file = require("node:path").resolve(module);
    if (!require("node:fs").existsSync(file)) {
      throw new Error(`dflash-sglang's provider code ${module} is not in ${process.cwd()}, where Pulumi started this provider: run pulumi in the folder of a checkout of this project, with its npm dependencies installed`);
    }
    return require("tsx/cjs/api").require(file, file);
  };
  const where = (c: any) => `${c?.host}:${c?.port}`;
  return {
    // Replaced only where the replica's address changes: its files are named by the stack, so a
    // new one on the same machine (another SSH port) would be removed by the old one's delete.
    async diff(_id: string, olds: any, news: any) {
      const replaces = olds.connection?.host !== news.connection?.host ? ["connection"] : [];
      const changes = replaces.length > 0 || ["install", "providerVersion"].some((k) => olds[k] !== news[k]) || where(olds.connection) !== where(news.connection);
      return { changes, replaces, deleteBeforeReplace: false };
    },
    async create(inputs: any) {
      return { id: `${inputs.label}:agent:${where(inputs.connection)}`, outs: await load().applyReplicaAgent(inputs) };
    },
    async update(_id: string, _olds: any, news: any) {
      return { outs: await load().applyReplicaAgent(news) };
    },
    async delete(_id: string, olds: any) {
      await load().removeReplicaAgent(olds);
    },
  };
}

const replicaAgentProvider = makeReplicaAgentProvider();

/** HAProxy's agent check on one replica: a generation judged every check; removed on delete. */
export class ReplicaAgent extends pulumi.dynamic.Resource {
  declare readonly answer: pulumi.Output<string>;
  constructor(name: string, args: Inputs<Balancer.ReplicaAgentInputs>, opts?: pulumi.CustomResourceOptions) {
    super(replicaAgentProvider, name, { ...args, answer: undefined }, { ...opts, additionalSecretOutputs: ["connection"] });
  }
}
