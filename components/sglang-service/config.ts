// Reads this stack's configuration and validates it before any resource exists, so bad
// input fails `preview`/`up` with a clear message and touches no host.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as YAML from "yaml";
import { CONFIG_NAMESPACE, ConfigError, Deployment, failConfig, hostSchema, parseDeployment } from "./schema";
import { mergeSettings, OVERLAY_FILE, overlayFor, overlayKeys, readOverlay } from "./overlay";
import { closest } from "../../simhost/command-line";
import { configValue } from "./config-value";
import { shellQuote } from "./render";

const KEYS = ["host", "nodes", "service", "model", "speculative", "sglangBuild", "timeouts", "safety", "benchmark", "fleet"] as const;
/** The secret settings, read apart from the deployment (config.getSecret). */
const SECRET_KEYS = ["apiKey", "hfToken", "sshPrivateKey"] as const;

/**
 * Pure: a problem line for each key of our namespace (full names, as Pulumi lists a stack's
 * configuration) that is no setting: a misspelt section (`timeout` for `timeouts`) would
 * otherwise be ignored and its defaults apply. Keys of other namespaces are not ours to judge.
 */
export function unknownSettings(fullKeys: string[]): string[] {
  const settings: string[] = [...KEYS, ...SECRET_KEYS];
  return fullKeys
    .filter((k) => k.startsWith(`${CONFIG_NAMESPACE}:`))
    .map((k) => k.slice(CONFIG_NAMESPACE.length + 1))
    .filter((k) => !settings.includes(k))
    .sort()
    .map((k) => {
      const guess = closest(k, settings);
      return `  - ${CONFIG_NAMESPACE}:${k}: is not a setting${guess ? `; did you mean ${CONFIG_NAMESPACE}:${guess}?` : ""} (valid: ${KEYS.join(", ")}, and the secrets ${SECRET_KEYS.join(", ")})`;
    });
}

/**
 * Pure: a problem line for each setting of our namespace other than the secret ones that holds a
 * secret value (`secure:` anywhere in it; `secretKeys`: full key names, as the engine marks
 * them). Decrypted, it would reach a host as a unit name, an address or a flag in a command line,
 * before anyone reviewed it: a secret belongs in apiKey, hfToken or sshPrivateKey only.
 */
export function secretsOutsideSecretSettings(secretKeys: string[]): string[] {
  return secretKeys
    .filter((k) => k.startsWith(`${CONFIG_NAMESPACE}:`) && !(SECRET_KEYS as readonly string[]).includes(k.slice(CONFIG_NAMESPACE.length + 1)))
    .sort()
    .map((k) => `  - ${k}: holds a secret value (secure:); only the secret settings ${SECRET_KEYS.join(", ")} may. A secret anywhere else would reach a host in a command line (a unit name, an address, a flag). Set it as a plain value, or use a secret setting`);
}

/**
 * Pure: a problem line for each secret setting set to nothing (`config set --secret apiKey
 * "$(openssl ...)"` where openssl is missing stores ""): an empty API key would start a server
 * that asks for no key at all, and an empty SSH key or token fails far from its cause.
 */
export function emptySecrets(all: Record<string, string>): string[] {
  return SECRET_KEYS.filter((k) => all[`${CONFIG_NAMESPACE}:${k}`] === "").map(
    (k) => `  - ${CONFIG_NAMESPACE}:${k}: is set but empty; set it to a value (e.g. \`npx pulumi config set --secret ${k}\`, which prompts for it) or remove it (\`npx pulumi config rm ${k}\`)`,
  );
}

/**
 * Pure: a problem line for an API key that starts with "-" (about one URL-safe random token in
 * 64). SGLang merges its --config file into its command line as `--api-key VALUE`
 * (srt/server_args_config_parser.py), and argparse takes a word that starts with "-" (but for a
 * negative number) for an option: `argument --api-key: expected one argument`, exit 2, so the
 * server never starts. Refused here, before anything reaches a host.
 */
export function optionLikeSecrets(all: Record<string, string>): string[] {
  const key = all[`${CONFIG_NAMESPACE}:apiKey`];
  // argparse's own exceptions: a negative number, or a word with a space, is a value.
  if (typeof key !== "string" || !key.startsWith("-") || /^-\d+$|^-\d*\.\d+$/.test(key) || key.includes(" ")) return [];
  return [
    `  - ${CONFIG_NAMESPACE}:apiKey: starts with "-", which SGLang's argument parser takes for an option (SGLang would refuse to start: "argument --api-key: expected one argument"); set a key that does not, e.g. \`npx pulumi config set --secret apiKey "$(openssl rand -hex 32)"\``,
  ];
}

/** The full names of the stack's configuration keys whose values hold a secret (the engine's list; an internal of the SDK, read defensively). */
function secretConfigKeys(): string[] {
  const isSecret = (pulumi.runtime as unknown as { isConfigSecret?: (k: string) => boolean }).isConfigSecret;
  return typeof isSecret === "function" ? Object.keys(pulumi.runtime.allConfig()).filter((k) => isSecret(k)) : [];
}

export interface StackSecrets {
  /** `dflash-sglang:apiKey`: the server's --api-key; every probe sends it. Not empty, and not starting with "-" (SGLang's argument parser would take it for an option). */
  apiKey?: pulumi.Output<string>;
  /** `dflash-sglang:hfToken`: HF_TOKEN for the server. */
  hfToken?: pulumi.Output<string>;
}

export interface StackDeployment {
  deployment: Deployment;
  privateKey: pulumi.Output<string>;
  /** SSH keys of deployment.nodes: their own privateKeyPath, else the stack's key. */
  nodeKeys: pulumi.Output<string>[];
  /** SSH keys of fleet.replicas (same order) and of fleet.loadBalancer.host: their own privateKeyPath, else the stack's key. */
  fleetKeys: { replicas: pulumi.Output<string>[]; loadBalancer: pulumi.Output<string> } | undefined;
  secrets: StackSecrets;
}

export function readStackDeployment(): StackDeployment {
  const stack = pulumi.getStack();
  const config = new pulumi.Config(CONFIG_NAMESPACE);
  let deployment: Deployment;
  let local: Record<string, unknown> = {};
  try {
    const unknown = [...unknownSettings(Object.keys(pulumi.runtime.allConfig())), ...secretsOutsideSecretSettings(secretConfigKeys()), ...emptySecrets(pulumi.runtime.allConfig()), ...optionLikeSecrets(pulumi.runtime.allConfig())];
    if (unknown.length > 0) failConfig(stack, unknown);
    local = localSettings(stack);
    deployment = deploymentFromConfig((key) => config.get(key), stack, local);
  } catch (e) {
    throw new pulumi.RunError((e as Error).message);
  }
  const overlaid = overlayKeys(local);
  if (overlaid.length) pulumi.log.info(`${OVERLAY_FILE} (this checkout's, git-ignored) sets ${overlaid.join(", ")} for stack ${stack}`);
  const privateKey = readPrivateKey(config, deployment, stack);
  return {
    deployment,
    privateKey,
    nodeKeys: deployment.nodes.map((n, i) => (n.privateKeyPath ? readKeyFile(n.privateKeyPath, `nodes[${i}].privateKeyPath`, stack) : privateKey)),
    fleetKeys: deployment.fleet && {
      replicas: deployment.fleet.replicas.map((r, i) => (r.privateKeyPath ? readKeyFile(r.privateKeyPath, `fleet.replicas[${i}].privateKeyPath`, stack) : privateKey)),
      loadBalancer: deployment.fleet.loadBalancer.host.privateKeyPath ? readKeyFile(deployment.fleet.loadBalancer.host.privateKeyPath, "fleet.loadBalancer.host.privateKeyPath", stack) : privateKey,
    },
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
  /** host.become (nodes[N].become): how the SSH user runs the host steps as root; unset for root. */
  become?: "sudo";
}

/** What the stack's configuration names now: the unit's name, and every node's connection (node 0 first). */
export interface ConfiguredNodes {
  unitName: string;
  connections: NodeConnection[];
  /** The stack is a fleet (fleet is set): a replica's host that cannot be reached does not stop a removal. */
  fleet: boolean;
}

/**
 * The unit name and the SSH connections of every node (node 0 first) that the stack's
 * configuration names now: for the dynamic providers, which get the stack's configuration at every operation
 * (`refresh` and `destroy` included) and so can reach a host with rotated credentials that
 * their state does not hold yet. `get` reads a full key (`dflash-sglang:host`). Throws with
 * the stack, the key and what to do, like the program.
 */
export function nodesFromConfig(get: (key: string) => string | undefined, stack: string): ConfiguredNodes {
  const d = deploymentFromConfig((key) => get(`${CONFIG_NAMESPACE}:${key}`), stack);
  const file = d.host.privateKeyPath;
  const hostKey = get(`${CONFIG_NAMESPACE}:sshPrivateKey`) ?? (file ? keyFileText(file, "host.privateKeyPath", stack) : undefined);
  if (hostKey === undefined) throw new Error(noKeyMessage(stack));
  const connections = [d.host, ...d.nodes].map((h, i) => {
    const own = i > 0 ? d.nodes[i - 1].privateKeyPath : undefined;
    return { host: h.address, port: h.port, user: h.user, hostKey: h.hostKey, privateKey: own ? keyFileText(own, `nodes[${i - 1}].privateKeyPath`, stack) : hostKey, ...(h.become ? { become: h.become } : {}) };
  });
  return { unitName: d.service.unitName, connections, fleet: d.fleet !== undefined };
}

/**
 * The validated deployment from a reader of this project's keys (`host`, `service`, ...), with
 * the per-operator overlay (dflash.local.yaml, overlay.ts) merged over them.
 */
function deploymentFromConfig(get: (key: string) => string | undefined, stack: string, local = localSettings(stack)): Deployment {
  const raw: Record<string, unknown> = {};
  for (const key of KEYS) raw[key] = configValue(get(key));
  for (const [k, v] of Object.entries(local)) raw[k] = mergeSettings(raw[k], v);
  const project = projectSettings();
  try {
    return parseDeployment(raw, stack, project);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const fixed = withHostFix(e, raw.host, project.host, stack);
    const keys = overlayKeys(local);
    if (keys.length === 0) throw fixed;
    throw new ConfigError(`${fixed.message}\n${OVERLAY_FILE} (this checkout's, git-ignored) set ${keys.join(", ")} for this stack, merged over its configuration: a key above may come from there.`);
  }
}

const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What the schema fills in for a host key left out (host.port 22, host.user root). */
function hostDefaults(): Record<string, unknown> {
  const r = hostSchema.safeParse({ address: "a", hostKey: "ssh-ed25519 AAAA" });
  return r.success ? r.data : {};
}

/**
 * Pure (issue 63): the commands that point stack \`stack\` at a GPU host, in the order they work,
 * when its host block cannot be used as it stands: host.address still Pulumi.yaml's placeholder
 * (an RFC 2606 .invalid name) or missing, or host.hostKey missing. A stack that sets one key of
 * \`host\` replaces Pulumi.yaml's whole host (Pulumi merges no objects), so the address alone
 * led straight into \`host.hostKey: is required\`, and the key file Pulumi.yaml named was lost
 * too: every key the stack still needs is set here, the host key last, read from the address
 * given by ssh-keyscan. `host` is the stack's host as read, `projectHost` Pulumi.yaml's.
 * Undefined when the host block needs none of this.
 */
export function hostFixCommands(host: unknown, projectHost: unknown, stack: string): { keys: string[]; commands: string[]; newAddress: boolean; inherited: boolean } | undefined {
  const given = isMapping(host) ? host : {};
  const project = isMapping(projectHost) ? projectHost : {};
  const address = typeof given.address === "string" && !/\.invalid$/i.test(given.address) ? given.address : undefined;
  if (address !== undefined && given.hostKey !== undefined) return undefined;
  // Pulumi.yaml's host as read (the stack sets none), or the stack's own: then Pulumi.yaml's
  // keys it lacks are gone already. Either way, once the stack sets host.address, only what
  // it sets itself is left.
  const inherited = [...Object.keys(given), ...Object.keys(project)].every((k) => JSON.stringify(given[k]) === JSON.stringify(project[k]));
  const defaults = hostDefaults();
  const lost = Object.keys(project).filter((k) => k !== "address" && k !== "hostKey" && (inherited || !(k in given)) && JSON.stringify(project[k]) !== JSON.stringify(defaults[k]));
  const set = (key: string, value: string) => `npx pulumi config set --path --stack ${shellQuote(stack)} host.${key} ${value}`;
  const addr = address === undefined ? '"$ADDR"' : shellQuote(address);
  const port = Number(given.port ?? (inherited ? project.port : undefined) ?? 22);
  const scan = `"$(ssh-keyscan${port !== 22 ? ` -p ${port}` : ""} -t ed25519 ${addr} 2>/dev/null | cut -d' ' -f2-)"`;
  // A new address is a new host: its key is read anew, whatever the stack pinned before.
  const keys = [...(address === undefined ? ["address"] : []), ...lost, "hostKey"];
  const commands = keys.map((k) => (k === "address" ? set(k, addr) : k === "hostKey" ? set(k, scan) : set(k, shellQuote(String(project[k])))));
  return { keys, commands, newAddress: address === undefined, inherited };
}

/**
 * Pure: \`error\` (parseDeployment's) with the problem lines of the host keys that
 * hostFixCommands sets replaced by one line that gives those commands; unchanged when the
 * host block needs none of them.
 */
export function withHostFix(error: ConfigError, host: unknown, projectHost: unknown, stack: string): ConfigError {
  const fix = hostFixCommands(host, projectHost, stack);
  if (!fix) return error;
  const placeholder = isMapping(host) && typeof host.address === "string" ? host.address : undefined;
  const replaced = !fix.inherited && isMapping(projectHost) && projectHost.hostKey !== undefined;
  const why = fix.newAddress
    ? `${placeholder !== undefined ? `is still the documented placeholder ${placeholder}` : "is required"}. Point the stack at your GPU host: set ADDR to its address (e.g. ADDR=10.0.0.5), then run these, in order`
    : `is required${replaced ? `: Pulumi.yaml sets host.hostKey, but stacks/Pulumi.${stack}.yaml sets ${CONFIG_NAMESPACE}:host itself, which replaces Pulumi.yaml's whole host (Pulumi merges no objects)` : ""}. Run these, in order`;
  const line =
    `  - ${CONFIG_NAMESPACE}:host.${fix.newAddress ? "address" : "hostKey"}: ${why}; they set every host key the stack ${fix.newAddress ? "needs, since a stack that sets one key of host replaces Pulumi.yaml's whole host" : "still needs"} ` +
    `(where the network to the host is not trusted, compare the key ssh-keyscan reads with \`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub\` on the host):\n` +
    fix.commands.map((c) => `      ${c}`).join("\n");
  const covered = (l: string) => fix.keys.some((k) => l.startsWith(`  - ${CONFIG_NAMESPACE}:host.${k}: `));
  const lines = error.message.split("\n");
  const first = lines.findIndex(covered);
  const at = first >= 0 ? first : lines.findIndex((l) => l.startsWith("  - "));
  const kept = lines.filter((l) => !covered(l));
  kept.splice(at >= 0 ? at : 1, 0, line);
  return new ConfigError(kept.join("\n"));
}

/** What this checkout's overlay sets for the stack ({} without one); an invalid overlay fails the stack, naming it. */
function localSettings(stack: string): Record<string, unknown> {
  // The project's own workspaces (tests, demo, sweeps, benchmarks) set every host themselves.
  const off = process.env.DFLASH_LOCAL_OVERLAY;
  if (off === "off") return {};
  if (off !== undefined && off !== "") throw new ConfigError(`Stack "${stack}": DFLASH_LOCAL_OVERLAY is "${off}"; valid: "off" (ignore ${OVERLAY_FILE}), or unset`);
  try {
    const overlay = readOverlay(process.cwd(), stack);
    return overlay ? overlayFor(overlay, stack) : {};
  } catch (e) {
    throw new ConfigError(`Stack "${stack}": ${(e as Error).message}\nFix ${path.resolve(OVERLAY_FILE)} (nothing was changed on any host).`);
  }
}


/**
 * Pulumi.yaml's settings of our namespace (keys without it), read from the program's folder,
 * only to explain an error (a stack's section replacing the project's whole); {} if unreadable.
 */
function projectSettings(): Record<string, unknown> {
  try {
    const doc = YAML.parse(fs.readFileSync("Pulumi.yaml", "utf8")) as { config?: Record<string, unknown> } | null;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc?.config ?? {})) {
      if (!k.startsWith(`${CONFIG_NAMESPACE}:`)) continue;
      out[k.slice(CONFIG_NAMESPACE.length + 1)] = typeof v === "object" && v !== null && !Array.isArray(v) && "value" in v ? (v as { value: unknown }).value : v;
    }
    return out;
  } catch {
    return {};
  }
}

const noKeyMessage = (stack: string) =>
  `Stack "${stack}": no SSH key. Set ${CONFIG_NAMESPACE}:host.privateKeyPath to a key file, or the secret ${CONFIG_NAMESPACE}:sshPrivateKey (\`npx pulumi config set --secret --stack ${stack} sshPrivateKey < key\`).`;

/** A private key file's text; the error names the stack, the key and the file. */
function keyFileText(file: string, key: string, stack: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new Error(`Stack "${stack}": cannot read ${CONFIG_NAMESPACE}:${key} ${file}: ${(e as Error).message}`);
  }
}


function readPrivateKey(config: pulumi.Config, d: Deployment, stack: string): pulumi.Output<string> {
  const secret = config.getSecret("sshPrivateKey");
  if (secret) return secret;
  const file = d.host.privateKeyPath;
  if (!file) throw new pulumi.RunError(noKeyMessage(stack));
  return readKeyFile(file, "host.privateKeyPath", stack);
}

function readKeyFile(file: string, key: string, stack: string): pulumi.Output<string> {
  try {
    return pulumi.secret(keyFileText(file, key, stack));
  } catch (e) {
    throw new pulumi.RunError((e as Error).message);
  }
}
