// The one source of truth for a deployment's configuration: types (z.input for what a
// stack file may say, z.output for the resolved values), defaults, and error messages.
// Pure: no Pulumi imports, so tests and dynamic providers can use it freely.
import { z } from "zod";
import { benchmarkSchema } from "../benchmark/schema";
import { absolutePath, listOf, MAX_CONTEXT_TOKENS, must, oneOf, port, seconds, secondsOrNone, section, text, trueOrFalse, wholeNumber } from "./values";

/** Config namespace = project name in Pulumi.yaml. */
export const CONFIG_NAMESPACE = "dflash-sglang";

/**
 * A value that becomes one word of a command line (ssh's destination, a flag's value):
 * one beginning with "-" would be read as an option (e.g. `-oProxyCommand=...` for ssh).
 */
const argWord = (what: string, valid: string) => text(what, valid).refine((s) => !s.startsWith("-"), { error: `${what} must not begin with "-" (it would be read as a command-line option)` });
/** A host name or an IPv4/IPv6 address. */
const address = (what: string) =>
  argWord(what, "a host name or an IP address").refine((s) => /^[A-Za-z0-9._:%[\]-]+$/.test(s), {
    error: `${what} must be a host name or an IP address (letters, digits, '.', '-', ':', '[', ']', '%')`,
  });
/** The spelling of a speculative option in an SGLang build: a flag, or null where the build lacks it. */
const flagName = (what: string) => text(what, 'a flag name such as "--speculative-ddtree-budget", or null where the build lacks it');

/** The most GPUs a model may span (model.tpSize): 64, eight 8-GPU hosts and more. */
export const MAX_TP_SIZE = 64;
/**
 * The most nodes of a group besides `host`: 63, since model.tpSize is at most 64 and a node
 * runs at least one GPU's rank (a group's restart waits for each, safety.lockWaitSeconds).
 */
export const MAX_FURTHER_NODES = MAX_TP_SIZE - 1;
/** The most replicas of a fleet, host included: 64 (512 GPUs of 8-GPU hosts behind one HAProxy). */
export const MAX_FLEET_REPLICAS = 64;

/** A host, as `host` or as an entry of `nodes` (`key` names it in messages: "host", "nodes[N]"). */
function hostSchemaAt(key: string) {
  return section(key, {
    /** Address of the GPU host. */
    address: address(`${key}.address`).refine((a) => !/\.invalid$/i.test(a), {
      error: `${key}.address is still the documented placeholder: set it to your GPU host (\`npx pulumi config set --path ${key}.address <addr>\`)`,
    }),
    /** SSH port. Defaults to 22. */
    port: port(`${key}.port`).default(22),
    /**
     * SSH user. Defaults to root: the host steps (systemctl, unit files, the secret files) run
     * as root, so any other user needs `become: sudo`.
     */
    user: z
      .string(must(`${key}.user`, 'a plain user name (letters, digits, "_", "." and "-", not beginning with "-")'))
      .regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/)
      .default("root"),
    /**
     * "sudo": log in as `user` (any user; for hosts where root may not log in over SSH) and
     * run every host step as root through `sudo -n` (never with a password): `user` needs the
     * sudoers line of README, "Hosts where root cannot log in". Defaults to none: `user` is root.
     */
    become: oneOf(`${key}.become`, ["sudo"], " (run the host steps as root through sudo -n), or left out when the user is root").optional(),
    /** Private key file on the machine running Pulumi; or set the secret `sshPrivateKey` instead. */
    privateKeyPath: absolutePath(`${key}.privateKeyPath`).optional(),
    /**
     * The host's SSH public key ("ssh-ed25519 AAAA..."), pinned: every connection
     * verifies it before running anything. Required.
     */
    hostKey: text(`${key}.hostKey`, 'an SSH public key line such as "ssh-ed25519 AAAA..."').refine((s) => /^(ssh-ed25519|ecdsa-sha2-nistp\d+|ssh-rsa) [A-Za-z0-9+/=]+( .*)?$/.test(s), {
      error: `${key}.hostKey must be an SSH public key line such as "ssh-ed25519 AAAA..." (see \`ssh-keyscan -t ed25519 HOST\`)`,
    }),
  });
}

export const hostSchema = hostSchemaAt("host");

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const serviceSchema = section("service", {
  /** systemd unit name, without ".service". Defaults to "sglang". */
  unitName: z
    .string(must("service.unitName", "a unit name of letters, digits, '_', '.', '@' and '-' (without .service)"))
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.@-]{0,200}$/)
    .default("sglang"),
  /** Python interpreter that has SGLang installed. Defaults to /usr/bin/python3. */
  python: absolutePath("service.python").default("/usr/bin/python3"),
  /** Working directory of the server. Defaults to /. */
  workingDirectory: absolutePath("service.workingDirectory").default("/"),
  /** User the server runs as. Defaults to root. */
  runAs: z.string(must("service.runAs", 'a plain user name (lower-case letters, digits, "_" and "-")')).regex(/^[a-z_][a-z0-9_-]{0,31}$/).default("root"),
  /** Extra environment of the server. */
  environment: z
    .record(z.string().regex(ENV_NAME), text("service.environment value"), must("service.environment", "a mapping of variable names ([A-Za-z_][A-Za-z0-9_]*) to text"))
    .default({}),
  /** Address SGLang listens on (--host). Defaults to 127.0.0.1. */
  listenAddress: address("service.listenAddress").default("127.0.0.1"),
  /** Port SGLang listens on (--port). Defaults to 30000. */
  port: port("service.port").default(30000),
  /** Multi-node only: port on the first node where the nodes meet (--dist-init-addr). Defaults to 5757. */
  distInitPort: port("service.distInitPort").default(5757),
});

const QUANTIZATIONS = ["fp8", "awq", "gptq", "compressed-tensors", "moe_wna16", "w8a8_fp8", "modelopt_fp4"] as const;

export const modelSchema = section("model", {
  /** Model weights folder on the host (--model-path). */
  path: absolutePath("model.path"),
  /** Tensor-parallel size (--tp-size), at most MAX_TP_SIZE (64). Defaults to 8. */
  tpSize: wholeNumber("model.tpSize", 1, MAX_TP_SIZE).default(8),
  /** --mem-fraction-static. Defaults to SGLang's own choice. */
  memFractionStatic: z.number(must("model.memFractionStatic", "a number between 0 and 1, both excluded (e.g. 0.85)")).gt(0).lt(1).optional(),
  /** --context-length. At most MAX_CONTEXT_TOKENS (10,000,000: the longest window of an open model; SGLang sizes buffers by it). */
  contextLength: wholeNumber("model.contextLength", 1, MAX_CONTEXT_TOKENS).optional(),
  /** --quantization. */
  quantization: oneOf("model.quantization", QUANTIZATIONS).optional(),
  /** --trust-remote-code. Defaults to false. */
  trustRemoteCode: trueOrFalse("model.trustRemoteCode").default(false),
  /** The DFlash drafter's weights folder on the host (--speculative-draft-model-path). */
  drafterPath: absolutePath("model.drafterPath").optional(),
  /** --served-model-name. */
  servedModelName: argWord("model.servedModelName", "a model name").optional(),
  /** Further flags passed verbatim, e.g. ["--cuda-graph-max-bs", "8"]; checked against the host's --help. */
  extraArgs: listOf("model.extraArgs", text("model.extraArgs entry"), 'command-line words, e.g. ["--cuda-graph-max-bs", "8"]').default([]),
});

const WINDOW_MESSAGE = `speculative.draftWindowSize must be a whole number of tokens from 1 to ${MAX_CONTEXT_TOKENS} (e.g. 2048) or "none"`;

export const speculativeSchema = section("speculative", {
  /** DFLASH (a drafter block per step) or DDTREE (a draft tree under a node budget); null turns speculation off. */
  algorithm: oneOf("speculative.algorithm", ["DFLASH", "DDTREE"], ", or null (no speculative decoding)").nullable().default("DDTREE"),
  /** Draft tokens per step (DFLASH block size). Defaults to the drafter's own (16). */
  draftTokens: wholeNumber("speculative.draftTokens", 1, 256).optional(),
  /** DDTree node budget. */
  budget: wholeNumber("speculative.budget", 1, 1024).optional(),
  /** DDTree top-k. */
  topk: wholeNumber("speculative.topk", 1, 64).optional(),
  /**
   * Drafter sliding window in tokens, or "none" for the full context. At most
   * MAX_CONTEXT_TOKENS (10,000,000), the longest context: a wider window is the full context.
   * Defaults to "none".
   */
  draftWindowSize: z
    .union([z.number({ error: WINDOW_MESSAGE }).int().positive().max(MAX_CONTEXT_TOKENS), z.literal("none", { error: WINDOW_MESSAGE })], { error: WINDOW_MESSAGE })
    .default("none"),
  /** Compact the drafter's windowed KV cache (DDTree fork only). Defaults to false. */
  compactCache: trueOrFalse("speculative.compactCache").default(false),
});

/** How a build spells each speculative option. A flag of null means the build lacks it. */
export const flagMapSchema = section("sglangBuild.flags", {
  algorithm: z.literal("--speculative-algorithm", must("sglangBuild.flags.algorithm", '"--speculative-algorithm" (every build spells it so)')).default("--speculative-algorithm"),
  drafterPath: text("sglangBuild.flags.drafterPath", 'a flag name such as "--speculative-draft-model-path"').default("--speculative-draft-model-path"),
  draftTokens: text("sglangBuild.flags.draftTokens", 'a flag name such as "--speculative-num-draft-tokens"').default("--speculative-num-draft-tokens"),
  windowSize: flagName("sglangBuild.flags.windowSize").nullable().default("--speculative-draft-window-size"),
  budget: flagName("sglangBuild.flags.budget").nullable().default(null),
  /** topk as a flag... */
  topkFlag: flagName("sglangBuild.flags.topkFlag").nullable().default(null),
  /** ...or as an environment variable (the DDTree fork reads SGLANG_DDTREE_MAX_TOPK). */
  topkEnv: z
    .string(must("sglangBuild.flags.topkEnv", "an environment variable name ([A-Za-z_][A-Za-z0-9_]*), or null where the build has none"))
    .regex(ENV_NAME)
    .nullable()
    .default(null),
  compactCache: flagName("sglangBuild.flags.compactCache").nullable().default(null),
  /** Algorithm names the build accepts. */
  algorithms: listOf("sglangBuild.flags.algorithms", text("sglangBuild.flags.algorithms entry", "an algorithm name"), 'algorithm names, e.g. ["DFLASH", "DDTREE"]').default(["DFLASH"]),
});

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
  .union([z.enum(["upstream", "ddtree-fork"]), section("sglangBuild", { flags: flagMapSchema })], {
    error: 'sglangBuild must be "upstream", "ddtree-fork", or {flags: {...}} naming each flag of your build (a flag name such as "--speculative-ddtree-budget", or null where the build lacks it; see flagMapSchema in components/sglang-service/schema.ts)',
  })
  .default("ddtree-fork");

export const timeoutsSchema = section("timeouts", {
  /**
   * How long SGLang may drain when stopped. SGLang treats SIGTERM as a drain: requests
   * in flight (and new ones arriving meanwhile) finish, then it exits. After this many
   * seconds (plus SGLang's 5 s check period) the server is killed, by systemd
   * (TimeoutStopSec) or by `pulumi up`, whichever comes first. At most 3600 (1 h): the
   * longest reasoning stream in flight (32k tokens at ~10 tok/s under load) ends within it, and
   * a restart's bounds add it twice (transactionBoundSeconds). Defaults to 300 s.
   */
  drainSeconds: seconds("timeouts.drainSeconds", 3600).default(300),
  /**
   * When the drain hits its deadline and requests still in flight had to be cut:
   * "fail" restores the previous configuration and fails the update (the change was not
   * applied under load), "proceed" starts the new configuration anyway. Either way the
   * old server is already gone: SGLang's drain cannot be called off once it started.
   * Defaults to "fail".
   */
  drainPolicy: oneOf("timeouts.drainPolicy", ["fail", "proceed"]).default("fail"),
  /**
   * Longest wait for the old process to be gone once its drain has ended. At most 600 (10 min):
   * its processes end in seconds, tearing down NCCL and a 590 GB model's pinned memory in a
   * minute or two. Defaults to 120 s.
   */
  stopSeconds: seconds("timeouts.stopSeconds", 600).default(120),
  /**
   * Longest wait for GPU memory to be released after the old process exits. At most 1800
   * (30 min): the driver frees it in seconds; minutes where it cleans up after a crash.
   * Defaults to 300 s.
   */
  gpuReleaseSeconds: seconds("timeouts.gpuReleaseSeconds", 1800).default(300),
  /**
   * Longest wait from start to serving (weights load ~6-7 min for a 590 GB MoE from local NVMe,
   * 30-60 min from network storage, then CUDA graphs). At most 7200 (2 h). Defaults to 1800 s.
   */
  readySeconds: seconds("timeouts.readySeconds", 7200).default(1800),
  /**
   * Longest a single host command may take: \`nvidia-smi\`, \`systemctl\`, \`journalctl\`,
   * \`systemd-analyze\` (each answers in well under a second on a healthy host). A command past
   * it is killed and its answer counts as unknown: a GPU reading as busy, a unit as still
   * running, so a wedged driver or systemd fails the step, naming the command, rather than
   * holding \`up\` forever. At most 120 (2 min): a loaded host's nvidia-smi takes seconds, and a
   * restart's bound allows 60 such commands (transactionBoundSeconds), so 2 h at the ceiling.
   * Defaults to 30 s.
   */
  commandSeconds: seconds("timeouts.commandSeconds", 120).default(30),
  /**
   * Longest preflight's \`python -m sglang.launch_server --help\` may take (it imports torch
   * and SGLang: seconds to tens of seconds on a GPU host). At most 1800 (30 min: a cold import
   * from network storage that compiles its kernels). Defaults to 180 s.
   */
  helpSeconds: seconds("timeouts.helpSeconds", 1800).default(180),
  /**
   * A group (\`nodes:\`) only: how long \`up\` waits for a node that dropped out during the
   * group's restart (a reboot, a power cut: its session ended after the group's go) to answer
   * over SSH again. Other nodes may already run the new rank, so the group is split until then;
   * once the node answers, the group is restarted as one or rolled back. Past it, \`up\` fails
   * naming the node, and the next \`up\` does the same. At most 3600 (1 h: a GPU server's boot,
   * memory training and GPU fabric included, takes 10-20 min; a power cycle through its BMC
   * longer). Defaults to 900 s (a GPU server's boot).
   */
  rebootSeconds: seconds("timeouts.rebootSeconds", 3600).default(900),
  /**
   * GPU memory (MiB) a GPU may still show used and count as free. At most 524288 (512 GiB):
   * above any GPU's memory (the largest have 288 GB), where every GPU would count as free.
   * Defaults to 1024.
   */
  gpuFreeMiB: wholeNumber("timeouts.gpuFreeMiB", 0, 524288, "512 GiB").default(1024),
  /** Poll interval in milliseconds (one SSH command per poll, over a shared connection), 50 to 60000 (1 min). Defaults to 250. */
  pollMs: wholeNumber("timeouts.pollMs", 50, 60_000).default(250),
});

export const safetySchema = section("safety", {
  /** Restore the last configuration that passed readiness when a new one fails. Defaults to true. */
  rollback: trueOrFalse("safety.rollback").default(true),
  /**
   * How long to wait for another deployment's lock on the same host. At most 14400 (4 h): the
   * longest the holder may keep it, a benchmark (benchmark.timeoutSeconds, at most 4 h) or a
   * restart at the slowest timeouts. Defaults to 600 s.
   */
  lockWaitSeconds: seconds("safety.lockWaitSeconds", 14400).default(600),
  /**
   * After readiness, the new server must keep running this long to count as good. At most
   * 3600 (1 h): a crash after load shows within minutes. Defaults to 10 s.
   */
  stableSeconds: secondsOrNone("safety.stableSeconds", 3600).default(10),
  /**
   * How many of the newest generations (configurations installed on a host, each kept whole:
   * unit, helpers, secret files, port, stack) a host keeps; the known-good one and the one
   * installed are kept besides. Defaults to 3.
   */
  keepGenerations: wholeNumber("safety.keepGenerations", 1, 100).default(3),
});

/**
 * Several replicas of this configuration behind one HAProxy (components/fleet): `host` (with
 * `nodes`, none for now) is replica 1, `replicas` the further ones. `up` rolls a new
 * configuration through them one at a time (maxUnavailable), never below minHealthy serving.
 */
export const fleetSchema = section("fleet", {
  /**
   * The further replicas (replica 2, 3, ...), each a host with the keys of `host`. At most
   * MAX_FLEET_REPLICAS - 1 (63; 64 replicas, 512 GPUs of 8-GPU hosts): a replica's leave asks
   * a generation of every other one, each bounded by timeouts.commandSeconds (fleet.ts stepBounds).
   */
  replicas: listOf("fleet.replicas", hostSchemaAt("fleet.replicas[N]"), "hosts, each with the keys of host (host itself is replica 1)", MAX_FLEET_REPLICAS - 1).min(1, {
    error: "fleet.replicas must list at least one further replica (host is replica 1); without any, leave fleet out",
  }),
  /**
   * The fewest replicas that must serve (as HAProxy sees them, and each answering a
   * generation) before one may leave the balancer; at most the replicas (MAX_FLEET_REPLICAS,
   * 64), and fleetRules bounds it by the fleet's own. Defaults to all replicas but maxUnavailable.
   */
  minHealthy: wholeNumber("fleet.minHealthy", 0, MAX_FLEET_REPLICAS).optional(),
  /** How many replicas may be out of the balancer at once, at most the replicas (MAX_FLEET_REPLICAS, 64). Defaults to 1. */
  maxUnavailable: wholeNumber("fleet.maxUnavailable", 1, MAX_FLEET_REPLICAS).default(1),
  /**
   * What happens to a leaving replica's open requests. "cut": once HAProxy sends it nothing,
   * they finish in the server's own drain, which gets timeouts.drainSeconds; what is still open
   * then is cut (as a Kubernetes pod's grace period does), the new configuration starts
   * (timeouts.drainPolicy "proceed"), and `up` counts them in each replica's
   * timings.requestsCut. "halt": the leave waits up to timeouts.drainSeconds for HAProxy to
   * hold none; past it the replica goes back as it was and the rollout stops there, every
   * replica on a known configuration (those before it on the new one, it and those after on
   * theirs), nothing cut; its server's drain restores the old configuration if it still had to
   * cut a request HAProxy did not send ("fail"). A fleet sets no timeouts.drainPolicy.
   * Defaults to "cut": a stream longer than the bound does not stop the fleet.
   */
  drainPolicy: oneOf("fleet.drainPolicy", ["cut", "halt"]).default("cut"),
  loadBalancer: section("fleet.loadBalancer", {
    /** The host HAProxy (2.6 or later, with socat) runs on: the program writes its configuration and drives its runtime API. */
    host: hostSchemaAt("fleet.loadBalancer.host"),
    /** Address clients reach the fleet on (HAProxy's bind). Defaults to the balancer host's address. */
    listenAddress: address("fleet.loadBalancer.listenAddress").optional(),
    /** Port clients reach the fleet on. Defaults to 8080. */
    port: port("fleet.loadBalancer.port").default(8080),
    /**
     * Seconds between HAProxy's health checks of a replica (each a one-token generation, GET
     * /health_generate). At most 60 (1 min): a replica that fails stays in the balancer for two
     * checks (fall 2), and a rejoin passes after two (rise 2). Defaults to 2.
     */
    checkSeconds: seconds("fleet.loadBalancer.checkSeconds", 60).default(2),
    /**
     * Longest a request may wait for a byte from its replica (HAProxy's timeout server; a
     * non-streaming generation sends nothing until done). At most 7200 (2 h: a 128k-token answer
     * at ~20 tok/s). Defaults to 600 s.
     */
    requestSeconds: seconds("fleet.loadBalancer.requestSeconds", 7200).default(600),
    /**
     * Longest wait, after a replica rejoins, for its health check to pass before `up` fails
     * naming it. At most 1800 (30 min): the replica already served a generation (readiness);
     * two checks (rise 2) at the slowest checkSeconds take 2 min. Defaults to 120 s.
     */
    joinSeconds: seconds("fleet.loadBalancer.joinSeconds", 1800).default(120),
    /**
     * Seconds over which a replica that (re)joins the balancer ramps from a small share of the
     * requests to its full share (HAProxy's slowstart): its prefix cache is empty after a
     * restart. 0 turns it off. At most 600 (10 min). Defaults to 30 s.
     */
    slowstartSeconds: secondsOrNone("fleet.loadBalancer.slowstartSeconds", 600).default(30),
    /**
     * A replica an operator took out by hand (`set server ... state maint` or `drain` on this
     * stack's HAProxy runtime API): "keep" leaves it out across `up` (it is still rolled, out of
     * the balancer, and preview names it); "clear" puts it back once rolled, as any replica.
     * Defaults to "keep".
     */
    operatorStates: oneOf("fleet.loadBalancer.operatorStates", ["keep", "clear"]).default("keep"),
    /**
     * The port, on each replica's address, of HAProxy's agent check (components/fleet/host/agent.sh,
     * a systemd socket on the replica): every checkSeconds it asks the replica's server for a
     * four-token chat completion and takes the replica out while the answer it gets is not text
     * (garbage, empty, a server error), which SGLang's /health_generate does not judge; no answer
     * in time is not judged. Must be free on every replica, not service.port, and reachable from
     * the balancer host only (it answers whoever connects). Defaults to service.port + 1 (agentPortOf).
     */
    agentPort: port("fleet.loadBalancer.agentPort").optional(),
  }),
});

const deploymentShape = z
  .object({
    host: hostSchema,
    /**
     * Further nodes of a model that spans several hosts (node ranks 1..N-1; `host` is
     * node 0, the one that serves). model.tpSize is the total over all nodes. At most
     * MAX_FURTHER_NODES (63): one GPU per node of the largest model.tpSize.
     */
    nodes: listOf("nodes", hostSchemaAt("nodes[N]"), "hosts, each with the keys of host", MAX_FURTHER_NODES).default([]),
    service: serviceSchema.default(serviceSchema.parse({})),
    model: modelSchema,
    speculative: speculativeSchema.default(speculativeSchema.parse({})),
    sglangBuild: sglangBuildSchema,
    timeouts: timeoutsSchema.default(timeoutsSchema.parse({})),
    safety: safetySchema.default(safetySchema.parse({})),
    benchmark: benchmarkSchema.default(benchmarkSchema.parse({})),
    fleet: fleetSchema.optional(),
  })
  .strict();

export const deploymentSchema = deploymentShape
  // Cross-field rules run even when some field is invalid, so one run lists every
  // problem; they only look at the parts that are well-formed.
  .superRefine(crossFieldRules, { when: (payload) => typeof payload.value === "object" && payload.value !== null });

type Issue = (path: (string | number)[], message: string) => void;

/** SGLang flags whose value is a secret, and the setting that carries it safely (or none yet). */
const SECRET_FLAGS: Record<string, string | null> = { "--api-key": "apiKey", "--admin-api-key": null, "--ssl-keyfile-password": null };
/** Environment names that hold a secret by convention; HF_TOKEN has its own setting. */
const SECRET_ENV = /(^|_)(TOKEN|API_KEY|SECRET|PASSWORD|ACCESS_KEY)$/;

/**
 * A secret written as a plain setting would sit in the unit file (readable on the host), in
 * `preview` output, in the stack file and in state in clear: refused, naming the secret
 * setting to use instead (secrets reach the host only through the restart's stdin, into 0600
 * files).
 */
function plainSecrets(c: Partial<z.output<typeof deploymentShape>>, issue: Issue): void {
  const model = typeof c.model === "object" && c.model !== null ? c.model : undefined;
  (Array.isArray(model?.extraArgs) ? model.extraArgs : []).forEach((word, i) => {
    if (typeof word !== "string") return;
    const flag = Object.keys(SECRET_FLAGS).find((f) => word === f || word.startsWith(`${f}=`));
    if (!flag) return;
    const instead = SECRET_FLAGS[flag];
    issue(
      ["model", "extraArgs", i],
      `model.extraArgs must not carry ${flag}: its value would be in the unit file, the stack file and state in clear. ` +
        (instead ? `Set the secret ${instead} instead (npx pulumi config set --secret ${instead} ...)` : `This tool has no secret setting for it yet; leave it out`),
    );
  });
  const service = typeof c.service === "object" && c.service !== null ? c.service : undefined;
  for (const name of Object.keys(service?.environment ?? {})) {
    if (!SECRET_ENV.test(name)) continue;
    issue(
      ["service", "environment", name],
      `service.environment.${name} looks like a secret: it would be in the unit file, the stack file and state in clear. ` +
        (name === "HF_TOKEN" || name === "HUGGING_FACE_HUB_TOKEN" ? "Set the secret hfToken instead (npx pulumi config set --secret hfToken ...)" : "This tool passes only hfToken and apiKey as secrets; leave it out"),
    );
  }
}

/** Python logging's levels above INFO, by the names SGLang's --log-level takes (it upper-cases them). */
const QUIET_LOG_LEVELS = ["WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"];

/**
 * A --log-level above info in model.extraArgs is refused: the lines the tool reads are SGLang's
 * INFO lines (srt/managers/tokenizer_manager.py, the drain's "Remaining number of requests N";
 * srt/entrypoints/http_server.py, "The server is fired up and ready to roll!"). Without them a
 * drained server would count as cutting an unknown number of requests (drainPolicy "fail" then
 * rolls back for nothing), and a failure's phase could not be read from the journal.
 */
function quietLogs(c: Partial<z.output<typeof deploymentShape>>, issue: Issue): void {
  const model = typeof c.model === "object" && c.model !== null ? c.model : undefined;
  const words = Array.isArray(model?.extraArgs) ? model.extraArgs : [];
  words.forEach((word, i) => {
    if (typeof word !== "string") return;
    const level = word.startsWith("--log-level=") ? word.slice("--log-level=".length) : word === "--log-level" && typeof words[i + 1] === "string" ? (words[i + 1] as string) : undefined;
    if (level === undefined || !QUIET_LOG_LEVELS.includes(level.toUpperCase())) return;
    issue(
      ["model", "extraArgs", i],
      `model.extraArgs sets --log-level ${level}, which hides SGLang's INFO lines this tool reads: the drain's "Remaining number of requests N" (a drained server would count as cutting an unknown number of requests, and drainPolicy "fail" would roll back for nothing) and "The server is fired up and ready to roll!". ` +
        "Leave --log-level out (info) or set info or debug; for fewer access-log lines use --log-level-http warning",
    );
  });
}

/**
 * Pure: the GPUs (nvidia-smi indices) a CUDA_VISIBLE_DEVICES value names, or a reason it names
 * none this tool can wait for. Only distinct indices: CUDA also takes GPU UUIDs and MIG names,
 * which the GPU waits cannot match against nvidia-smi's memory query.
 */
export function visibleDeviceIndices(value: string): number[] | string {
  const parts = value.split(",").map((p) => p.trim());
  if (parts.some((p) => !/^[0-9]+$/.test(p))) return "a comma list of GPU indices as nvidia-smi numbers them (e.g. \"4,5,6,7\"); GPU UUIDs and MIG names are not supported";
  const indices = parts.map(Number);
  if (new Set(indices).size !== indices.length) return "each GPU index once";
  return indices;
}

/**
 * GPU selection: the server sees the GPUs service.environment.CUDA_VISIBLE_DEVICES lists, in
 * that order, and uses the first (GPUs per node) of them; the GPU waits, the unit's
 * ExecStartPre and preflight watch those. Listing fewer than it needs is an error here.
 */
function gpuSelection(c: Partial<z.output<typeof deploymentShape>>, issue: Issue): void {
  const service = typeof c.service === "object" && c.service !== null ? c.service : undefined;
  const value = service?.environment?.CUDA_VISIBLE_DEVICES;
  if (typeof value !== "string") return;
  const indices = visibleDeviceIndices(value);
  const path = ["service", "environment", "CUDA_VISIBLE_DEVICES"];
  if (typeof indices === "string") return issue(path, `service.environment.CUDA_VISIBLE_DEVICES is ${JSON.stringify(value)}; it must be ${indices}`);
  const model = typeof c.model === "object" && c.model !== null ? c.model : undefined;
  const nodes = Array.isArray(c.nodes) ? c.nodes.length + 1 : 1;
  if (typeof model?.tpSize === "number" && model.tpSize % nodes === 0 && indices.length < model.tpSize / nodes) {
    issue(path, `service.environment.CUDA_VISIBLE_DEVICES lists ${indices.length} GPU(s) (${value}) but each node needs ${model.tpSize / nodes} (model.tpSize ${model.tpSize} over ${nodes} node(s)); list at least that many`);
  }
}

/** A fleet's replicas are single hosts, distinct from each other and from the balancer; its minHealthy must leave room to roll. */
function fleetRules(c: Partial<z.output<typeof deploymentShape>>, issue: Issue): void {
  const fleet = fleetSchema.safeParse(c.fleet);
  if (c.fleet === undefined || !fleet.success) return;
  const f = fleet.data;
  if (Array.isArray(c.nodes) && c.nodes.length > 0) issue(["fleet"], "fleet: a fleet's replicas are single hosts for now; a stack with nodes (a group) cannot have a fleet: remove nodes or fleet");
  const host = hostSchema.safeParse(c.host);
  const replicas = [...(host.success ? [host.data] : []), ...f.replicas];
  const total = f.replicas.length + 1;
  const seen = new Map<string, string>();
  replicas.forEach((r, i) => {
    const where = `${r.address}:${r.port}`;
    const key = i === 0 && host.success ? "host" : `fleet.replicas[${host.success ? i - 1 : i}]`;
    if (seen.has(where)) issue(key === "host" ? ["host"] : ["fleet", "replicas", host.success ? i - 1 : i], `${key} (${where}) is the same host as ${seen.get(where)}: each replica is its own host`);
    else seen.set(where, key);
  });
  const lb = `${f.loadBalancer.host.address}:${f.loadBalancer.host.port}`;
  if (seen.has(lb)) issue(["fleet", "loadBalancer", "host"], `fleet.loadBalancer.host (${lb}) is ${seen.get(lb)}: HAProxy runs on a host of its own, not on a replica`);
  const service = typeof c.service === "object" && c.service !== null ? (c.service as { port?: unknown }).port : undefined;
  if (f.loadBalancer.agentPort !== undefined && f.loadBalancer.agentPort === service) {
    issue(["fleet", "loadBalancer", "agentPort"], `fleet.loadBalancer.agentPort (${f.loadBalancer.agentPort}) is service.port, where each replica's server listens: choose another free port for HAProxy's agent check (or leave it out: service.port + 1)`);
  }
  if (f.maxUnavailable > total) issue(["fleet", "maxUnavailable"], `fleet.maxUnavailable (${f.maxUnavailable}) is more than the fleet's ${total} replicas`);
  if (f.minHealthy !== undefined && f.minHealthy > total - f.maxUnavailable) {
    issue(["fleet", "minHealthy"], `fleet.minHealthy (${f.minHealthy}) leaves no replica free to roll: with ${total} replicas and maxUnavailable ${f.maxUnavailable} it can be at most ${total - f.maxUnavailable}`);
  }
}

function crossFieldRules(c: Partial<z.output<typeof deploymentShape>>, ctx: z.RefinementCtx): void {
  const issue: Issue = (path, message) => ctx.addIssue({ code: "custom", path, message });
  plainSecrets(c, issue);
  quietLogs(c, issue);
  gpuSelection(c, issue);
  fleetRules(c, issue);
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
export type Fleet = z.output<typeof fleetSchema>;

/** The fleet's minHealthy, its default resolved: all replicas but maxUnavailable. */
/** The port of HAProxy's agent check on each replica: fleet.loadBalancer.agentPort, else service.port + 1 (service.port 65535: 65534). */
export function agentPortOf(d: Deployment): number {
  return d.fleet?.loadBalancer.agentPort ?? (d.service.port < 65535 ? d.service.port + 1 : d.service.port - 1);
}

export function minHealthyOf(f: Fleet): number {
  return f.minHealthy ?? f.replicas.length + 1 - f.maxUnavailable;
}

export function flagMapOf(d: Deployment): FlagMap {
  return typeof d.sglangBuild === "string" ? BUILD_PRESETS[d.sglangBuild] : d.sglangBuild.flags;
}

export class ConfigError extends Error {}

/**
 * Validates raw config (each top-level key as read from Pulumi config) and returns the
 * resolved deployment, or throws one ConfigError listing every problem with the stack,
 * the config key and what to do.
 */
export function parseDeployment(raw: Record<string, unknown>, stack: string, project: Record<string, unknown> = {}): Deployment {
  const present = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
  // reportInput: an issue of a key that is absent has `input: undefined`.
  const r = deploymentSchema.safeParse(present, { reportInput: true });
  const given = fleetGivenIssues(present);
  if (r.success && given.length === 0) return r.data;
  const lines = (r.success ? [] : r.error.issues.flatMap((i) => explained(i, []))).map(({ path, message, input }) => {
    const key = path.length ? `${CONFIG_NAMESPACE}:${path.map(String).join(".")}` : CONFIG_NAMESPACE;
    return `  - ${key}: ${input === undefined ? `is required${replacedObjectNote(path, project, stack)}` : message}`;
  });
  return failConfig(stack, [...lines, ...given.map(({ key, message }) => `  - ${CONFIG_NAMESPACE}:${key}: ${message}`)]);
}

/**
 * Pure: keys a fleet's stack may not set at all (a default would be the same value, so only
 * the raw configuration tells): a replica's server drain follows fleet.drainPolicy.
 */
function fleetGivenIssues(raw: Record<string, unknown>): { key: string; message: string }[] {
  const timeouts = raw.timeouts;
  if (raw.fleet === undefined || typeof timeouts !== "object" || timeouts === null || (timeouts as Record<string, unknown>).drainPolicy === undefined) return [];
  return [{ key: "timeouts.drainPolicy", message: 'a fleet\'s replicas follow fleet.drainPolicy ("cut" or "halt"), which decides their server drain too: remove timeouts.drainPolicy from this stack and set fleet.drainPolicy instead' }];
}

/**
 * Pure: why a key Pulumi.yaml sets is missing: the stack file sets the section itself, and a
 * stack's value of a key replaces the project's whole (Pulumi merges no objects). `project` is
 * Pulumi.yaml's config of our namespace, keys without it; "" where that does not explain it.
 */
export function replacedObjectNote(path: PropertyKey[], project: Record<string, unknown>, stack: string): string {
  if (path.length !== 2) return "";
  const [section, key] = path.map(String);
  const given = project[section];
  if (typeof given !== "object" || given === null || Array.isArray(given) || (given as Record<string, unknown>)[key] === undefined) return "";
  return ` (Pulumi.yaml sets ${section}.${key}, but stacks/Pulumi.${stack}.yaml sets ${CONFIG_NAMESPACE}:${section} itself, which replaces Pulumi.yaml's whole ${section}: Pulumi merges no objects. Set it in the stack too: \`npx pulumi config set --path --stack ${stack} ${section}.${key} <value>\`)`;
}

interface Explained {
  path: PropertyKey[];
  message: string;
  input: unknown;
}

/**
 * A union's issue names the whole union ("sglangBuild must be ..."). When the value has
 * the form of exactly one of its alternatives (a mapping for {flags: ...}) and fails
 * inside it, that alternative's own issues are more precise ("sglangBuild.flags.budget
 * must be a flag name ..."), so they are reported instead.
 */
function explained(issue: z.core.$ZodIssue, prefix: PropertyKey[]): Explained[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === "invalid_union") {
    const wrongForm = (i: z.core.$ZodIssue) => i.path.length === 0 && (i.code === "invalid_type" || i.code === "invalid_value");
    const fitting = issue.errors.filter((alternative) => !alternative.every(wrongForm));
    if (fitting.length === 1) return fitting[0].flatMap((i) => explained(i, path));
  }
  return [{ path, message: issue.message, input: issue.input }];
}

/** Throws the one ConfigError of a stack: its problem lines ("  - dflash-sglang:<key>: ..."), and how to fix them. */
export function failConfig(stack: string, lines: string[]): never {
  throw new ConfigError(
    `Invalid configuration for stack "${stack}" (nothing was changed on any host):\n${lines.join("\n")}\n` +
      `Fix it in stacks/Pulumi.${stack}.yaml (or the project config in Pulumi.yaml), e.g. \`npx pulumi config set --path --stack ${stack} <key> <value>\`.`,
  );
}
