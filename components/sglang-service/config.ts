// Reads this stack's configuration and validates it before any resource exists, so bad
// input fails `preview`/`up` with a clear message and touches no host.
import * as fs from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, Deployment, parseDeployment } from "./schema";

const KEYS = ["host", "nodes", "service", "model", "speculative", "sglangBuild", "timeouts", "safety", "benchmark"] as const;

export interface StackSecrets {
  /** `dflash-sglang:apiKey`: the server's --api-key; every probe sends it. */
  apiKey?: pulumi.Output<string>;
  /** `dflash-sglang:hfToken`: HF_TOKEN for the server. */
  hfToken?: pulumi.Output<string>;
}

export interface StackDeployment {
  deployment: Deployment;
  privateKey: pulumi.Output<string>;
  /** SSH keys of deployment.nodes: their own privateKeyPath, else the stack's key. */
  nodeKeys: pulumi.Output<string>[];
  secrets: StackSecrets;
}

export function readStackDeployment(): StackDeployment {
  const stack = pulumi.getStack();
  const config = new pulumi.Config(CONFIG_NAMESPACE);
  const raw: Record<string, unknown> = {};
  for (const key of KEYS) raw[key] = configValue(config.get(key));
  let deployment: Deployment;
  try {
    deployment = parseDeployment(raw, stack);
  } catch (e) {
    throw new pulumi.RunError((e as Error).message);
  }
  const privateKey = readPrivateKey(config, deployment, stack);
  return {
    deployment,
    privateKey,
    nodeKeys: deployment.nodes.map((n, i) => (n.privateKeyPath ? readKeyFile(n.privateKeyPath, `nodes[${i}].privateKeyPath`, stack) : privateKey)),
    secrets: { apiKey: config.getSecret("apiKey"), hfToken: config.getSecret("hfToken") },
  };
}

/** One node's SSH connection, as plain text (the private key included). */
export interface NodeConnection {
  host: string;
  port: number;
  user: string;
  hostKey: string;
  privateKey: string;
}

/**
 * The SSH connections of every node (node 0 first) that the stack's configuration names
 * now: for the dynamic providers, which get the stack's configuration at every operation
 * (`refresh` and `destroy` included) and so can reach a host with rotated credentials that
 * their state does not hold yet. `get` reads a full key (`dflash-sglang:host`). Throws with
 * the stack, the key and what to do, like the program.
 */
export function nodeConnectionsFromConfig(get: (key: string) => string | undefined, stack: string): NodeConnection[] {
  const raw: Record<string, unknown> = {};
  for (const key of KEYS) raw[key] = configValue(get(`${CONFIG_NAMESPACE}:${key}`));
  const d = parseDeployment(raw, stack);
  const secret = get(`${CONFIG_NAMESPACE}:sshPrivateKey`);
  const read = (file: string | undefined, key: string): string => {
    if (!file) throw new Error(`Stack "${stack}": no SSH key. Set ${CONFIG_NAMESPACE}:host.privateKeyPath to a key file, or the secret ${CONFIG_NAMESPACE}:sshPrivateKey.`);
    try {
      return fs.readFileSync(file, "utf8");
    } catch (e) {
      throw new Error(`Stack "${stack}": cannot read ${CONFIG_NAMESPACE}:${key} ${file}: ${(e as Error).message}`);
    }
  };
  const hostKey = secret ?? read(d.host.privateKeyPath, "host.privateKeyPath");
  return [d.host, ...d.nodes].map((h, i) => ({
    host: h.address,
    port: h.port,
    user: h.user,
    hostKey: h.hostKey,
    privateKey: i > 0 && d.nodes[i - 1].privateKeyPath ? read(d.nodes[i - 1].privateKeyPath, `nodes[${i - 1}].privateKeyPath`) : hostKey,
  }));
}

/** Structured values arrive as JSON text, plain ones (e.g. `sglangBuild: upstream`) as-is. */
function configValue(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function readPrivateKey(config: pulumi.Config, d: Deployment, stack: string): pulumi.Output<string> {
  const secret = config.getSecret("sshPrivateKey");
  if (secret) return secret;
  const file = d.host.privateKeyPath;
  if (!file) {
    throw new pulumi.RunError(`Stack "${stack}": no SSH key. Set ${CONFIG_NAMESPACE}:host.privateKeyPath to a key file, or the secret ${CONFIG_NAMESPACE}:sshPrivateKey (\`npm run pulumi -- config set --secret --stack ${stack} sshPrivateKey < key\`).`);
  }
  return readKeyFile(file, "host.privateKeyPath", stack);
}

function readKeyFile(file: string, key: string, stack: string): pulumi.Output<string> {
  try {
    return pulumi.secret(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new pulumi.RunError(`Stack "${stack}": cannot read ${CONFIG_NAMESPACE}:${key} ${file}: ${(e as Error).message}`);
  }
}
