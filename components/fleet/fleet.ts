// The fleet: one configuration on several replicas behind one HAProxy. Each replica is the
// single-host component (sglang-service) with its restart taken out of the balancer first
// (provider.ts ReplicaRestart) and its readiness putting it back; the replicas roll in order,
// maxUnavailable at a time (each waits for the readiness of the one maxUnavailable before it),
// and a replica leaves only while minHealthy others serve (host/balancer-step.sh). HAProxy's
// configuration is rendered here (render.ts) and applied with @pulumi/command, like the unit.
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import { Deployment, minHealthyOf } from "../sglang-service/schema";
import type { StackSecrets } from "../sglang-service/config";
import { commandConnection, connectionOf, hostStep, ProgramError, SglangService } from "../sglang-service/sglangService";
import { Ssh } from "../sglang-service/remote/ssh";
import { bashCommand } from "../sglang-service/hostScript";
import { renderUnit, sha256 } from "../sglang-service/render";
import { startDynamicProviders } from "../sglang-service/provider";
import { urlHostPort, frontendOf, parseServers, renderBalancerScript, renderBalancerStep, replicaDeployment, replicasOf, ServerState, standing } from "./render";

export interface SglangFleetArgs {
  deployment: Deployment;
  privateKey: pulumi.Input<string>;
  fleetKeys: { replicas: pulumi.Input<string>[]; loadBalancer: pulumi.Input<string> };
  secrets?: StackSecrets;
}

export const FLEET_TYPE = "dflash:fleet:Balancer";

/** Seconds a balancer step may take beyond its host commands' bounds: the SSH login and bash. */
const STEP_MARGIN_SECONDS = 30;

/**
 * Pure: the longest each balancer step may take (host/balancer*.sh): its own wait plus every
 * host command it runs, each bounded by timeouts.commandSeconds (a runtime API call by that
 * and 2 s more): `show` two calls; `leave` the lock, two calls, a generation asked of each
 * other replica, the drain and its save, and one more reading past its wait; `rejoin` the
 * same without the others; the configuration eight commands (version, check, state, save,
 * enable, reload, the API's answer).
 */
export function stepBounds(d: Deployment, replicas: number): { show: number; leave: number; rejoin: number; configure: number } {
  const call = d.timeouts.commandSeconds + 2;
  return {
    show: 2 * call + STEP_MARGIN_SECONDS,
    leave: d.timeouts.drainSeconds + (replicas + 6) * call + STEP_MARGIN_SECONDS,
    rejoin: d.fleet!.loadBalancer.joinSeconds + 6 * call + STEP_MARGIN_SECONDS,
    configure: 8 * call + STEP_MARGIN_SECONDS,
  };
}

/** Pure: the rollout order (replica indices): those not serving in the balancer first, then the rest, each group in replica order. */
export function rolloutOrder(standings: string[]): number[] {
  const idx = standings.map((_, k) => k);
  return [...idx.filter((k) => standings[k] !== "serving"), ...idx.filter((k) => standings[k] === "serving")];
}

export class SglangFleet extends pulumi.ComponentResource {
  /** Where clients reach the fleet. */
  readonly endpoint: pulumi.Output<string>;
  /** The replicas, in replica order (host first). */
  readonly replicas: SglangService[];
  /** Each replica: its server name, host, unit hash and generation. */
  readonly summary: pulumi.Output<{ replica: string; host: string; unitHash: string; generation: number | null }[]>;

  constructor(name: string, args: SglangFleetArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super(FLEET_TYPE, name, {}, opts);
    startDynamicProviders();
    const d = args.deployment;
    const f = d.fleet;
    if (!f) throw new Error("SglangFleet: the deployment has no fleet");
    const stack = pulumi.getStack();
    const lbHost = f.loadBalancer.host;
    const lbConn = connectionOf(d, args.fleetKeys.loadBalancer, lbHost);
    const replicas = replicasOf(d);
    const keys = [args.privateKey, ...args.fleetKeys.replicas];

    // The balancer as it stands now, for preview and for `up` (a replica a cut-short rollout
    // left drained is put back). A balancer host that cannot be read stops the run here.
    const bounds = stepBounds(d, replicas.length);
    const shown = lbConn.apply(async (c) => {
      const r = await Ssh.once(c, bashCommand(renderBalancerStep(d, "show")), bounds.show * 1000).catch((e: Error) => {
        throw new ProgramError(`stack ${stack}: the fleet's balancer host: ${e.message}`);
      });
      return parseServers(r.stdout);
    });
    const standings = shown.apply((servers) => replicas.map((r) => standing(servers?.find((s: ServerState) => s.server === r.server))));
    // The rollout's order: replicas that serve nothing now first (taking them out costs no
    // capacity, and a dead replica brought back first makes room under minHealthy), then the
    // others in their own order.
    const order = standings.apply((st) => rolloutOrder(st));
    pulumi.all([shown, order]).apply(async ([servers, o]) => {
      const front = frontendOf(f);
      const lines = o.map((k, pos) => `  ${pos + 1}. ${replicas[k].server} (${replicas[k].address}:${replicas[k].port}): ${standing(servers?.find((s) => s.server === replicas[k].server))} in the balancer`);
      await pulumi.log.info(
        `fleet of stack ${stack}: ${replicas.length} replicas behind HAProxy on ${lbHost.address} (clients: http://${urlHostPort(front.address, front.port)}); ` +
          `${servers === null ? "HAProxy is not configured there yet; " : ""}` +
          `up rolls them in this order, ${f.maxUnavailable} at a time, never fewer than ${minHealthyOf(f)} serving:\n${lines.join("\n")}`,
        this,
      );
    });

    // HAProxy's configuration on the balancer host, checked there before it replaces the old one.
    const balancer = new command.remote.Command(
      `${name}-haproxy`,
      {
        connection: pulumi.all([shown, commandConnection(args.fleetKeys.loadBalancer, lbHost)]).apply(([, c]) => c),
        // Bounded as a whole (@pulumi/command has no timeout of its own): each command in it is too.
        ...hostStep(lbHost, `timeout -k 5 ${bounds.configure} bash -s # HAProxy for the fleet of stack ${stack}`, renderBalancerScript(d, stack)),
        addPreviousOutputInEnv: false,
      },
      { parent: this, additionalSecretOutputs: ["connection"] },
    );

    // What each replica should run once rolled (the hash its component computes the same way).
    const presence = { apiKey: args.secrets?.apiKey !== undefined, hfToken: args.secrets?.hfToken !== undefined };
    const unitHashes = replicas.map((_, k) => sha256(renderUnit(replicaDeployment(d, k), { stack, secrets: presence, rank: 0 })));
    const peers = pulumi.all(keys.map((k, i) => connectionOf(d, k, i === 0 ? d.host : f.replicas[i - 1]))).apply((conns) =>
      conns.map((connection, i) => ({ server: replicas[i].server, connection, unitName: d.service.unitName, unitHash: unitHashes[i] })),
    );
    const services: SglangService[] = [];
    replicas.forEach((r, k) => {
      const rd = replicaDeployment(d, k);
      // Each replica waits for the readiness (and rejoin) of the one maxUnavailable before it in the order.
      const after = order.apply((o) => {
        const pos = o.indexOf(k);
        return pos >= f.maxUnavailable ? [services[o[pos - f.maxUnavailable]].ready] : [balancer as pulumi.Resource];
      });
      const steps = pulumi.all([lbConn, peers]).apply(([connection, ps]) => ({
        connection,
        server: r.server,
        leave: bashCommand(renderBalancerStep(d, "leave", r.server, d.timeouts.drainSeconds)),
        join: bashCommand(renderBalancerStep(d, "rejoin", r.server, f.loadBalancer.joinSeconds)),
        show: bashCommand(renderBalancerStep(d, "show")),
        leaveSeconds: bounds.leave,
        joinSeconds: bounds.rejoin,
        showSeconds: bounds.show,
        peers: ps,
      }));
      const service = new SglangService(k === 0 ? "sglang" : `sglang-${r.server}`, {
        deployment: rd,
        privateKey: keys[k],
        secrets: args.secrets,
        replicaOf: { balancer: steps, standing: standings.apply((s) => s[k]), after },
      });
      services.push(service);
    });
    this.replicas = services;
    this.endpoint = pulumi.output(`http://${urlHostPort(frontendOf(f).address, frontendOf(f).port)}`);
    this.summary = pulumi.all(services.map((s) => pulumi.all([s.unitHash, s.generation]))).apply((rows) =>
      rows.map(([unitHash, generation], k) => ({ replica: replicas[k].server, host: replicas[k].address, unitHash, generation })),
    );
    this.registerOutputs({ endpoint: this.endpoint, summary: this.summary });
  }
}
