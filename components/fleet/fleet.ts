// The fleet: one configuration on several replicas behind one HAProxy. Each replica is the
// single-host component (sglang-service) with its restart taken out of the balancer first
// (provider.ts ReplicaRestart) and its readiness putting it back; the replicas roll in order,
// maxUnavailable at a time (each waits for the readiness of the one maxUnavailable before it),
// and a replica leaves only while minHealthy others serve (host/balancer-step.sh). HAProxy's
// configuration is rendered here (render.ts) and applied with @pulumi/command, like the unit.
import * as pulumi from "@pulumi/pulumi";
import { Deployment, minHealthyOf } from "../sglang-service/schema";
import type { StackSecrets } from "../sglang-service/config";
import { childUrn, connectionOf, ProgramError, SglangService } from "../sglang-service/sglangService";
import { Connection, Ssh } from "../sglang-service/remote/ssh";
import { bashCommand } from "../sglang-service/hostScript";
import { renderUnit, sha256 } from "../sglang-service/render";
import { startDynamicProviders } from "../sglang-service/provider";
import { balancerPaths, BalancerView, renderAgentInstall, renderAgentRemoval, frontendOf, haproxyConfigHash, mustRejoin, parseBalancer, renderBalancerRemoval, renderBalancerScript, renderBalancerStep, replicaDeployment, replicasOf, ServerState, standing, urlHostPort } from "./render";
import { BalancerConfig, FLEET_PROVIDER_VERSION } from "./provider";

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
 * and 2 s more): `show` eight calls (the unit, the runtime API three times, the listeners
 * twice, the servers); `leave` the lock, two calls, a generation asked of each other replica,
 * the drain and its save, and one more reading past its wait; `rejoin` the same without the
 * others; the configuration sixteen commands (version, check, listeners, state, save, enable,
 * reload, the wait for the new worker) plus, once, the gentle stop of the HAProxy it takes over
 * from (timeouts.drainSeconds); its removal the same stop and six commands.
 */
export function stepBounds(d: Deployment, replicas: number): { show: number; leave: number; rejoin: number; configure: number; remove: number } {
  const call = d.timeouts.commandSeconds + 2;
  return {
    show: 8 * call + STEP_MARGIN_SECONDS,
    // The minHealthy check asks each other replica at once, each its agent and then perhaps /health_generate: two calls.
    leave: d.timeouts.drainSeconds + (replicas + 7) * call + STEP_MARGIN_SECONDS,
    rejoin: d.fleet!.loadBalancer.joinSeconds + 6 * call + STEP_MARGIN_SECONDS,
    configure: d.timeouts.drainSeconds + 16 * call + STEP_MARGIN_SECONDS,
    remove: d.timeouts.drainSeconds + 6 * call + STEP_MARGIN_SECONDS,
  };
}

/**
 * Pure: how this stack's HAProxy differs from what `up` would leave there: "in place", or the
 * differences in words (the program passes it to the balancer resource: anything but "in
 * place" is a change, so `up` repairs drift and preview shows it).
 */
export function balancerDrift(v: BalancerView, expectedHash: string): string {
  const found: string[] = [];
  if (v.instance !== "active") found.push(v.instance === "absent" || v.instance === "inactive" ? "not running" : `its unit is ${v.instance}`);
  if (v.config !== expectedHash) found.push(v.config === "absent" ? "no configuration file" : "its configuration file differs");
  if (v.instance === "active" && v.running !== expectedHash) found.push(v.running === "none" ? "its runtime API does not answer" : "the running worker loaded another configuration");
  if (v.instance === "active" && !v.listening) found.push("it does not listen on the stack's address and port");
  if (v.legacy === "active") found.push("Debian's haproxy.service still runs the configuration an earlier version wrote");
  return found.length ? found.join("; ") : "in place";
}

/** Pure: what a replica last ran, from this stack's mark of its last rejoin (render.ts ServerState lastJoined), in words. */
export function lastRan(last: { unitHash: string; at: string } | null, unitHash: string): string {
  if (last === null) return "what it last ran is not recorded on the balancer";
  const ran = last.unitHash === unitHash ? "this configuration" : last.unitHash === "unknown" ? "what its failed restart left (its known-good configuration where it rolled back)" : `another configuration (unit ${last.unitHash.slice(0, 12)})`;
  return `it last joined the balancer at ${last.at}, running ${ran}`;
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
  readonly summary: pulumi.Output<{ replica: string; host: string; unitHash: string; generation: number | null; requestsCut: number | null; unreachable: string | null }[]>;

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
    const paths = balancerPaths(stack);
    const expectedHash = haproxyConfigHash(d, stack);
    const readView = async (c: Connection): Promise<BalancerView> => {
      const r = await Ssh.once(c, bashCommand(renderBalancerStep(d, stack, "show")), bounds.show * 1000).catch((e: Error) => {
        throw new ProgramError(`stack ${stack}: the fleet's balancer host: ${e.message}`);
      });
      const v = parseBalancer(r.stdout);
      // The place is someone else's: refused here, in preview too, before anything changes.
      if (v.conflicts.length > 0) {
        throw new ProgramError(
          `stack ${stack}: the fleet's balancer cannot listen on ${urlHostPort(frontendOf(f).address, f.loadBalancer.port)} on ${lbHost.address}:\n${v.conflicts.map((c) => `  ${c}`).join("\n")}\n` +
            `Nothing was changed. Choose another fleet.loadBalancer.port (or listenAddress) for stack ${stack}, or free that port, then run up again.`,
        );
      }
      return v;
    };
    // The reading as a promise that always settles, besides the Output: what a replica's own
    // read waits on (member below) must end even where this one fails the run.
    const viewRead = new Promise<BalancerView>((resolve, reject) => lbConn.apply((c) => readView(c).then(resolve, reject)));
    viewRead.catch(() => undefined);
    const view = lbConn.apply(() => viewRead);
    const shown = view.apply((v) => v.servers);
    const operatorStates = f.loadBalancer.operatorStates;
    const standings = shown.apply((servers) => replicas.map((r) => standing(servers?.find((s: ServerState) => s.server === r.server))));
    // The rollout's order: replicas that serve nothing now first (taking them out costs no
    // capacity, and a dead replica brought back first makes room under minHealthy), then the
    // others in their own order.
    const order = standings.apply((st) => rolloutOrder(st));
    const drift = view.apply((v) => balancerDrift(v, expectedHash));
    // This stack's HAProxy on the balancer host, checked there before it replaces the old one.
    const balancer = new BalancerConfig(
      `${name}-balancer`,
      {
        connection: pulumi.all([view, lbConn]).apply(([, c]) => c),
        script: renderBalancerScript(d, stack),
        scriptSeconds: bounds.configure,
        removal: renderBalancerRemoval(d, stack),
        removalSeconds: bounds.remove,
        observed: drift,
        label: `the fleet's balancer (stack ${stack})`,
        urn: childUrn(FLEET_TYPE, `${name}-balancer`),
        providerVersion: FLEET_PROVIDER_VERSION,
      },
      { parent: this },
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
        leave: bashCommand(renderBalancerStep(d, stack, "leave", r.server, d.timeouts.drainSeconds)),
        join: bashCommand(renderBalancerStep(d, stack, "rejoin", r.server, f.loadBalancer.joinSeconds, unitHashes[k])),
        joinBack: bashCommand(renderBalancerStep(d, stack, "rejoin", r.server, f.loadBalancer.joinSeconds, "unknown")),
        show: bashCommand(renderBalancerStep(d, stack, "show")),
        leaveSeconds: bounds.leave,
        joinSeconds: bounds.rejoin,
        showSeconds: bounds.show,
        peers: ps,
      }));
      const service = new SglangService(k === 0 ? "sglang" : `sglang-${r.server}`, {
        deployment: rd,
        privateKey: keys[k],
        secrets: args.secrets,
        replicaOf: {
          balancer: steps,
          standing: standings.apply((s) => s[k]),
          rejoin: pulumi.all([view, standings]).apply(([v, s]) => mustRejoin(v, s[k], operatorStates)),
          after,
          member: viewRead.then((v) => v.servers?.find((s) => s.server === r.server)?.joined === true, () => false),
          agent: { install: renderAgentInstall(d, stack, k), removal: renderAgentRemoval(d, stack), after: [balancer] },
        },
      });
      services.push(service);
    });
    pulumi.all([view, order, drift, pulumi.all(services.map((s) => s.unreachable))]).apply(async ([v, o, dr, dead]) => {
      const front = frontendOf(f);
      const note = (st: string) =>
        st.startsWith("held ") ? (operatorStates === "keep" ? ": held by an operator, rolled but kept out (operatorStates keep)" : ": held by an operator, put back once rolled (operatorStates clear)") : st === "waiting to join" ? ": gets requests only once it runs this configuration" : "";
      const lines = o.map((k, pos) => {
        const server = v.servers?.find((s) => s.server === replicas[k].server);
        const st = standing(server);
        const where = `  ${pos + 1}. ${replicas[k].server} (${replicas[k].address}:${replicas[k].port})`;
        if (dead[k] !== null) return `${where}: ${st} in the balancer; cannot be reached over SSH: not rolled, and up changes nothing there (${lastRan(server?.lastJoined ?? null, unitHashes[k])})`;
        return `${where}: ${st} in the balancer${note(st)}`;
      });
      const own = `its own HAProxy ${paths.unitName} (${paths.config}) on ${lbHost.address}`;
      const state =
        v.config === "absent" && v.instance !== "active" && v.legacy === null
          ? `${own}, not there yet; nothing else on that host is touched`
          : v.legacy === "active"
            ? `${own}; up takes over from Debian's haproxy.service, which runs the /etc/haproxy/haproxy.cfg an earlier version wrote for this stack: starts its own beside it, then stops and disables haproxy.service once its requests end, and renames that file`
            : `${own}${dr === "in place" ? "" : `, which drifted (${dr}): up repairs it`}; nothing else on that host is touched`;
      await pulumi.log.info(
        `fleet of stack ${stack}: ${replicas.length} replicas behind ${state} (clients: http://${urlHostPort(front.address, front.port)}); ` +
          `up rolls them in this order, ${f.maxUnavailable} at a time, never fewer than ${minHealthyOf(f)} serving; ` +
          `a leaving replica's requests get ${d.timeouts.drainSeconds} s to end, then ${f.drainPolicy === "cut" ? "are cut (fleet.drainPolicy cut)" : "the rollout halts there (fleet.drainPolicy halt)"}:\n${lines.join("\n")}`,
        this,
      );
    });

    this.replicas = services;
    this.endpoint = pulumi.output(`http://${urlHostPort(frontendOf(f).address, frontendOf(f).port)}`);
    // requestsCut: what the replica's last restart cut (fleet.drainPolicy "cut"); null where unknown.
    // unitHash: what readiness last proved there (a replica `up` could not reach keeps its own);
    // unreachable: why `up` could not reach it, or null.
    this.summary = pulumi.all(services.map((s) => pulumi.all([s.unitHash, s.provenUnitHash, s.generation, s.timings, s.unreachable]))).apply((rows) =>
      rows.map(([unitHash, proven, generation, timings, unreachable], k) => ({ replica: replicas[k].server, host: replicas[k].address, unitHash: proven ?? unitHash, generation, requestsCut: timings?.requestsCut ?? null, unreachable })),
    );
    this.registerOutputs({ endpoint: this.endpoint, summary: this.summary });
  }
}
