// The component: one SGLang configuration on one GPU host, reconfigured safely.
import * as pulumi from "@pulumi/pulumi";
import { Deployment } from "./schema";
import { expectedServerArgs, gpusPerNode, helperScripts, launchArgs, launchFlags, localServerUrl, renderUnit, secretPaths, SecretPresence, sha256 } from "./render";
import type { StackSecrets } from "./config";
import { PROVIDER_VERSION, Rollout, StagedUnit } from "./provider";

export interface SglangServiceArgs {
  /** The validated configuration (see schema.ts: parseDeployment). */
  deployment: Deployment;
  /** SSH private key for deployment.host, kept secret. */
  privateKey: pulumi.Input<string>;
  /** SSH private keys for deployment.nodes (same order); the host's key where missing. */
  nodeKeys?: pulumi.Input<string>[];
  /** Secrets for the server; written to 0600 files on the host, never into the unit. */
  secrets?: StackSecrets;
}

/** The content of each secret file on the host, by path. */
function secretFiles(unitName: string, secrets: StackSecrets): pulumi.Output<Record<string, string>> {
  const paths = secretPaths(unitName);
  return pulumi.secret(
    pulumi.all([secrets.apiKey, secrets.hfToken]).apply(([apiKey, hfToken]) => {
      const files: Record<string, string> = {};
      if (apiKey !== undefined) {
        files[paths.serverConfig] = `api-key: ${JSON.stringify(apiKey)}\n`;
        files[paths.curlHeaders] = `Authorization: Bearer ${apiKey}\n`;
      }
      if (hfToken !== undefined) files[paths.env] = `HF_TOKEN=${JSON.stringify(hfToken)}\n`;
      return files;
    }),
  );
}

export const COMPONENT_TYPE = "dflash:sglang:Service";

/** The SSH connection to the deployment's host, as a secret (it carries the private key). */
export function connectionOf(d: Deployment, privateKey: pulumi.Input<string>, host: Deployment["host"] = d.host) {
  return pulumi.secret(pulumi.output(privateKey).apply((key) => ({ host: host.address, port: host.port, user: host.user, hostKey: host.hostKey, privateKey: key })));
}

/** URN of a dynamic resource child of a component, for progress lines attached to it. */
export function childUrn(componentType: string, child: string): string {
  return `urn:pulumi:${pulumi.getStack()}::${pulumi.getProject()}::${componentType}$pulumi-nodejs:dynamic:Resource::${child}`;
}

export class SglangService extends pulumi.ComponentResource {
  /** sha256 of the rendered unit: what the host should run. */
  readonly unitHash: pulumi.Output<string>;
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
  readonly timings: pulumi.Output<{ drainSeconds: number; stopSeconds: number; gpuReleaseSeconds: number; loadToReadySeconds: number; requestsCut: number | null }>;
  /** Acceptance length the server reported when it became ready. */
  readonly acceptLength: pulumi.Output<number | null>;

  constructor(name: string, args: SglangServiceArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super(COMPONENT_TYPE, name, {}, opts);
    const d = args.deployment;
    const stack = pulumi.getStack();
    const urnOf = (child: string) => childUrn(COMPONENT_TYPE, child);
    const label = `${d.service.unitName} (stack ${stack})`;
    const connection = connectionOf(d, args.privateKey);

    const secrets = args.secrets ?? {};
    const presence: SecretPresence = { apiKey: secrets.apiKey !== undefined, hfToken: secrets.hfToken !== undefined };
    const files = secretFiles(d.service.unitName, secrets);
    const unitText = renderUnit(d, { stack, secrets: presence });
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
    };

    const paths = [
      { what: "model.path", path: d.model.path },
      ...(d.speculative.algorithm !== null && d.model.drafterPath ? [{ what: "model.drafterPath", path: d.model.drafterPath }] : []),
      { what: "service.workingDirectory", path: d.service.workingDirectory },
    ];
    // One staged unit per node: node 0 is the serving host, the others run ranks 1.. of the model.
    const stageOn = (rank: number, conn: ReturnType<typeof connectionOf>, child: string) =>
      new StagedUnit(
        child,
        {
          connection: conn,
          label: rank === 0 ? label : `${label} node ${rank}`,
          urn: urnOf(child),
          unitName: d.service.unitName,
          unitText: renderUnit(d, { stack, secrets: presence, rank }),
          helpers: helperScripts(),
          secretFiles: files,
          python: d.service.python,
          flags: launchFlags(d, presence),
          paths,
          tpSize: gpusPerNode(d),
          providerVersion: PROVIDER_VERSION,
        },
        { parent: this },
      );
    const staged = stageOn(0, connection, `${name}-unit`);
    const workers = d.nodes.map((node, i) => {
      const conn = connectionOf(d, args.nodeKeys?.[i] ?? args.privateKey, node);
      const unit = stageOn(i + 1, conn, `${name}-unit-node${i + 1}`);
      return { conn, unit };
    });

    const rollout = new Rollout(
      `${name}-rollout`,
      {
        connection,
        target: { ...target, urn: urnOf(`${name}-rollout`) },
        unitHash: staged.unitHash,
        stagedPath: staged.stagedPath,
        secretsDigest: pulumi.secret(files.apply((f) => sha256(JSON.stringify(f)))),
        expectedArgs: expectedServerArgs(d),
        modelName: d.model.servedModelName ?? d.model.path,
        workers: pulumi.all(workers.map((w) => pulumi.all([w.conn, w.unit.unitHash, w.unit.stagedPath]).apply(([connection, unitHash, stagedPath]) => ({ connection, unitHash, stagedPath })))),
        providerVersion: PROVIDER_VERSION,
      },
      { parent: this, dependsOn: [staged, ...workers.map((w) => w.unit)] },
    );

    this.unitHash = staged.unitHash;
    this.unitText = pulumi.output(unitText);
    this.launchCommand = pulumi.output([d.service.python, ...launchArgs(d, presence)]);
    this.serverArgs = rollout.serverArgs;
    this.acceptLength = rollout.acceptLength;
    this.timings = pulumi.all([rollout.drainSeconds, rollout.stopSeconds, rollout.gpuReleaseSeconds, rollout.loadToReadySeconds, rollout.requestsCut]).apply(
      ([drainSeconds, stopSeconds, gpuReleaseSeconds, loadToReadySeconds, requestsCut]) => ({ drainSeconds, stopSeconds, gpuReleaseSeconds, loadToReadySeconds, requestsCut }),
    );
    this.registerOutputs({ unitHash: this.unitHash, launchCommand: this.launchCommand, serverArgs: this.serverArgs, timings: this.timings, acceptLength: this.acceptLength });
  }
}
