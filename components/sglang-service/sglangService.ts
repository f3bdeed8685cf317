// The component: one SGLang configuration on one GPU host (or a group of nodes),
// reconfigured safely, as render -> apply -> restart -> ready, on a node held by `<name>-host`:
//   render   pure: the unit (render.ts) and the host-side scripts (script.ts);
//   host     `<name>-host`: a dynamic resource for this stack on the node, whose delete is
//            the teardown (drain, stop, remove), run with the stack's current credentials;
//   apply    `<name>-unit`: a command:remote:Command that runs preflight and stages the
//            unit and the transaction in this stack's own folder on each node;
//   restart  `<name>-restart`: a command:remote:Command, re-run when the unit or a secret
//            changes, that runs the staged transaction (lock, drain, stop, wait for the
//            old process and the GPUs, install, start; rollback on failure); for a group,
//            `<name>-restart-group`, a dynamic resource that runs every node's transaction
//            behind one barrier (nothing stops before every node has passed its checks);
//   ready    `<name>-ready`: a dynamic resource that proves the new configuration serves.
import { inspect } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import { Deployment } from "./schema";
import { expectedServerArgs, gpusPerNode, launchArgs, localServerUrl, renderUnit, secretPaths, SecretPresence, sha256, shellQuote } from "./render";
import { helperScripts, groupFinishSeconds, groupPrepareSeconds, preflightInput, renderPreflightScript, renderStageRemoval, renderStageScript, renderTransaction, secretFileOrder, transactionInput, transactionPath } from "./script";
import type { StackSecrets } from "./config";
import { GroupRestart, PROVIDER_VERSION, Presence, Ready, startDynamicProviders } from "./provider";
import { describeHostChange, hostRunsOf, NodeView, readLiveUnit } from "./remote/observe";
import { asSshUser } from "./become";
import { NoRootAccess, Unreachable } from "./remote/ssh";
import type { BalancerSteps } from "../fleet/remote/balancer";
import { ReplicaAgent, ReplicaRestart, FLEET_PROVIDER_VERSION } from "../fleet/provider";

export interface SglangServiceArgs {
  /** The validated configuration (see schema.ts: parseDeployment). */
  deployment: Deployment;
  /** SSH private key for deployment.host, kept secret. */
  privateKey: pulumi.Input<string>;
  /** SSH private keys for deployment.nodes (same order); the host's key where missing. */
  nodeKeys?: pulumi.Input<string>[];
  /** Secrets for the server; written to 0600 files on the host, never into the unit. */
  secrets?: StackSecrets;
  /**
   * A replica of a fleet (components/fleet): its restart leaves the balancer first and is
   * ordered `after` the replicas before it; readiness puts it back, on success or failure.
   */
  replicaOf?: {
    balancer: pulumi.Input<BalancerSteps>;
    /** How it stood in the balancer when the program read it (fleet/render.ts standing). */
    standing: pulumi.Input<string>;
    /** Whether `up` must take it out and put it back whatever else changed (fleet/render.ts mustRejoin). */
    rejoin: pulumi.Input<boolean>;
    /** What its restart waits for: the balancer's configuration, or the replica before it in the rollout's order. */
    after: pulumi.Input<pulumi.Resource[]>;
    /** Whether this stack put it in the balancer before (a joined/ mark): only such a replica that cannot be reached at all is rolled past as dead. */
    member: pulumi.Input<boolean>;
    /**
     * HAProxy's agent check on this replica: its installation and removal scripts (fleet/render.ts
     * renderAgentInstall, renderAgentRemoval), installed once `after` (the balancer's configuration:
     * a fleet refused there writes nothing on its replicas).
     */
    agent: { install: string; removal: string; after: pulumi.Resource[] };
  };
}

/** The secret files' contents, one base64 line each in secretFileOrder: the restart's stdin. */
function secretStdin(unitName: string, presence: SecretPresence, secrets: StackSecrets): pulumi.Output<string> {
  const paths = secretPaths(unitName);
  return pulumi.secret(
    pulumi.all([secrets.apiKey, secrets.hfToken]).apply(([apiKey, hfToken]) => {
      const files: Record<string, string> = {};
      if (apiKey !== undefined) {
        files[paths.serverConfig] = `api-key: ${JSON.stringify(apiKey)}\n`;
        files[paths.curlHeaders] = `Authorization: Bearer ${apiKey}\n`;
      }
      if (hfToken !== undefined) files[paths.env] = `HF_TOKEN=${JSON.stringify(hfToken)}\n`;
      return secretFileOrder(unitName, presence).map((p) => `${Buffer.from(files[p], "utf8").toString("base64")}\n`).join("");
    }),
  );
}

export const COMPONENT_TYPE = "dflash:sglang:Service";

/**
 * The SSH connection to the deployment's host, as a secret (it carries the private key).
 * `become` only where set, so that a root host's connection (and state) stays as it was.
 */
export function connectionOf(d: Deployment, privateKey: pulumi.Input<string>, host: Deployment["host"] = d.host) {
  return pulumi.secret(pulumi.output(privateKey).apply((key) => ({ host: host.address, port: host.port, user: host.user, hostKey: host.hostKey, privateKey: key, ...(host.become ? { become: host.become } : {}) })));
}

/**
 * A host step of @pulumi/command: `command` (a shell command line for root) with `stdin`, as
 * the SSH user runs it (become.ts: itself as root, or `sudo -n -- bash -s` with the command in
 * front of its stdin). The stdin stays secret where it was; as root, both are as given.
 */
export function hostStep(host: Deployment["host"], command: string, stdin: pulumi.Input<string>): { create: string; stdin: pulumi.Input<string> } {
  if (host.become === undefined) return { create: command, stdin };
  return { create: asSshUser(host.become, command).command, stdin: pulumi.output(stdin).apply((text) => asSshUser(host.become, command, text).stdin) };
}

/** The same connection for @pulumi/command: host key pinned, a bounded number of dial attempts. */
export function commandConnection(privateKey: pulumi.Input<string>, host: Deployment["host"]): pulumi.Output<command.types.input.remote.ConnectionArgs> {
  return pulumi.secret(pulumi.output(privateKey).apply((key) => ({ host: host.address, port: host.port, user: host.user, hostKey: host.hostKey, privateKey: key, dialErrorLimit: 3, perDialTimeout: 15 })));
}

/**
 * An error that stops the program with its message alone (a RunError: the engine shows no
 * stack; the SSH refusal says what to do). Every resource input derived from the failed read
 * rethrows this object, and the SDK attaches its promise to it and renders it with
 * util.inspect for its trace events, once per input: rendering the promise graph took ~40 s
 * of CPU (garbage collection) on a wrong host key. It renders as its message instead.
 *
 * Its message is the cause and stays so (issue 63): the SDK prefixes `error serializing
 * property "<key>": ` to the message of the very error object that rejects a resource input,
 * at every input it passes through (runtime/rpc.js serializeFilteredProperties), so an
 * unreachable host read `error serializing property "serverArgs": ... "connection" (x3) ...`
 * before the cause. The message ignores those writes.
 */
export class ProgramError extends pulumi.RunError {
  constructor(message: string) {
    super(message);
    Object.defineProperty(this, "message", { get: () => message, set: () => undefined, enumerable: false, configurable: true });
  }

  [inspect.custom](): string {
    return `RunError: ${this.message}`;
  }
}

/** URN of a dynamic resource child of a component, for progress lines attached to it. */
export function childUrn(componentType: string, child: string): string {
  return `urn:pulumi:${pulumi.getStack()}::${pulumi.getProject()}::${componentType}$pulumi-nodejs:dynamic:Resource::${child}`;
}

export class SglangService extends pulumi.ComponentResource {
  /** sha256 of the rendered unit: what the host should run. */
  readonly unitHash: pulumi.Output<string>;
  /** A fleet's replica whose host could not be reached (why, in words; `up` changed nothing there); null otherwise. */
  readonly unreachable: pulumi.Output<string | null>;
  /** The unit hash readiness last proved on node 0 (its recorded input): what the host runs where `up` could not reach it. */
  readonly provenUnitHash: pulumi.Output<string | null>;
  /** The rendered systemd unit. */
  readonly unitText: pulumi.Output<string>;
  /** The server's command line (interpreter and arguments). */
  readonly launchCommand: pulumi.Output<string[]>;
  /** Arguments the running server reported from /server_info once ready, secrets left out. */
  readonly serverArgs: pulumi.Output<Record<string, unknown>>;
  /**
   * Seconds spent in each phase of the last restart (zeros when nothing had to restart),
   * and the requests cut when the drain hit its deadline (0 normally, null if unknown).
   */
  readonly timings: pulumi.Output<{ drainSeconds: number; stopSeconds: number; gpuReleaseSeconds: number; loadToReadySeconds: number; requestsCut: number | null; drained?: boolean }>;
  /** Acceptance length the server reported when it became ready. */
  readonly acceptLength: pulumi.Output<number | null>;
  /**
   * The generation serving on node 0, as readiness proved it (host/generations.sh: the
   * configuration kept whole under /var/lib/dflash-sglang/<unit>/generations/N).
   */
  readonly generation: pulumi.Output<number | null>;
  /** The readiness step: done once this configuration serves (and, in a fleet, is back in the balancer). */
  readonly ready: pulumi.Resource;

  constructor(name: string, args: SglangServiceArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super(COMPONENT_TYPE, name, {}, opts);
    startDynamicProviders();
    const d = args.deployment;
    const stack = pulumi.getStack();
    const label = `${d.service.unitName} (stack ${stack})`;
    const secrets = args.secrets ?? {};
    const presence: SecretPresence = { apiKey: secrets.apiKey !== undefined, hfToken: secrets.hfToken !== undefined };
    const stdin = secretStdin(d.service.unitName, presence, secrets);

    // Node 0 serves; further nodes run ranks 1.. of the model.
    const planned = [d.host, ...d.nodes].map((host, rank) => {
      const key = rank === 0 ? args.privateKey : (args.nodeKeys?.[rank - 1] ?? args.privateKey);
      const unitText = renderUnit(d, { stack, secrets: presence, rank });
      const nodeLabel = rank === 0 ? label : `${label} node ${rank} (${host.address})`;
      return { host, key, conn: connectionOf(d, key, host), rank, unitText, unitHash: sha256(unitText), label: nodeLabel, suffix: rank === 0 ? "" : `-node${rank}` };
    });

    // What each node runs now and what `up` changes there: for reviewers, in preview too
    // (even for a stack never deployed). The read runs alongside staging (which writes only
    // this stack's own folder), so a no-op `up` does not wait for an extra SSH handshake;
    // the restart waits for it.
    // A host that cannot be read (unreachable, or not the pinned host key) stops the run
    // here, before anything has changed what a host runs.
    // A fleet's replica whose host cannot be reached at all (down, cut off) does not stop the
    // fleet: it is read as `unreachable`, and every resource of it keeps its recorded state
    // (unchanged: `up` runs nothing there; the others roll within minHealthy).
    // Only a replica this stack put in the balancer before counts as dead: one never in (a new
    // replica, or an address or port mistyped: another server name) that cannot be reached stops
    // the run, as a single host does.
    // The read does not wait for the balancer's (which says whether it is a member): only an
    // unreachable host asks.
    const member = new Promise<boolean>((resolve) => void pulumi.output(args.replicaOf?.member ?? false).apply((m) => resolve(m)));
    const reading = new Promise<NodeView[]>((resolve, reject) =>
      pulumi.all(planned.map((n) => n.conn)).apply((conns) =>
        Promise.all(
          conns.map((c) =>
            readLiveUnit(c, d.service.unitName).catch(async (e: Error): Promise<NodeView> => {
              if (args.replicaOf && e instanceof Unreachable && (await member)) return { host: c.host, live: null, unreachable: e.message };
              throw e;
            }),
          ),
        ).then(resolve, (e: Error) => reject(new ProgramError(e instanceof NoRootAccess ? `stack ${stack}: ${e.message}` : e.message))),
      ),
    );
    const hostReads = pulumi.all(planned.map((n) => n.conn)).apply(() => reading);
    const unreachable = reading.then((views) => views[0].unreachable, () => undefined);
    const hostView = hostReads.apply(async (views) => {
      const text = views
        .map((v, k) =>
          v.unreachable
            ? `${d.service.unitName} on ${v.host}: cannot be read (${v.unreachable}); \`up\` changes nothing there and rolls the fleet's other replicas (never fewer than fleet.minHealthy serving); HAProxy sends it no request while its check fails.`
            : describeHostChange(d.service.unitName, stack, v, planned[k].unitText, k === 0 ? "" : ` (node ${k})`),
        )
        .join("\n");
      await (views.some((v) => v.unreachable) ? pulumi.log.warn(text, this) : pulumi.log.info(text, this));
      return text;
    });
    // Every resource of an unreachable replica keeps its recorded inputs (ignoreChanges on all of
    // them), so that the engine runs nothing there; a resource it never had is still created,
    // and fails naming the host.
    const keepIfUnreachable: pulumi.ResourceTransform = async (a) => {
      if ((await unreachable) === undefined) return undefined;
      const keys = Object.keys(a.props).filter((k) => k !== "rejoin");
      return { props: a.props, opts: { ...a.opts, ignoreChanges: [...(a.opts.ignoreChanges ?? []), ...keys] } };
    };
    const guard: pulumi.CustomResourceOptions = args.replicaOf ? { transforms: [keepIfUnreachable] } : {};
    this.unreachable = pulumi.output(unreachable.then((u) => u ?? null));
    // What `up` must do follows what preview said: a node that runs anything but this
    // stack's unit makes the readiness resource prove (and restart) it there.
    const hostRuns = hostReads.apply((views) => views.map((v, k) => hostRunsOf(v, planned[k].unitText)));

    const nodes = planned.map((n) => {
      const transaction = renderTransaction(transactionInput(d, stack, n.label, n.rank, n.host.address, presence));
      // Nothing runs on a node before the read above proved its host key (and that it
      // answers): a host that is not the pinned one fails the run at once, where
      // @pulumi/command would retry its dial (dialErrorLimit x perDialTimeout, 45 s).
      const connection = pulumi.all([hostReads, commandConnection(n.key, n.host)]).apply(([, c]) => c);
      const checked = preflightInput(d, stack, n.label, n.host.address, presence);
      // Check before you stop: the new configuration's preflight runs on its node (reads
      // only) before this stack's presence below, whose replacement (a unit that moves)
      // tears the old unit down first. A host that cannot run it keeps the old server.
      const preflight = new command.remote.Command(
        `${name}-preflight${n.suffix}`,
        { connection, ...hostStep(n.host, `bash -s # preflight ${d.service.unitName} for stack ${stack}`, renderPreflightScript(checked)), addPreviousOutputInEnv: false },
        { ...guard, parent: this, additionalSecretOutputs: ["connection"] },
      );
      // This stack on the node: created first, deleted last; its delete is the teardown.
      // A change of where the unit lives (address, port, unit name) replaces it old-first:
      // the old unit is drained, stopped and removed through the old address before the
      // commands below (which wait for it, and update in place) stage and start the new
      // one. Created first, the new unit would wait for GPUs the old one holds; deleted
      // last, the old teardown would stop the unit the new one just started when both
      // names reach the same machine. A renamed unit's teardown keeps its known-good record,
      // under the new name, for the new configuration to roll back to.
      const onNode = new Presence(
        `${name}-host${n.suffix}`,
        {
          connection: n.conn,
          rank: n.rank,
          stack,
          unitName: d.service.unitName,
          where: [n.host.address, n.host.port, d.service.unitName],
          transaction: transactionPath(d.service.unitName, stack),
          stageRemoval: renderStageRemoval(d.service.unitName, stack),
          urn: childUrn(COMPONENT_TYPE, `${name}-host${n.suffix}`),
          providerVersion: PROVIDER_VERSION,
        },
        // Old first also when Pulumi replaces it without asking the provider (\`up --replace\`).
        { ...guard, parent: this, dependsOn: [preflight], deleteBeforeReplace: true },
      );
      const stageScript = renderStageScript({ ...checked, unitText: n.unitText, transaction, helpers: helperScripts() });
      // apply: preflight, then stage in this stack's folder (the live unit is not touched).
      // Its stdin is the staging script (so `preview --diff` shows the unit's changed lines).
      const staged = new command.remote.Command(
        `${name}-unit${n.suffix}`,
        {
          connection,
          ...hostStep(n.host, `bash -s # stage ${d.service.unitName} for stack ${stack}`, stageScript),
          addPreviousOutputInEnv: false,
        },
        { ...guard, parent: this, dependsOn: [onNode], additionalSecretOutputs: ["connection"] },
      );
      return { ...n, staged, commandConnection: connection, connection: n.conn };
    });
    // The restart's stdin (the secrets), once the program has read what each node runs.
    const restartStdin = pulumi.all([stdin, hostView]).apply(([text]) => text);
    // restart on a single host: the whole host-side transaction, re-run when the unit (its
    // hash is in the command) or a secret (stdin) changes.
    const singleRestart = (n: (typeof nodes)[number]) => {
      const restart = new command.remote.Command(
        `${name}-restart`,
        {
          connection: n.commandConnection,
          ...hostStep(n.host, `bash ${shellQuote(transactionPath(d.service.unitName, stack))} restart ${n.unitHash}`, restartStdin),
          addPreviousOutputInEnv: false,
        },
        { parent: this, dependsOn: [n.staged], additionalSecretOutputs: ["connection"] },
      );
      return { resource: restart as pulumi.Resource, output: restart.stdout };
    };
    // restart of a group: every node's transaction, driven from one place behind one barrier
    // (provider.ts GroupRestart, remote/group-restart.ts): no node stops its old rank before
    // every node, node 0 included, holds its lock and has passed its checks. Once every node
    // is staged: a node that cannot even stage stops nothing anywhere.
    const groupRestart = () => {
      const restart = new GroupRestart(
        `${name}-restart-group`,
        {
          nodes: pulumi.all(nodes.map((n) => n.conn)).apply((conns) => conns.map((connection, k) => ({ connection, unitHash: nodes[k].unitHash, transaction: transactionPath(d.service.unitName, stack) }))),
          secretStdin: restartStdin,
          prepareSeconds: groupPrepareSeconds(d.safety.lockWaitSeconds),
          finishSeconds: groupFinishSeconds(d.timeouts),
          label,
          urn: childUrn(COMPONENT_TYPE, `${name}-restart-group`),
          providerVersion: PROVIDER_VERSION,
        },
        { parent: this, dependsOn: nodes.map((n) => n.staged) },
      );
      return nodes.map((_, k) => ({ resource: restart as pulumi.Resource, output: restart.outputs.apply((o) => o[k]) }));
    };
    // restart of a fleet's replica: out of the balancer first (fleet/remote/balancer.ts).
    const replicaRestart = (n: (typeof nodes)[number], fleet: NonNullable<SglangServiceArgs["replicaOf"]>) => {
      const restart = new ReplicaRestart(
        `${name}-restart`,
        {
          connection: n.conn,
          unitHash: n.unitHash,
          transaction: transactionPath(d.service.unitName, stack),
          secretStdin: restartStdin,
          balancer: pulumi.secret(fleet.balancer),
          standing: fleet.standing,
          // A replica that cannot be reached is not put back either (keepIfUnreachable keeps the rest).
          rejoin: pulumi.all([fleet.rejoin, this.unreachable]).apply(([r, u]) => (u === null ? r : false)),
          finishSeconds: groupFinishSeconds(d.timeouts),
          label,
          urn: childUrn(COMPONENT_TYPE, `${name}-restart`),
          providerVersion: FLEET_PROVIDER_VERSION,
        },
        { ...guard, parent: this, dependsOn: pulumi.output(fleet.after).apply((a) => [n.staged, ...a]) },
      );
      return { resource: restart as pulumi.Resource, output: restart.stdout };
    };
    const restarts = args.replicaOf ? [replicaRestart(nodes[0], args.replicaOf)] : planned.length === 1 ? [singleRestart(nodes[0])] : groupRestart();
    // A fleet's replica: HAProxy's agent check there (fleet/host/agent.sh), in place before it rejoins.
    const agent = args.replicaOf
      ? new ReplicaAgent(
          `${name}-agent`,
          { connection: nodes[0].conn, install: args.replicaOf.agent.install, removal: args.replicaOf.agent.removal, label, urn: childUrn(COMPONENT_TYPE, `${name}-agent`), providerVersion: FLEET_PROVIDER_VERSION },
          // After its own restart: a changed check (another model name) reaches the replica while it is out of the balancer.
          { ...guard, parent: this, dependsOn: [nodes[0].staged, restarts[0].resource, ...args.replicaOf.agent.after] },
        )
      : undefined;

    const target = {
      unitName: d.service.unitName,
      serverUrl: localServerUrl(d),
      port: d.service.port,
      tpSize: gpusPerNode(d),
      timeouts: d.timeouts,
      safety: d.safety,
      curlAuth: presence.apiKey ? ` -H @${secretPaths(d.service.unitName).curlHeaders}` : "",
      stack,
      label,
      urn: childUrn(COMPONENT_TYPE, `${name}-ready`),
    };
    const ready = new Ready(
      `${name}-ready`,
      {
        target,
        expectedArgs: expectedServerArgs(d),
        modelName: d.model.servedModelName ?? d.model.path,
        nodes: pulumi.all(
          nodes.map((n, k) =>
            pulumi.all([n.connection, restarts[k].output]).apply(([connection, restartOutput]) => ({
              connection,
              unitHash: n.unitHash,
              transaction: transactionPath(d.service.unitName, stack),
              restartOutput,
            })),
          ),
        ),
        secretStdin: stdin,
        hostRuns,
        providerVersion: PROVIDER_VERSION,
        ...(args.replicaOf ? { balancer: pulumi.secret(args.replicaOf.balancer) } : {}),
      },
      // Earlier versions of this tool named this resource `<name>-rollout` (and did the
      // restart in it): the alias adopts it, so upgrading updates it in place instead of
      // deleting it, whose old delete would stop and remove the live unit.
      { ...guard, parent: this, dependsOn: [...restarts.map((r) => r.resource), ...(agent ? [agent] : [])], aliases: [{ name: `${name}-rollout` }] },
    );

    const unitText = nodes[0].unitText;
    this.ready = ready;
    this.unitHash = pulumi.output(sha256(unitText));
    this.unitText = pulumi.output(unitText);
    this.launchCommand = pulumi.output([d.service.python, ...launchArgs(d, presence)]);
    this.serverArgs = ready.serverArgs;
    this.acceptLength = ready.acceptLength;
    this.timings = ready.timings;
    this.generation = ready.generation.apply((g) => g ?? null);
    // Only the hash leaves the secret `nodes` (their connections hold keys).
    this.provenUnitHash = pulumi.unsecret((ready as unknown as { nodes: pulumi.Output<{ unitHash: string }[]> }).nodes.apply((ns) => ns?.[0]?.unitHash ?? null));
    this.registerOutputs({ hostView, unitHash: this.unitHash, launchCommand: this.launchCommand, serverArgs: this.serverArgs, timings: this.timings, acceptLength: this.acceptLength, generation: this.generation });
  }
}
