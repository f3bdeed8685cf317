// Pure rendering: a resolved deployment in, the exact text that lands on the host out.
// Same input, byte-identical output (fixed flag order, sorted keys), so `pulumi preview`
// shows only real changes. Every value is quoted for the place it goes.
import { createHash } from "node:crypto";
import { Deployment, flagMapOf, visibleDeviceIndices } from "./schema";

/** Where our helper programs live on the host. */
export const HELPER_DIR = "/usr/local/lib/dflash-sglang";
export const STATE_DIR = "/var/lib/dflash-sglang";
/** Secret files (0600, folder 0700): never in the unit, on a command line or in the journal. */
export const SECRETS_DIR = "/etc/dflash-sglang";

export function secretPaths(unitName: string): { env: string; serverConfig: string; curlHeaders: string } {
  return {
    env: `${SECRETS_DIR}/${unitName}.env`,
    serverConfig: `${SECRETS_DIR}/${unitName}.secrets.yaml`,
    curlHeaders: `${SECRETS_DIR}/${unitName}.curl-headers`,
  };
}

/**
 * Where a server that runs as a user other than root (service.runAs) reads its secret files:
 * systemd's credentials (LoadCredential=, systemd 247 on) copy the root-only files into a
 * folder only the service's user can read, for the unit's life. A root server reads them in
 * place, so a root unit's text is what it was before runAs worked with secrets.
 */
const CREDENTIALS = "${CREDENTIALS_DIRECTORY}";
export const CREDENTIAL_NAMES = { serverConfig: "server-config.yaml", curlHeaders: "curl-headers" } as const;

/** Whether the unit hands its secret files over as systemd credentials (not root). */
export const usesCredentials = (d: Deployment): boolean => d.service.runAs !== "root";

/** The path the server (or its readiness gate) opens for a secret file. */
function secretPathInUnit(d: Deployment, which: keyof typeof CREDENTIAL_NAMES): string {
  return usesCredentials(d) ? `${CREDENTIALS}/${CREDENTIAL_NAMES[which]}` : secretPaths(d.service.unitName)[which];
}

/** Which secrets a deployment has (their values never reach the renderer). */
export interface SecretPresence {
  /** `--api-key`: passed to SGLang in a 0600 `--config` YAML, sent by every probe. */
  apiKey: boolean;
  /** HF_TOKEN: in a 0600 EnvironmentFile. */
  hfToken: boolean;
}

export const NO_SECRETS: SecretPresence = { apiKey: false, hfToken: false };

export function unitPath(unitName: string): string {
  return `/etc/systemd/system/${unitName}.service`;
}

/** Quotes one word for a systemd command line or assignment (systemd.syntax(7), systemd.service(5)). */
export function systemdQuote(word: string): string {
  assertPrintable(word);
  // `%` starts a specifier and `$` a variable expansion everywhere in Exec lines.
  const escaped = word.replace(/%/g, "%%").replace(/\$/g, "$$$$");
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(escaped)) return escaped;
  return `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** Quotes one word for POSIX sh. */
export function shellQuote(word: string): string {
  assertPrintable(word);
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A value systemd takes literally apart from specifiers (WorkingDirectory=, Description=). */
export function systemdLiteral(value: string): string {
  assertPrintable(value);
  // A trailing backslash would continue the directive onto the next line.
  if (value.endsWith("\\")) throw new Error(`refusing to render a value that ends with a backslash: ${JSON.stringify(value)}`);
  return value.replace(/%/g, "%%");
}

/**
 * Quotes an assignment for Environment=: quotes and backslash escapes are honoured there,
 * `$` is not special (systemd.exec(5)), `%` starts a specifier.
 */
export function systemdEnvironmentQuote(assignment: string): string {
  assertPrintable(assignment);
  // A backslash never stays bare (the pattern below excludes it), so it cannot end the line.
  const escaped = assignment.replace(/%/g, "%%");
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(escaped)) return escaped;
  return `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

function assertPrintable(word: string): void {
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(word)) {
    throw new Error(`refusing to render a value with a newline or control character: ${JSON.stringify(word)}`);
  }
}

/**
 * Deprecated spellings SGLang still accepts but hides from `--help`
 * (help=argparse.SUPPRESS), with the flag they stand for (sgl-project/sglang
 * python/sglang/srt/server_args.py, DeprecatedAliasStoreAction).
 */
export const HIDDEN_FLAG_ALIASES: Readonly<Record<string, string>> = {
  "--speculative-dflash-draft-window-size": "--speculative-draft-window-size",
};

/** `--flag-name` -> the key SGLang reports it under in /server_info (an alias reports as its flag). */
export function flagDest(flag: string): string {
  return (HIDDEN_FLAG_ALIASES[flag] ?? flag).replace(/^--/, "").replace(/-/g, "_");
}

/** Number of nodes the model spans (1 unless `nodes` lists more hosts). */
export function nodeCount(d: Deployment): number {
  return d.nodes.length + 1;
}

/** GPUs each node uses. */
export function gpusPerNode(d: Deployment): number {
  return d.model.tpSize / nodeCount(d);
}

/**
 * The GPUs (nvidia-smi indices) each node's server uses: the first (GPUs per node) of
 * service.environment.CUDA_VISIBLE_DEVICES where it is set (validated by the schema), else
 * 0..(GPUs per node - 1). The GPU waits, the unit's ExecStartPre and preflight watch these.
 */
export function gpuIndices(d: Deployment): number[] {
  const n = gpusPerNode(d);
  const visible = d.service.environment.CUDA_VISIBLE_DEVICES;
  const listed = visible === undefined ? undefined : visibleDeviceIndices(visible);
  if (typeof listed === "string") throw new Error(`service.environment.CUDA_VISIBLE_DEVICES: ${listed}`);
  return listed ? listed.slice(0, n) : Array.from({ length: n }, (_, i) => i);
}

/**
 * `--host` of a node. Ranks 1.. serve only SGLang's dummy health check on it
 * (srt/utils/common.py launch_dummy_health_check_server), on their own machine: a
 * wildcard stays a wildcard, a specific address of node 0 becomes the node's own address.
 */
function listenAddressOf(d: Deployment, rank: number): string {
  const a = d.service.listenAddress;
  if (rank === 0 || a === "0.0.0.0" || a === "::") return a;
  return d.nodes[rank - 1].address;
}

/** The server's argv after the interpreter, in a fixed order; `rank` is the node's rank. */
export function launchArgs(d: Deployment, secrets: SecretPresence = NO_SECRETS, rank = 0): string[] {
  const m = d.model;
  const s = d.speculative;
  const flags = flagMapOf(d);
  const args = ["-m", "sglang.launch_server", "--model-path", m.path, "--tp-size", String(m.tpSize), "--host", listenAddressOf(d, rank), "--port", String(d.service.port)];
  if (m.memFractionStatic !== undefined) args.push("--mem-fraction-static", String(m.memFractionStatic));
  if (m.contextLength !== undefined) args.push("--context-length", String(m.contextLength));
  if (m.quantization !== undefined) args.push("--quantization", m.quantization);
  if (m.trustRemoteCode) args.push("--trust-remote-code");
  if (m.servedModelName !== undefined) args.push("--served-model-name", m.servedModelName);
  // For the operators' dashboards; the drain does not rely on these (they lag).
  args.push("--enable-metrics");
  if (s.algorithm !== null) {
    args.push(flags.algorithm, s.algorithm, flags.drafterPath, m.drafterPath!);
    if (s.draftTokens !== undefined) args.push(flags.draftTokens, String(s.draftTokens));
    if (s.algorithm === "DDTREE" && flags.budget) args.push(flags.budget, String(s.budget));
    if (s.algorithm === "DDTREE" && flags.topkFlag) args.push(flags.topkFlag, String(s.topk));
    if (s.draftWindowSize !== "none" && flags.windowSize) args.push(flags.windowSize, String(s.draftWindowSize));
    if (s.compactCache && flags.compactCache) args.push(flags.compactCache);
  }
  if (nodeCount(d) > 1) args.push("--nnodes", String(nodeCount(d)), "--node-rank", String(rank), "--dist-init-addr", `${d.host.address}:${d.service.distInitPort}`);
  args.push(...m.extraArgs);
  // Last: renderUnit leaves the credentials path (${CREDENTIALS_DIRECTORY}) to systemd's expansion.
  if (secrets.apiKey) args.push("--config", secretPathInUnit(d, "serverConfig"));
  return args;
}

/** The long options in the launch args, to check against the host's `--help`. */
export function launchFlags(d: Deployment, secrets: SecretPresence = NO_SECRETS): string[] {
  // The same options on every node; only their values differ.
  return [...new Set(launchArgs(d, secrets).filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]))].sort();
}

/**
 * The launch flags (launchFlags) that only model.extraArgs names: the user's words, which
 * preflight reports as such when the host's SGLang does not list them (a typo there is to
 * correct, not a build to choose). A flag the tool derives as well counts as the tool's.
 */
export function extraArgsFlags(d: Deployment, secrets: SecretPresence = NO_SECRETS): string[] {
  const derived = new Set(launchFlags({ ...d, model: { ...d.model, extraArgs: [] } }, secrets));
  return launchFlags(d, secrets).filter((f) => !derived.has(f));
}

/** Environment of the server process, keys sorted. */
export function serverEnvironment(d: Deployment): [string, string][] {
  const env: Record<string, string> = { ...d.service.environment };
  const flags = flagMapOf(d);
  if (d.speculative.algorithm === "DDTREE" && flags.topkEnv && !flags.topkFlag) env[flags.topkEnv] = String(d.speculative.topk);
  return Object.keys(env)
    .sort()
    .map((k) => [k, env[k]]);
}

/**
 * What /get_server_info must report for the new configuration to count as serving.
 * Values only for options we set; an old process with other settings cannot match.
 */
export function expectedServerArgs(d: Deployment): Record<string, string | number | boolean | null> {
  const s = d.speculative;
  const flags = flagMapOf(d);
  const out: Record<string, string | number | boolean | null> = {
    model_path: d.model.path,
    tp_size: d.model.tpSize,
    port: d.service.port,
    speculative_algorithm: s.algorithm,
  };
  if (nodeCount(d) > 1) out.nnodes = nodeCount(d);
  if (s.algorithm !== null) {
    out[flagDest(flags.drafterPath)] = d.model.drafterPath!;
    if (s.draftTokens !== undefined) out[flagDest(flags.draftTokens)] = s.draftTokens;
    if (s.algorithm === "DDTREE" && flags.budget) out[flagDest(flags.budget)] = s.budget!;
    if (s.algorithm === "DDTREE" && flags.topkFlag) out[flagDest(flags.topkFlag)] = s.topk!;
    if (flags.windowSize) out[flagDest(flags.windowSize)] = s.draftWindowSize === "none" ? null : s.draftWindowSize;
    if (flags.compactCache) out[flagDest(flags.compactCache)] = s.compactCache;
  }
  return Object.fromEntries(Object.keys(out).sort().map((k) => [k, out[k]]));
}

/** The address our probes use on the host itself to reach the server. */
export function localServerUrl(d: Deployment): string {
  const a = d.service.listenAddress;
  const host = a === "0.0.0.0" || a === "::" ? "127.0.0.1" : a.includes(":") ? `[${a}]` : a;
  return `http://${host}:${d.service.port}`;
}

/** Extra seconds the unit's own readiness gate waits beyond timeouts.readySeconds. */
const GATE_MARGIN_SECONDS = 60;

/** The unit's TimeoutStartSec: its GPU wait (ExecStartPre), its readiness gate (ExecStartPost) and a margin. */
export function startTimeoutSeconds(t: Pick<Deployment["timeouts"], "readySeconds" | "gpuReleaseSeconds">): number {
  return Math.ceil(t.readySeconds + GATE_MARGIN_SECONDS + t.gpuReleaseSeconds + 30);
}

/**
 * Beyond timeouts.drainSeconds, the time SGLang needs to notice the end of its drain
 * (it checks every 5 s, tokenizer_manager.py sigterm_watchdog) and to end its processes.
 */
export const DRAIN_EXIT_MARGIN_SECONDS = 15;

/** TimeoutStopSec: how long systemd lets SGLang drain before it kills the server. */
export function stopTimeoutSeconds(t: Deployment["timeouts"]): number {
  return Math.ceil(t.drainSeconds) + DRAIN_EXIT_MARGIN_SECONDS;
}

export interface UnitMeta {
  /** Stack that owns the unit. */
  stack: string;
  secrets?: SecretPresence;
  /** Node rank for a model that spans several hosts; 0 (the serving node) by default. */
  rank?: number;
}

/** `python -m module` on the first line, then each `--option [value]` on a continuation line. */
function execLines(python: string, args: string[], lastExpanded = false): string {
  // The last word may be the credentials path (launchArgs puts --config last): systemd's own
  // variable, expanded by it, the one word not quoted. A word from the configuration never is.
  const quoted = args.map((a, i) => (lastExpanded && i === args.length - 1 ? a : systemdQuote(a)));
  const groups: string[][] = [[systemdQuote(python)]];
  quoted.forEach((q, i) => {
    if (args[i].startsWith("--")) groups.push([q]);
    else groups[groups.length - 1].push(q);
  });
  return groups.map((g) => g.join(" ")).join(" \\\n    ");
}

/** Seconds systemd waits before it starts a group's rank again (render.ts renderUnit, Restart=always). */
export const GROUP_RESTART_SECONDS = 5;

/** The runtime drop-in (in /run: gone at boot) that holds a group rank's restarts off while ours stop it (script.ts hold_restarts). */
export const HOLD_DROP_IN = "50-dflash-hold.conf";

export function renderUnit(d: Deployment, meta: UnitMeta): string {
  const t = d.timeouts;
  const secrets = meta.secrets ?? NO_SECRETS;
  const rank = meta.rank ?? 0;
  const files = secretPaths(d.service.unitName);
  const exec = (argv: string[]) => argv.map(systemdQuote).join(" ");
  const gpus = gpuIndices(d).join(",");
  const group = nodeCount(d) > 1;
  const nodeNote = group ? `, node ${rank} of ${nodeCount(d)}` : "";
  const lines = [
    "# Managed by dflash-sglang (Pulumi). `pulumi up` replaces manual edits.",
    "[Unit]",
    `Description=${systemdLiteral(`SGLang ${d.service.unitName} (stack ${meta.stack}${nodeNote})`)}`,
    "After=network-online.target",
    "Wants=network-online.target",
    `X-DFlash-Stack=${systemdLiteral(meta.stack)}`,
    // A group's rank is started again for as long as it takes (see Restart= below).
    ...(group ? ["StartLimitIntervalSec=0"] : []),
    "",
    "[Service]",
    // exec: the unit fails at once if the interpreter cannot be started.
    "Type=exec",
    `User=${d.service.runAs}`,
    `WorkingDirectory=${systemdLiteral(d.service.workingDirectory)}`,
    ...serverEnvironment(d).map(([k, v]) => `Environment=${systemdEnvironmentQuote(`${k}=${v}`)}`),
    ...(secrets.hfToken ? [`EnvironmentFile=${files.env}`] : []),
    // Read by systemd (root) at each start; the server's user reads only its own copy.
    ...(secrets.apiKey && usesCredentials(d) ? [`LoadCredential=${CREDENTIAL_NAMES.serverConfig}:${files.serverConfig}`, `LoadCredential=${CREDENTIAL_NAMES.curlHeaders}:${files.curlHeaders}`] : []),
    // Starting by hand must not race the release of the previous process's GPU memory.
    `ExecStartPre=${exec([`${HELPER_DIR}/wait-gpus-free`, gpus, String(t.gpuFreeMiB), String(Math.ceil(t.gpuReleaseSeconds))])}`,
    // One option per line (systemd joins "\\"-continued lines) so diffs show each change.
    `ExecStart=${execLines(d.service.python, launchArgs(d, secrets, rank), secrets.apiKey && usesCredentials(d))}`,
    // "active" means serving: the unit stays "activating" until a generation answers.
    // Only node 0 serves HTTP; the other nodes are active once started. The gate allows a
    // margin over timeouts.readySeconds so that `pulumi up`'s own deadline (which says
    // more) normally ends a hung start first.
    ...(rank === 0 ? [`ExecStartPost=${exec([`${HELPER_DIR}/wait-ready`, `${localServerUrl(d)}/health_generate`, String(Math.ceil(t.readySeconds + GATE_MARGIN_SECONDS))])} $MAINPID${secrets.apiKey ? ` ${secretPathInUnit(d, "curlHeaders")}` : ""}`] : []),
    `TimeoutStartSec=${startTimeoutSeconds(t)}`,
    // SIGTERM is SGLang's drain; this bounds it (see timeouts.drainSeconds).
    `TimeoutStopSec=${stopTimeoutSeconds(t)}`,
    // SGLang ends a finished drain by SIGKILLing its own process tree: a clean stop, not a
    // failure. (A kill by systemd at TimeoutStopSec still marks the unit failed, Result=timeout.)
    "SuccessExitStatus=SIGKILL",
    // SIGTERM to the server first (it drains and ends its workers), then the rest of the group.
    "KillMode=mixed",
    // One node: a server that ends by itself stays down (readiness or the next \`up\` says why).
    // A group: every rank ends when any node's does (the collectives abort), so a reboot or
    // crash of one node would leave the others down for good. Each rank is started again
    // (after GROUP_RESTART_SECONDS) until the group is whole: it comes back by itself once
    // every node is up. A stop of ours is never restarted (systemd's rule), and a restart of
    // the group holds these restarts off on every node while it stops them (script.ts
    // hold_restarts), so an old rank never joins a new one.
    ...(group ? ["Restart=always", `RestartSec=${GROUP_RESTART_SECONDS}`] : ["Restart=no"]),
    `SyslogIdentifier=${d.service.unitName}`,
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ];
  return lines.join("\n");
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The stack a rendered unit says it belongs to (its X-DFlash-Stack line), or null. */
export function unitStack(unitText: string): string | null {
  return /^X-DFlash-Stack=(.*)$/m.exec(unitText)?.[1] ?? null;
}

/**
 * The lines that differ between two units, in order, as `- old` / `+ new` (a longest-
 * common-subsequence line diff; units are a few dozen lines). One option per ExecStart
 * line makes each changed flag its own pair.
 */
export function unitLineChanges(from: string, to: string): string[] {
  const a = from.split("\n");
  const b = to.split("\n");
  const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      i++;
      j++;
    } else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(`- ${a[i++]}`);
    else out.push(`+ ${b[j++]}`);
  }
  return out;
}
