// The one source of truth for a deployment's configuration: types (z.input for what a
// stack file may say, z.output for the resolved values), defaults, and error messages.
// Pure: no Pulumi imports, so tests and dynamic providers can use it freely.
import { z } from "zod";
import { benchmarkSchema } from "../benchmark/schema";

/** Config namespace = project name in Pulumi.yaml. */
export const CONFIG_NAMESPACE = "dflash-sglang";

// Values end up in a systemd unit and in shell commands: reject anything that could
// start a new line or hide a character, whatever is escaped later.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const text = (what: string) =>
  z.string().min(1, { error: `${what} must not be empty` }).refine((s) => !CONTROL.test(s), { error: `${what} must not contain newlines or control characters` });
const absPath = (what: string) =>
  text(what)
    .refine((s) => s.startsWith("/"), { error: `${what} must be an absolute path (start with /)` })
    .refine((s) => !s.endsWith("\\"), { error: `${what} must not end with a backslash` });
/**
 * A value that becomes one word of a command line (ssh's destination, a flag's value):
 * one beginning with "-" would be read as an option (e.g. `-oProxyCommand=...` for ssh).
 */
const argWord = (what: string) => text(what).refine((s) => !s.startsWith("-"), { error: `${what} must not begin with "-" (it would be read as a command-line option)` });
/** A host name or an IPv4/IPv6 address. */
const address = (what: string) =>
  argWord(what).refine((s) => /^[A-Za-z0-9._:%[\]-]+$/.test(s), { error: `${what} must be a host name or an IP address (letters, digits, '.', '-', ':', '[', ']', '%')` });
const port = z.number().int().min(1).max(65535);
const seconds = (what: string, dflt: number) => z.number().positive({ error: `${what} must be a positive number of seconds` }).default(dflt);

export const hostSchema = z
  .object({
    /** Address of the GPU host. */
    address: address("host.address").refine((a) => !/\.invalid$/i.test(a), {
      error: "host.address is still the documented placeholder: set it to your GPU host (`npm run pulumi -- config set --path host.address <addr>`)",
    }),
    /** SSH port. Defaults to 22. */
    port: port.default(22),
    /** SSH user. Defaults to root (systemctl and unit files need it). */
    user: z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/, { error: 'host.user must be a plain user name (letters, digits, "_", "." and "-", not beginning with "-")' }).default("root"),
    /** Private key file on the machine running Pulumi; or set the secret `sshPrivateKey` instead. */
    privateKeyPath: absPath("host.privateKeyPath").optional(),
    /**
     * The host's SSH public key ("ssh-ed25519 AAAA..."), pinned: every connection
     * verifies it before running anything. Required.
     */
    hostKey: text("host.hostKey").refine((s) => /^(ssh-ed25519|ecdsa-sha2-nistp\d+|ssh-rsa) [A-Za-z0-9+/=]+( .*)?$/.test(s), {
      error: 'host.hostKey must be an SSH public key line such as "ssh-ed25519 AAAA..." (see `ssh-keyscan -t ed25519 HOST`)',
    }),
  })
  .strict();

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "environment variable names must match [A-Za-z_][A-Za-z0-9_]*" });

export const serviceSchema = z
  .object({
    /** systemd unit name, without ".service". Defaults to "sglang". */
    unitName: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.@-]{0,200}$/, { error: "service.unitName may use letters, digits, '_', '.', '@' and '-' only" }).default("sglang"),
    /** Python interpreter that has SGLang installed. Defaults to /usr/bin/python3. */
    python: absPath("service.python").default("/usr/bin/python3"),
    /** Working directory of the server. Defaults to /. */
    workingDirectory: absPath("service.workingDirectory").default("/"),
    /** User the server runs as. Defaults to root. */
    runAs: z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "service.runAs must be a plain user name" }).default("root"),
    /** Extra environment of the server. */
    environment: z.record(envName, text("service.environment value")).default({}),
    /** Address SGLang listens on (--host). Defaults to 127.0.0.1. */
    listenAddress: address("service.listenAddress").default("127.0.0.1"),
    /** Port SGLang listens on (--port). Defaults to 30000. */
    port: port.default(30000),
    /** Multi-node only: port on the first node where the nodes meet (--dist-init-addr). Defaults to 5757. */
    distInitPort: port.default(5757),
  })
  .strict();

export const modelSchema = z
  .object({
    /** Model weights folder on the host (--model-path). */
    path: absPath("model.path"),
    /** Tensor-parallel size (--tp-size). Defaults to 8. */
    tpSize: z.number().int().min(1).max(64).default(8),
    /** --mem-fraction-static. Defaults to SGLang's own choice. */
    memFractionStatic: z.number().gt(0).lt(1).optional(),
    /** --context-length. */
    contextLength: z.number().int().positive().optional(),
    /** --quantization. */
    quantization: z.enum(["fp8", "awq", "gptq", "compressed-tensors", "moe_wna16", "w8a8_fp8", "modelopt_fp4"]).optional(),
    /** --trust-remote-code. Defaults to false. */
    trustRemoteCode: z.boolean().default(false),
    /** The DFlash drafter's weights folder on the host (--speculative-draft-model-path). */
    drafterPath: absPath("model.drafterPath").optional(),
    /** --served-model-name. */
    servedModelName: argWord("model.servedModelName").optional(),
    /** Further flags passed verbatim, e.g. ["--cuda-graph-max-bs", "8"]; checked against the host's --help. */
    extraArgs: z.array(text("model.extraArgs entry")).default([]),
  })
  .strict();

const WINDOW_MESSAGE = 'speculative.draftWindowSize must be a positive whole number of tokens (e.g. 2048) or "none"';

export const speculativeSchema = z
  .object({
    /** DFLASH (a drafter block per step) or DDTREE (a draft tree under a node budget); null turns speculation off. */
    algorithm: z.enum(["DFLASH", "DDTREE"]).nullable().default("DDTREE"),
    /** Draft tokens per step (DFLASH block size). Defaults to the drafter's own (16). */
    draftTokens: z.number().int().min(1).max(256).optional(),
    /** DDTree node budget. */
    budget: z.number().int().min(1).max(1024).optional(),
    /** DDTree top-k. */
    topk: z.number().int().min(1).max(64).optional(),
    /** Drafter sliding window in tokens, or "none" for the full context. Defaults to "none". */
    draftWindowSize: z.union([z.number().int({ error: WINDOW_MESSAGE }).positive({ error: WINDOW_MESSAGE }), z.literal("none")], { error: WINDOW_MESSAGE }).default("none"),
    /** Compact the drafter's windowed KV cache (DDTree fork only). Defaults to false. */
    compactCache: z.boolean().default(false),
  })
  .strict();

/** How a build spells each speculative option. A flag of null means the build lacks it. */
export const flagMapSchema = z
  .object({
    algorithm: z.literal("--speculative-algorithm").default("--speculative-algorithm"),
    drafterPath: text("flag").default("--speculative-draft-model-path"),
    draftTokens: text("flag").default("--speculative-num-draft-tokens"),
    windowSize: text("flag").nullable().default("--speculative-draft-window-size"),
    budget: text("flag").nullable().default(null),
    /** topk as a flag... */
    topkFlag: text("flag").nullable().default(null),
    /** ...or as an environment variable (the DDTree fork reads SGLANG_DDTREE_MAX_TOPK). */
    topkEnv: envName.nullable().default(null),
    compactCache: text("flag").nullable().default(null),
    /** Algorithm names the build accepts. */
    algorithms: z.array(z.string()).default(["DFLASH"]),
  })
  .strict();

export const BUILD_PRESETS = {
  upstream: flagMapSchema.parse({}),
  "ddtree-fork": flagMapSchema.parse({
    budget: "--speculative-ddtree-budget",
    topkEnv: "SGLANG_DDTREE_MAX_TOPK",
    compactCache: "--speculative-dflash-compact-cache",
    algorithms: ["DFLASH", "DDTREE"],
  }),
} as const;

export const sglangBuildSchema = z
  .union([z.enum(["upstream", "ddtree-fork"]), z.object({ flags: flagMapSchema }).strict()], {
    error: 'sglangBuild must be "upstream", "ddtree-fork", or {flags: {...}} naming each flag of your build (a flag name such as "--speculative-ddtree-budget", or null where the build lacks it; see flagMapSchema in components/sglang-service/schema.ts)',
  })
  .default("ddtree-fork");

export const timeoutsSchema = z
  .object({
    /**
     * How long SGLang may drain when stopped. SGLang treats SIGTERM as a drain: requests
     * in flight (and new ones arriving meanwhile) finish, then it exits. After this many
     * seconds (plus SGLang's 5 s check period) the server is killed, by systemd
     * (TimeoutStopSec) or by `pulumi up`, whichever comes first. Defaults to 300 s.
     */
    drainSeconds: seconds("timeouts.drainSeconds", 300),
    /**
     * When the drain hits its deadline and requests still in flight had to be cut:
     * "fail" restores the previous configuration and fails the update (the change was not
     * applied under load), "proceed" starts the new configuration anyway. Either way the
     * old server is already gone: SGLang's drain cannot be called off once it started.
     * Defaults to "fail".
     */
    drainPolicy: z.enum(["fail", "proceed"], { error: 'timeouts.drainPolicy must be "fail" or "proceed"' }).default("fail"),
    /** Longest wait for the old process to be gone once its drain has ended. Defaults to 120 s. */
    stopSeconds: seconds("timeouts.stopSeconds", 120),
    /** Longest wait for GPU memory to be released after the old process exits. Defaults to 300 s. */
    gpuReleaseSeconds: seconds("timeouts.gpuReleaseSeconds", 300),
    /** Longest wait from start to serving (weights load ~6-7 min for a 590 GB MoE). Defaults to 1800 s. */
    readySeconds: seconds("timeouts.readySeconds", 1800),
    /** GPU memory (MiB) a GPU may still show used and count as free. Defaults to 1024. */
    gpuFreeMiB: z.number().int().min(0).default(1024),
    /** Poll interval in milliseconds (one SSH command per poll, over a shared connection). Defaults to 250. */
    pollMs: z.number().int().min(50).max(60_000).default(250),
  })
  .strict();

export const safetySchema = z
  .object({
    /** Restore the last configuration that passed readiness when a new one fails. Defaults to true. */
    rollback: z.boolean().default(true),
    /** How long to wait for another deployment's lock on the same host. Defaults to 600 s. */
    lockWaitSeconds: seconds("safety.lockWaitSeconds", 600),
    /** After readiness, the new server must keep running this long to count as good. Defaults to 10 s. */
    stableSeconds: z.number().min(0).default(10),
  })
  .strict();

const deploymentShape = z
  .object({
    host: hostSchema,
    /**
     * Further nodes of a model that spans several hosts (node ranks 1..N-1; `host` is
     * node 0, the one that serves). model.tpSize is the total over all nodes.
     */
    nodes: z.array(hostSchema).default([]),
    service: serviceSchema.default(serviceSchema.parse({})),
    model: modelSchema,
    speculative: speculativeSchema.default(speculativeSchema.parse({})),
    sglangBuild: sglangBuildSchema,
    timeouts: timeoutsSchema.default(timeoutsSchema.parse({})),
    safety: safetySchema.default(safetySchema.parse({})),
    benchmark: benchmarkSchema.default(benchmarkSchema.parse({})),
  })
  .strict();

export const deploymentSchema = deploymentShape
  // Cross-field rules run even when some field is invalid, so one run lists every
  // problem; they only look at the parts that are well-formed.
  .superRefine(crossFieldRules, { when: (payload) => typeof payload.value === "object" && payload.value !== null });

type Issue = (path: (string | number)[], message: string) => void;

function crossFieldRules(c: Partial<z.output<typeof deploymentShape>>, ctx: z.RefinementCtx): void {
  const issue: Issue = (path, message) => ctx.addIssue({ code: "custom", path, message });
  if (Array.isArray(c.nodes) && c.nodes.length > 0 && typeof c.model === "object" && c.model !== null && typeof c.model.tpSize === "number" && c.model.tpSize % (c.nodes.length + 1) !== 0) {
    issue(["model", "tpSize"], `model.tpSize (${c.model.tpSize}) must be divisible by the number of nodes (${c.nodes.length + 1}: host plus nodes)`);
  }
  const build = sglangBuildSchema.safeParse(c.sglangBuild);
  const spec = speculativeSchema.safeParse(c.speculative);
  if (!build.success || !spec.success) return;
  const flags = typeof build.data === "string" ? BUILD_PRESETS[build.data] : build.data.flags;
  const buildName = typeof build.data === "string" ? `the "${build.data}" SGLang build` : "this SGLang build (sglangBuild.flags)";
  const s = spec.data;
  const model = (typeof c.model === "object" && c.model !== null ? c.model : {}) as Partial<z.output<typeof modelSchema>>;
  if (s.algorithm === null) {
    for (const key of ["budget", "topk", "draftTokens"] as const) {
      if (s[key] !== undefined) issue(["speculative", key], `speculative.${key} is set but speculative.algorithm is null: remove it or choose DFLASH/DDTREE`);
    }
    return;
  }
  if (!flags.algorithms.includes(s.algorithm)) {
    issue(["speculative", "algorithm"], `${buildName} has no ${s.algorithm} (it knows ${flags.algorithms.join(", ")}): set sglangBuild to "ddtree-fork" or a flag map for your build`);
  }
  if (typeof c.model === "object" && c.model !== null && !model.drafterPath) {
    issue(["model", "drafterPath"], `speculative.algorithm ${s.algorithm} needs model.drafterPath (the DFlash drafter's folder on the host)`);
  }
  if (s.algorithm === "DDTREE") {
    if (s.budget === undefined) issue(["speculative", "budget"], "DDTREE needs speculative.budget (the tree's node budget, e.g. 8)");
    if (s.topk === undefined) issue(["speculative", "topk"], "DDTREE needs speculative.topk (e.g. 4)");
    if (s.budget !== undefined && s.topk !== undefined && s.topk > s.budget) {
      issue(["speculative", "topk"], `speculative.topk (${s.topk}) must be <= speculative.budget (${s.budget}): lower topk or raise budget`);
    }
    if (s.budget !== undefined && flags.budget === null) issue(["speculative", "budget"], `${buildName} has no DDTree budget flag`);
    if (s.topk !== undefined && flags.topkFlag === null && flags.topkEnv === null) issue(["speculative", "topk"], `${buildName} has no way to set DDTree topk`);
  } else {
    for (const key of ["budget", "topk"] as const) {
      if (s[key] !== undefined) issue(["speculative", key], `speculative.${key} only applies to DDTREE: remove it or set speculative.algorithm to DDTREE`);
    }
  }
  const draft = s.draftTokens ?? 16;
  if (s.draftWindowSize !== "none") {
    if (s.draftWindowSize < draft) issue(["speculative", "draftWindowSize"], `speculative.draftWindowSize (${s.draftWindowSize}) must be >= the draft tokens per step (${draft}), or "none"`);
    if (flags.windowSize === null) issue(["speculative", "draftWindowSize"], `${buildName} has no draft window flag: use "none"`);
  }
  if (s.compactCache) {
    if (s.draftWindowSize === "none") issue(["speculative", "compactCache"], 'speculative.compactCache needs a draft window (speculative.draftWindowSize), not "none"');
    if (flags.compactCache === null) issue(["speculative", "compactCache"], `${buildName} has no compact cache flag: set sglangBuild to "ddtree-fork"`);
  }
  if (typeof model.contextLength === "number" && s.draftWindowSize !== "none" && s.draftWindowSize > model.contextLength) {
    issue(["speculative", "draftWindowSize"], `speculative.draftWindowSize (${s.draftWindowSize}) exceeds model.contextLength (${model.contextLength})`);
  }
}

export type DeploymentInput = z.input<typeof deploymentSchema>;
export type Deployment = z.output<typeof deploymentSchema>;
export type FlagMap = z.output<typeof flagMapSchema>;

export function flagMapOf(d: Deployment): FlagMap {
  return typeof d.sglangBuild === "string" ? BUILD_PRESETS[d.sglangBuild] : d.sglangBuild.flags;
}

export class ConfigError extends Error {}

/**
 * Validates raw config (each top-level key as read from Pulumi config) and returns the
 * resolved deployment, or throws one ConfigError listing every problem with the stack,
 * the config key and what to do.
 */
export function parseDeployment(raw: Record<string, unknown>, stack: string): Deployment {
  const present = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
  const r = deploymentSchema.safeParse(present);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => {
    const key = i.path.length ? `${CONFIG_NAMESPACE}:${i.path.map(String).join(".")}` : CONFIG_NAMESPACE;
    const missing = i.code === "invalid_type" && i.message.includes("received undefined");
    const message = missing ? `is required` : i.code === "unrecognized_keys" ? `has unknown key(s) ${i.keys.map((k) => `"${k}"`).join(", ")}` : i.message;
    return `  - ${key}: ${message}`;
  });
  return failConfig(stack, lines);
}

function failConfig(stack: string, lines: string[]): never {
  throw new ConfigError(
    `Invalid configuration for stack "${stack}" (nothing was changed on any host):\n${lines.join("\n")}\n` +
      `Fix it in stacks/Pulumi.${stack}.yaml (or the project config in Pulumi.yaml), e.g. \`npm run pulumi -- config set --path --stack ${stack} <key> <value>\`.`,
  );
}
