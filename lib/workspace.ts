// A Pulumi workspace that runs this project's program against simulated hosts: its own
// Pulumi.yaml (main: the repo), copies of the chosen stack files with the host's connection
// merged in, and its own file:// backend (<dir>/state) unless given a shared one (a team's
// postgres://...). Throwaway (a temp folder) unless a folder is given: the sweep and the demo
// keep theirs in the project (KEPT_WORKSPACES), so `--resume` and `npm run report` find their
// stacks and numbers after they end. The rest of the repo is never modified.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { EngineEvent, LocalWorkspace, PulumiCommand, Stack, SummaryEvent, UpdateSummary } from "@pulumi/pulumi/automation";
import { REPO_ROOT, pulumiCommand, pulumiEnv } from "./pulumi-env";
import { removeTornMetadata, staleLocks } from "./stale-locks";
import { lockOwnersDir, renderRecordingEngine } from "./lock-owners";
import { forgetBackend } from "../components/benchmark/history";
import { shellQuote } from "../components/sglang-service/render";
import { OVERLAY_FILE } from "../components/sglang-service/overlay";
import type { HostInfo } from "../simhost/hosts";

const NS = "dflash-sglang";

export interface SimWorkspace {
  dir: string;
  /** Environment for running the pulumi CLI directly in `dir`. */
  env: Record<string, string>;
  stack(name: string): Promise<Stack>;
  /** Replaces one config key of a stack (as a stack file edit would). */
  setStackConfig(stack: string, key: string, value: unknown): void;
  /** A stack's configuration as its stack file in the workspace holds it ({} if none). */
  stackConfig(stack: string): Record<string, unknown>;
  /** Removes a stack, its state and its stack file, leaving whatever it deployed alone (`pulumi stack rm --force`). */
  removeStack(stack: string): Promise<void>;
  cleanup(): void;
}

/** Project config of Pulumi.yaml (long `{value: ...}` or short form), keys without the namespace. */
export function projectConfig(): Record<string, unknown> {
  const doc = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")) as { config?: Record<string, unknown> };
  const out: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(doc.config ?? {})) {
    if (!key.startsWith(`${NS}:`)) throw new Error(`Pulumi.yaml config key ${key} is outside the ${NS} namespace`);
    const long = typeof entry === "object" && entry !== null && !Array.isArray(entry) && "value" in entry;
    out[key.slice(NS.length + 1)] = long ? (entry as { value: unknown }).value : entry;
  }
  return out;
}

/** Project config with a stack's config keys (namespaced, as in a stack file) replacing it. */
export function mergedConfig(stackConfig: Record<string, unknown>): Record<string, unknown> {
  const raw = projectConfig();
  for (const [k, v] of Object.entries(stackConfig)) raw[k.replace(`${NS}:`, "")] = v;
  return raw;
}

/** Config that points a stack at a simulated host. */
export function simHostConfig(host: HostInfo, unitName = "sglang-k26"): Record<string, unknown> {
  return {
    [`${NS}:host`]: { address: host.address, port: host.port, user: host.user, ...(host.become ? { become: host.become } : {}), privateKeyPath: host.privateKeyPath, hostKey: host.hostKey },
    // Hosts share the machine's port space: each server listens on its own address.
    [`${NS}:service`]: { unitName, port: host.sglangPort, listenAddress: host.address },
  };
}

/**
 * Pure: the `npx pulumi config set` lines that point stack `stack` at a simulated host: every
 * key of the host block and of the service block (Pulumi.yaml's `service` with this host's
 * port and listen address), since a stack that sets one key of a section replaces Pulumi.yaml's
 * whole section (Pulumi merges no objects). `projectConfig` is Pulumi.yaml's `config`.
 */
export function simHostConfigLines(host: HostInfo, stack: string, projectConfig: Record<string, unknown>): string[] {
  const sim = simHostConfig(host);
  const given = (projectConfig[`${NS}:service`] as { value?: Record<string, unknown> } | undefined)?.value ?? {};
  const service = { ...given, ...(sim[`${NS}:service`] as Record<string, unknown>), unitName: given.unitName ?? "sglang-k26" };
  const sections: [string, Record<string, unknown>][] = [["host", sim[`${NS}:host`] as Record<string, unknown>], ["service", service]];
  return sections.flatMap(([section, values]) =>
    Object.entries(values).map(([key, value]) => `npx pulumi config set --path --stack ${shellQuote(stack)} ${section}.${key} ${shellQuote(String(value))}`),
  );
}

/**
 * Pure: the per-operator overlay's text (components/sglang-service/overlay.ts; `current`: the
 * file as it is, or undefined) with stack `stack` pointed at a simulated host: its `host`
 * connection and the `service` port and listen address, merged over the stack's configuration.
 * Other entries, and comments, are kept.
 */
export function withSimHostOverlay(current: string | undefined, host: HostInfo, stack: string): string {
  const doc = current !== undefined && current.trim() !== "" ? YAML.parseDocument(current) : new YAML.Document({});
  if (doc.errors.length) throw new Error(`${OVERLAY_FILE} is not valid YAML: ${doc.errors[0].message.split("\n")[0]}`);
  if (current === undefined || current.trim() === "") doc.commentBefore = ` Per-operator settings (git-ignored): where this checkout's stacks run, merged key by key over\n their configuration (components/sglang-service/overlay.ts). \`npm run simhost -- stack-config\` writes it.`;
  const sim = simHostConfig(host);
  const service = sim[`${NS}:service`] as Record<string, unknown>;
  doc.setIn(["stacks", stack, "host"], doc.createNode(sim[`${NS}:host`]));
  doc.setIn(["stacks", stack, "service"], doc.createNode({ port: service.port, listenAddress: service.listenAddress }));
  return doc.toString({ lineWidth: 0 });
}

export function readRepoStackConfig(stack: string): Record<string, unknown> {
  const file = path.join(REPO_ROOT, "stacks", `Pulumi.${stack}.yaml`);
  return (YAML.parse(fs.readFileSync(file, "utf8"))?.config ?? {}) as Record<string, unknown>;
}

/**
 * The workspaces kept in the project folder (git-ignored) after their command ends: the
 * sweep's, which `--resume` reads, and the demo's, which `npm run report` reads.
 */
export const KEPT_WORKSPACES = { demo: ".demo", sweep: ".sweep" } as const;
export type KeptWorkspace = keyof typeof KEPT_WORKSPACES;

export function keptWorkspaceDir(kind: KeptWorkspace): string {
  return path.join(REPO_ROOT, KEPT_WORKSPACES[kind]);
}

/**
 * The secrets passphrase of a throwaway workspace on simulated hosts (the demo's, the tests',
 * a simulated sweep's): fixed, since what it protects is made up and gone with the hosts. A
 * workspace on real hosts or in a shared backend never uses it.
 */
export const SIMULATED_HOSTS_PASSPHRASE = "simulated-hosts";

/** The environment of the Pulumi CLI for a workspace folder: its own backend in <dir>/state, or a shared one. */
export function workspaceEnv(dir: string, root = REPO_ROOT, shared: { backendUrl?: string; passphrase?: string; realHosts?: boolean } = {}): Record<string, string> {
  const passphrase = shared.passphrase ?? (shared.backendUrl || shared.realHosts ? undefined : SIMULATED_HOSTS_PASSPHRASE);
  // The operator's overlay (dflash.local.yaml) is for their own stacks, never for a workspace's,
  // whose program runs in the project folder too: each workspace sets its hosts itself.
  return pulumiEnv({ PULUMI_BACKEND_URL: shared.backendUrl ?? `file://${path.join(dir, "state")}`, DFLASH_LOCAL_OVERLAY: "off", ...(passphrase !== undefined ? { PULUMI_CONFIG_PASSPHRASE: passphrase } : {}) }, root);
}

export interface WorkspaceOptions {
  /** Keep the workspace here (and its state in `<dir>/state`) instead of a temp folder. */
  dir?: string;
  /** Run the program (and toolchain) of this checkout of the project; this one by default. */
  projectRoot?: string;
  /**
   * Keep state in this backend (e.g. a team's `postgres://...`) instead of `<dir>/state`.
   * Its secrets then use the environment's passphrase (PULUMI_CONFIG_PASSPHRASE or
   * PULUMI_CONFIG_PASSPHRASE_FILE, as for `npx pulumi`) unless `passphrase` is given.
   */
  backendUrl?: string;
  /** The secrets passphrase; defaults to a fixed one for the workspace's own backend on simulated hosts. */
  passphrase?: string;
  /**
   * The workspace deploys to real hosts: its secrets use the environment's passphrase (or the
   * stacks' secrets provider), as `npx pulumi` would, never the fixed one of simulated hosts.
   */
  realHosts?: boolean;
  /**
   * Start every pulumi in a session of its own, so that a Ctrl-C at the terminal (or any
   * signal to the caller's process group) reaches the caller only, which then decides what
   * the engine is told: the sweep lets the updates in progress finish, or cancels them with
   * the `signal` of `up` (which sends them SIGINT). Defaults to false: pulumi shares the
   * caller's process group and gets its Ctrl-C, as a pulumi typed at the terminal would.
   */
  engineInOwnSession?: boolean;
}

/**
 * The Automation API follows every `up`, `refresh` and `destroy` with three CLI runs of its own
 * (`stack output` masked, then with secrets, then `stack history`), about 1.5 s of CPU each time:
 * a third of a no-op `up` on a 2-core machine. A stack of a workspace here gets the same results
 * from less: the summary (result and resource changes) from the engine's own summary event of
 * that operation, and the outputs from one masked `stack output`, with a second, unmasked one
 * only when an output is secret. Results are those the Automation API returns, as far as
 * `result`, `resourceChanges` and `outputs` (with their `secret` flags) go.
 */
export function leanStack(stack: Stack): Stack {
  const marked = stack as Stack & { [LEAN]?: true };
  if (marked[LEAN]) return stack;
  marked[LEAN] = true;
  let last: { summary: SummaryEvent; kind: UpdateSummary["kind"]; started: Date } | undefined;
  const fromHistory = stack.info.bind(stack);
  stack.info = async (showSecrets?: boolean) => {
    const done = last;
    last = undefined;
    if (!done) return fromHistory(showSecrets);
    const summary: UpdateSummary = { kind: done.kind, startTime: done.started, endTime: new Date(), message: "", environment: {}, config: {}, result: "succeeded", resourceChanges: done.summary.resourceChanges,
      // The update's number is in the history only; nothing of ours reads it.
      version: undefined as unknown as number };
    return summary;
  };
  for (const [op, kind] of [["up", "update"], ["refresh", "refresh"], ["destroy", "destroy"]] as const) {
    const original = (stack[op] as (o?: { onEvent?: (e: EngineEvent) => void }) => Promise<unknown>).bind(stack);
    (stack as unknown as Record<string, unknown>)[op] = (opts: { onEvent?: (e: EngineEvent) => void } = {}) => {
      const started = new Date();
      last = undefined;
      return original({
        ...opts,
        onEvent: (e: EngineEvent) => {
          if (e.summaryEvent) last = { summary: e.summaryEvent, kind, started };
          opts.onEvent?.(e);
        },
      });
    };
  }
  for (const op of ["up", "preview", "refresh", "destroy"] as const) logOperation(stack, op);
  // runPulumiCmd: the workspace's own way to run the CLI (its environment, PULUMI_HOME, folder).
  const ws = stack.workspace as unknown as { stackOutputs: LocalWorkspace["stackOutputs"]; runPulumiCmd(args: string[]): Promise<{ stdout: string }> };
  ws.stackOutputs = async (name: string) => {
    const run = async (args: string[]) => JSON.parse((await ws.runPulumiCmd(["stack", "output", "--json", ...args, "--stack", name])).stdout) as Record<string, unknown>;
    const masked = await run([]);
    const secret = new Set(Object.keys(masked).filter((k) => masked[k] === "[secret]"));
    const plain = secret.size ? await run(["--show-secrets"]) : masked;
    return Object.fromEntries(Object.entries(plain).map(([k, value]) => [k, { value, secret: secret.has(k) }]));
  };
  return stack;
}
const LEAN = Symbol("lean");

/**
 * With DFLASH_OP_LOG set to a file, each operation of a stack appends one JSON line to it: the
 * program that ran it (a test file), the operation, when it started and its seconds. A
 * measurement aid (bench/results/test-time.md counts the engine's operations per test file
 * with it); nothing reads it otherwise.
 */
function logOperation(stack: Stack, op: "up" | "preview" | "refresh" | "destroy"): void {
  const file = process.env.DFLASH_OP_LOG;
  if (!file) return;
  const original = (stack[op] as (...a: unknown[]) => Promise<unknown>).bind(stack);
  (stack as unknown as Record<string, unknown>)[op] = async (...args: unknown[]) => {
    const started = Date.now();
    let ok = false;
    try {
      const r = await original(...args);
      ok = true;
      return r;
    } finally {
      const line = { program: path.relative(REPO_ROOT, process.argv[1] ?? "?"), op, stack: stack.name, started: new Date(started).toISOString(), seconds: (Date.now() - started) / 1000, ok };
      fs.appendFileSync(file, JSON.stringify(line) + "\n");
    }
  };
}

export function simWorkspace(stacks: Record<string, Record<string, unknown>>, opts: WorkspaceOptions = {}): SimWorkspace {
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "dflash-ws-"));
  const backend = path.join(dir, "state");
  fs.mkdirSync(path.join(dir, "stacks"), { recursive: true });
  if (!opts.backendUrl) fs.mkdirSync(backend, { recursive: true });
  const root = opts.projectRoot ?? REPO_ROOT;
  const project = YAML.parse(fs.readFileSync(path.join(root, "Pulumi.yaml"), "utf8"));
  project.main = root;
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), YAML.stringify(project));
  const stackFile = (name: string) => path.join(dir, "stacks", `Pulumi.${name}.yaml`);
  // Stack files already there keep Pulumi's encryptionsalt; only their config is replaced.
  for (const [name, config] of Object.entries(stacks)) {
    const existing = fs.existsSync(stackFile(name)) ? (YAML.parse(fs.readFileSync(stackFile(name), "utf8")) ?? {}) : {};
    fs.writeFileSync(stackFile(name), YAML.stringify({ ...existing, config }));
  }
  const env = workspaceEnv(dir, root, opts);
  // A `pulumi` run from this workspace's environment (a test or benchmark that spawns the CLI
  // itself, to kill it mid-run) records itself too: the recording wrapper comes first on PATH.
  const pathBin = path.join(dir, "engine", "path");
  fs.mkdirSync(pathBin, { recursive: true });
  fs.writeFileSync(path.join(pathBin, "pulumi"), renderRecordingEngine(path.join(env.PATH.split(":")[0], "pulumi")), { mode: 0o755 });
  env.PATH = `${pathBin}:${env.PATH}`;
  // The pinned CLI behind a wrapper that leaves the owner record of each pulumi it starts
  // (lib/lock-owners.ts), so that a lock a killed one leaves can be proven stale; in a session
  // of its own with engineInOwnSession. Written anew (a rename: a running one keeps its file)
  // only when it changed.
  const engine = async (): Promise<PulumiCommand> => {
    const pinned = await pulumiCommand(root);
    const bin = path.join(dir, "engine", "bin");
    const file = path.join(bin, "pulumi");
    const script = renderRecordingEngine(pinned.command, { ownSession: !!opts.engineInOwnSession });
    let current: string | undefined;
    try {
      current = fs.readFileSync(file, "utf8");
    } catch {
      current = undefined;
    }
    if (current !== script) {
      fs.mkdirSync(bin, { recursive: true });
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, script, { mode: 0o755 });
      fs.renameSync(tmp, file);
    }
    return PulumiCommand.get({ root: path.dirname(bin), skipVersionCheck: true });
  };
  // Where that wrapper leaves its records: from the environment it runs with.
  const ownersDir = lockOwnersDir({ ...process.env, ...env });
  const selectedStacks = new Map<string, Promise<Stack>>();
  return {
    dir,
    env,
    async stack(name: string) {
      // Selected once per workspace (a CLI run of its own, about a second): every operation
      // of a Stack names its stack explicitly and reads the stack file afresh.
      // Only for a file:// backend, where a stack removed behind the cache's back (by
      // stack.workspace.removeStack) shows as its state file gone.
      const stateFile = env.PULUMI_BACKEND_URL.startsWith("file://") ? path.join(env.PULUMI_BACKEND_URL.slice("file://".length), ".pulumi", "stacks", project.name, name) : undefined;
      if (!stateFile || !(fs.existsSync(`${stateFile}.json`) || fs.existsSync(`${stateFile}.json.gz`))) selectedStacks.delete(name);
      // A killed `up` leaves the stack locked (`pulumi cancel` is Pulumi's remedy), and may
      // leave a torn metadata file that fails every read of the stack (stale-locks.ts).
      const killed = staleLocks(env.PULUMI_BACKEND_URL, project.name, { ownersDir }).stale.some((l) => l.stack === name);
      if (killed) removeTornMetadata(env.PULUMI_BACKEND_URL);
      let selected = selectedStacks.get(name);
      if (!selected) {
        selected = LocalWorkspace.createOrSelectStack({ stackName: name, workDir: dir }, { envVars: env, pulumiCommand: await engine() });
        selectedStacks.set(name, selected);
        selected.catch(() => selectedStacks.delete(name));
      }
      const stack = leanStack(await selected);
      if (killed) await stack.cancel();
      return stack;
    },
    stackConfig(name: string) {
      return ((fs.existsSync(stackFile(name)) ? YAML.parse(fs.readFileSync(stackFile(name), "utf8")) : undefined)?.config ?? {}) as Record<string, unknown>;
    },
    async removeStack(name: string) {
      const stack = await this.stack(name);
      await stack.workspace.removeStack(name, { force: true });
      selectedStacks.delete(name);
      fs.rmSync(stackFile(name), { force: true });
    },
    setStackConfig(name: string, key: string, value: unknown) {
      // Keep the rest of the file (Pulumi's encryptionsalt, secure values).
      const doc = fs.existsSync(stackFile(name)) ? (YAML.parse(fs.readFileSync(stackFile(name), "utf8")) ?? {}) : {};
      fs.writeFileSync(stackFile(name), YAML.stringify({ ...doc, config: { ...(doc.config ?? {}), [`${NS}:${key}`]: value } }));
    },
    cleanup() {
      fs.rmSync(dir, { recursive: true, force: true });
      // The benchmark results this throwaway backend's stacks kept in the project folder.
      if (!opts.backendUrl) forgetBackend(root, env.PULUMI_BACKEND_URL);
    },
  };
}
