// The fault campaign's runner: one sequence of steps (bench/campaign/plan.ts) on a fresh
// simulated host (or a two-node group), through the real engine, with the invariants checked
// after every step (and a settle period, for what comes back by itself):
//   - the host serves the configuration the last successful `up` proved (or, after a failed
//     `up` that rolled nothing back, the one it tried); after a finished `destroy` of the
//     stack that ran it, nothing, and nothing of that stack is left on the host;
//   - it answers with that configuration's API key and refuses another (or needs none);
//   - `preview` and `refresh` change nothing on the host (same server process);
//   - what `preview` said `up` would do (which restart and readiness steps run) is what the
//     next `up` of the same change did, when that `up` succeeded;
//   - no request a server accepted was cut (client traffic during every up and destroy; the
//     stacks keep drainPolicy "fail");
//   - no API key of the sequence, in any encoding, in Pulumi state, the stack files, the
//     step's output, or a `*.dflash-new` secret file left on the host after the step;
//   - every step returned within its deadlines' sum plus a stated margin (stepBoundSeconds),
//     and every `up` ended within that bound by itself: one still running HUNG_UP_GRACE_SECONDS
//     past it is killed by the runner (with its plugins), and both count as violations.
// Shared by the campaign (bench/campaign.ts) and the regression cases (test/campaign/).
import * as fs from "node:fs";
import * as path from "node:path";
import { spawn } from "node:child_process";
import * as os from "node:os";
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { descendants, killEngine } from "../../lib/engine-process";
import * as hosts from "../../simhost/hosts";
import { projectConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../lib/workspace";
import { sudoersFor } from "../../components/sglang-service/become";
import { RUN_DIR } from "../../components/sglang-service/script";
import { allowedAfter, ClockStep, DrawnLocale, FaultKind, ForeignLockHolder, Proven, REBOOT_FAULTS, RebootPhase, secretForms, Serving, servingOf, StackName, Step, STACKS, TimedFault, TIMED_FAULTS } from "./plan";
import { REPO_ROOT } from "../../lib/pulumi-env";

export const UNIT = "sglang-k26";
const RENAMED = `${UNIT}-renamed`;
/** A second sshd port of the host: "another name of the same machine" (host.port). */
const OTHER_PORT = 2222;
/** A flag no SGLang has: preflight refuses it before anything is stopped. */
const BAD_FLAG = "--speculative-dflash-no-such-flag";
type Speculative = { budget?: number; draftWindowSize?: number | "none" };
const SETTLE_MS = 90_000;

/** The deadlines every stack of a sequence runs with (small, so that a step is fast). */
export const DEADLINES = { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 8, drainSeconds: 30, stopSeconds: 20, commandSeconds: 5, helpSeconds: 10, rebootSeconds: 120 };
export const SAFETY = { stableSeconds: 1, lockWaitSeconds: 60 };
/**
 * The most a step may take: the engine (start, program, plugins) within 90 s, preflight (its
 * `--help` and `nvidia-smi`, each bounded), a wait for the host's lock, then a restart and a
 * rollback, each within drain + stop + GPU release + ready + stable, then the settle period's
 * reads; and in a group whose node dropped out mid-restart, the wait for it to answer again
 * (rebootSeconds) and the group's restart once more.
 */
export const STEP_MARGIN_SECONDS = 90;
export function stepBoundSeconds(): number {
  const restart = DEADLINES.drainSeconds + DEADLINES.stopSeconds + DEADLINES.gpuReleaseSeconds + DEADLINES.readySeconds + SAFETY.stableSeconds;
  return STEP_MARGIN_SECONDS + DEADLINES.helpSeconds + DEADLINES.commandSeconds + SAFETY.lockWaitSeconds + DEADLINES.rebootSeconds + 3 * restart;
}
/** How long the harness lets a rebooted host boot (hosts.reboot's bootTimeoutMs). */
const REBOOT_BOOT_MS = 180_000;
/** An `up` still running this long past its bound is hung: the runner kills it (never waits forever). */
export const HUNG_UP_GRACE_SECONDS = 30;

/** The host lock every host step of the tool takes (components/sglang-service/script.ts). */
const HOST_LOCK = `${RUN_DIR}/host.lock`;
/**
 * stalled-node0: how long a root process of the harness holds node 0's host lock from before
 * the up: longer than node 1 waits for its peer (drainSeconds + 15), shorter than the lock wait,
 * so node 0's restart does go on, late.
 */
const STALL_SECONDS = DEADLINES.drainSeconds + 25;
/**
 * foreign-lock: how long its holder holds the host lock: `nobody`, once readiness waits, past
 * the lock wait (so that it would block a rollback waiting for it); root, from before the up,
 * less than the lock wait (so that the up waits for it and goes on).
 */
const FOREIGN_LOCK_SECONDS: Record<ForeignLockHolder, number> = { nobody: SAFETY.lockWaitSeconds + 30, root: SAFETY.lockWaitSeconds - 20 };
/** The progress line that begins each phase of an up a reboot lands in. */
const REBOOT_PHASE_LINES: Record<RebootPhase, RegExp> = {
  staging: /sglang-unit(-node\d+)? (updating|creating)/,
  drain: /stopping: /,
  loading: /started the new unit/,
  readiness: /sglang-ready (updating|creating)/,
};

/**
 * clock-step: the host's wall clock steps for what it starts, as libfaketime (in the host image)
 * gives it: the shells and `date` of every unit the manager starts after the up begins (the
 * tool's host steps, the server's ExecStartPre helpers) and of every SSH session, read from a
 * file whose offset the harness changes at the phase drawn, so a step already running sees the
 * clock jump. The monotonic clock and /proc/uptime are untouched, as a real step leaves them;
 * systemd's own tools and the simulated SGLang stay on the real clock (libfaketime breaks
 * sd-event's loop, and the simulator is not what is tested). The machine's clock, shared with
 * every host, is never touched.
 */
const CLOCK_FILE = "/run/dflash-campaign-clock";
const CLOCK_ENV = ["LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", `FAKETIME_TIMESTAMP_FILE=${CLOCK_FILE}`, "FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_ONLY_CMDS=date,bash,sh,dash"];
/** racing-operators: how long the second operator's up may take to end on the lock (its engine start, the guard). */
const RACER_MS = 120_000;
/** racing-operators: what a second operator's up says when it ends on the stack's lock, and what it must never do. */
const RACER_LOCKED = /the stack is currently locked/;
const RACER_NAMED = /is locked by pulumi pid \d+ on host /;
const RACER_CANCELLED = /running `pulumi cancel`|problem deleting the lock/;

/** What happened to one client request sent while a step ran. */
export type RequestOutcome = "completed" | "refused" | "cut";

/** Pure: requests by outcome, e.g. "27 completed, 4 refused, 1 cut" (a stalled node 0's steady traffic sends dozens). */
export function outcomeCounts(outcomes: RequestOutcome[]): string {
  return (["completed", "refused", "cut"] as const)
    .map((o) => [o, outcomes.filter((x) => x === o).length] as const)
    .filter(([, n]) => n > 0)
    .map(([o, n]) => `${n} ${o}`)
    .join(", ");
}

export interface StepRecord {
  step: Step;
  ok: boolean;
  /** For an up: whether its fault was armed (see SequenceRunner.up). */
  armed?: boolean;
  /** For an up: how long the operation itself took (without the settle period), against stepBoundSeconds. */
  upSeconds?: number;
  /** For an up: it did not end by itself and the runner killed it HUNG_UP_GRACE_SECONDS past its bound. */
  hung?: boolean;
  /** For a fault that acts at a moment of the rollout (SSH cut, sessions dropped): whether that moment came. */
  fired?: boolean;
  /** For a timed fault that fired: the phase of the operation it landed in (its last progress line). */
  phase?: string;
  seconds: number;
  cause?: string;
  requests: RequestOutcome[];
  violations: string[];
}

export interface SequenceResult {
  label: string;
  group: boolean;
  /** The stacks reached the hosts as deploy through sudo (absent in runs recorded before issue 23: as root). */
  sudo?: boolean;
  steps: StepRecord[];
  violations: string[];
  seconds: number;
  /** Where the hosts' journals were saved after a violation (bench/out/campaign/, not committed). */
  journal?: string;
}

/** How a sequence gets its hosts: the campaign's owned hosts, or a test's. */
export type StartHost = (name: string, opts: Parameters<typeof hosts.start>[1]) => Promise<hosts.HostInfo>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The fault specs of the simulator for a kind, scoped to the new configuration (its budget and
 * draft window: b8t4-w2048 and b8t4-wnone share a budget), so the previous one can come back;
 * a late SIGTERM and a stale server are the old server's, scoped to the previous configuration.
 */
function simFault(kind: FaultKind, serving: Serving, previous: Serving | null, rebootAt?: RebootPhase, lockHolder?: ForeignLockHolder): Record<string, unknown> | undefined {
  const match = { match: { speculative_ddtree_budget: serving.budget, speculative_draft_window_size: serving.window } };
  const old = previous ? { match: { speculative_ddtree_budget: previous.budget, speculative_draft_window_size: previous.window } } : {};
  switch (kind) {
    case "crash-oom":
      return { crashDuringLoad: "oom", ...match };
    case "crash-not-enough-memory":
      return { crashDuringLoad: "not-enough-memory", ...match };
    case "crash-cuda-graph":
      return { crashDuringLoad: "cuda-graph", ...match };
    case "crash-error":
      return { crashDuringLoad: "error", ...match };
    case "sessions-dropped-rollback":
      // The GPUs of the crashed start free 7 s late (within the 8 s deadline): the rollback
      // waits, the drop lands in that wait, and its progress line at 5 s is output after it.
      return { crashDuringLoad: "oom", gpuReleaseDelaySeconds: 7, ...match };
    case "crash-unbalanced":
      return { crashDuringLoad: "unbalanced", ...match };
    case "hang":
      return { hangDuringLoad: true, ...match };
    case "slow-load":
      // Four times the 2 s load: still well within readySeconds.
      return { loadSlowdown: 4, ...match };
    case "crash-after-ready":
      return { crashAfterReadySeconds: 0.5, ...match };
    case "corrupt-output":
      return { corruptOutput: true, ...match };
    case "late-sigterm":
      return { ignoreSigtermSeconds: 5, ...old };
    case "stale-server":
      return { staleSeconds: 4, ...old };
    case "gpu-late":
      return { gpuReleaseDelaySeconds: 14 };
    case "hang-nvidia-smi":
      return { hangNvidiaSmi: true };
    case "hang-help":
      return { hangHelp: true };
    case "reboot-clean":
    case "power-cut":
      // While loading: a load four times as long (8 s), so that the reboot lands in it.
      return rebootAt === "loading" ? { loadSlowdown: 4, ...match } : undefined;
    case "foreign-lock":
      // nobody's: readiness waits on a load that never ends, and so a rollback comes.
      return lockHolder === "nobody" ? { hangDuringLoad: true, ...match } : undefined;
    case "killed-rollback":
      // The new configuration crashes, and its GPUs free 7 s late (within the 8 s deadline): the
      // rollback's host step waits for them, and is SIGKILLed there.
      return { crashDuringLoad: "oom", gpuReleaseDelaySeconds: 7, ...match };
    default:
      return undefined;
  }
}

/** Faults of the old server: armed only when one runs. */
const OLD_SERVER_FAULTS: FaultKind[] = ["late-sigterm", "stale-server"];
/** Faults of the rollout or of the host, not of a server: armed whatever serves (stalled-node0: in a group). */
const ROLLOUT_FAULTS: FaultKind[] = ["gpu-late", "ssh-outage-loading", ...TIMED_FAULTS, "hang-nvidia-smi", "hang-help", ...REBOOT_FAULTS, "stalled-node0", "read-only-path", "locale", "clock-step", "racing-operators"];

/** Progress lines of an operation and the phase each begins (the last one seen is where it is). */
const PHASES: [RegExp, string][] = [
  [/sglang-unit(-node\d+)? (updating|creating)/, "staging"],
  [/sglang-restart(-node\d+|-group)? (updating|creating|replacing)|holding \S+'s lock/, "restart"],
  [/stopping: |draining/, "drain"],
  [/waiting for GPU memory/, "GPU release"],
  [/started the new unit|sglang-ready (updating|creating)/, "load and readiness"],
  [/rolling back|rolls back|restoring the previous/, "rollback"],
  [/ (deleting|removing)/, "remove"],
];

/** Pure: the phase an operation is in, from its output so far. */
export function phaseOf(output: string): string {
  let at = -1;
  let phase = "engine start and reads";
  for (const [re, name] of PHASES) {
    const g = new RegExp(re.source, `${re.flags.replace("g", "")}g`);
    for (let m = g.exec(output); m; m = g.exec(output)) {
      if (m.index >= at) {
        at = m.index;
        phase = name;
      }
    }
  }
  return phase;
}

/** The restart and readiness steps an operation runs, from the engine's events ("name op", sorted). */
function rolloutOps(events: EngineEvent[]): string[] {
  const ops = new Set<string>();
  for (const e of events) {
    const m = e.resourcePreEvent?.metadata;
    if (!m) continue;
    const name = m.urn.split("::").pop() ?? "";
    if (/^sglang-(restart(-node\d+|-group)?|ready)$/.test(name) && m.op !== "same" && m.op !== "read") ops.add(`${name} ${m.op}`);
  }
  return [...ops].sort();
}

function allFiles(dir: string): string {
  if (!fs.existsSync(dir)) return "";
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .map((e) => (e.isDirectory() ? allFiles(path.join(dir, e.name)) : fs.readFileSync(path.join(dir, e.name), "utf8")))
    .join("\n");
}

interface StackState {
  config: string;
  key: string | null;
  token: string | null;
  renamed: boolean;
  otherPort: boolean;
  servicePort: boolean;
  proceed: boolean;
}

const FRESH = { key: null, token: null, renamed: false, otherPort: false, servicePort: false, proceed: false };

/** What an operation did: its outcome, a timed fault's moment, how long it took, and where it hung if the runner killed it. */
interface Operated {
  ok: boolean;
  message: string;
  fired?: boolean;
  phase?: string;
  seconds: number;
  /** The runner killed it past its bound: the phase its output had reached. */
  hungIn?: string;
}

/**
 * SIGKILLs the `pulumi` engine the Automation API runs in workspace `dir` (our child, found by
 * its working directory: each sequence has its own) and every process below it, its plugins.
 */
function killWorkspaceEngine(dir: string): void {
  for (const pid of descendants(process.pid)) {
    let argv0: string;
    let cwd: string;
    try {
      argv0 = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0];
      cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue;
    }
    if (path.basename(argv0) !== "pulumi" || path.resolve(cwd) !== path.resolve(dir)) continue;
    for (const p of [pid, ...descendants(pid)]) {
      try {
        process.kill(p, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

export class SequenceRunner {
  /** What the host serves, as last checked. */
  private proven: Proven | null = null;
  /**
   * The host's known-good: the configuration the last successful `up` proved, where a
   * rollback goes. It differs from `proven` after a step whose session dropped, or whose engine
   * was killed, left its new configuration running without readiness proving it.
   */
  private knownGood: Proven | null = null;
  /** The last step was an operation that failed after its engine was killed or its sessions dropped. */
  private lastStepLost = false;
  private readonly stacks: Record<StackName, StackState> = {
    a: { config: "b8t4-w2048", ...FRESH },
    b: { config: "b4t4-w2048", ...FRESH },
  };
  private readonly secrets: string[] = [];
  /**
   * A power cut left the secret copies of the step it cut (no EXIT hook ran): they may stay
   * until the next step that takes the host lock, which removes them (issue 41, item 5).
   */
  private copiesExcused = false;
  private keyCount = 0;
  private otherPortReady = false;
  /** What the engine printed in every up and destroy of the sequence, saved beside the journals after a violation. */
  engineLog = "";

  constructor(
    private readonly host: hosts.HostInfo,
    private readonly node1: hosts.HostInfo | undefined,
    private readonly ws: SimWorkspace,
    private readonly tag: string,
  ) {}

  /** The stack config of a sequence's stack before its first step. */
  static baseConfig(host: hosts.HostInfo, node1: hosts.HostInfo | undefined, config: string): Record<string, unknown> {
    const project = readRepoStackConfig(config);
    return {
      ...project,
      ...simHostConfig(host, UNIT),
      ...(node1 ? { "dflash-sglang:nodes": [simHostConfig(node1)["dflash-sglang:host"]] } : {}),
      ...(node1 ? { "dflash-sglang:model": { path: "/models/Kimi-K2.6", drafterPath: "/models/Kimi-K2.6-DFlash", tpSize: 16, quantization: "compressed-tensors", trustRemoteCode: true } } : {}),
      "dflash-sglang:safety": SAFETY,
      "dflash-sglang:timeouts": DEADLINES,
      "dflash-sglang:benchmark": { enabled: false },
    };
  }

  private async sh(cmd: string): Promise<{ code: number; stdout: string }> {
    const r = await hosts.ssh(this.host, cmd, { timeoutMs: 20_000 });
    return { code: r.code, stdout: r.stdout.trim() };
  }

  /**
   * What the units of ours on each node are doing, for a violation's reader: their state, the
   * unit files and whether they are enabled, and the last journal lines of this boot.
   */
  private async hostStory(): Promise<string> {
    const cmd = `systemctl list-units --all --no-legend --plain '${UNIT}*.service' '${RENAMED}*.service' 2>&1 | head -5; systemctl list-unit-files --no-legend '${UNIT}*.service' '${RENAMED}*.service' 2>&1 | head -5; journalctl -b --no-pager -q -n 6 -o cat -u '${UNIT}*' -u '${RENAMED}*' 2>&1 | cut -c1-200`;
    const nodes = this.nodes();
    const told = await Promise.all(nodes.map((h) => hosts.ssh(h, cmd, { timeoutMs: 20_000 }).then((r) => r.stdout.trim(), (e: Error) => `(unreadable: ${e.message.split("\n")[0]})`)));
    return told.map((t, k) => `\n    node ${k}: ${t.split("\n").join(" | ")}`).join("");
  }

  /** The main PIDs of every unit of ours on the host (read-only steps must not change them). */
  private async pids(): Promise<string> {
    return (await this.sh(`for u in ${UNIT} ${RENAMED}; do systemctl show -p MainPID --value $u.service; done`)).stdout;
  }

  private newKey(kind = "sk-campaign"): string {
    const key = `${kind}-${this.tag}-${++this.keyCount}`;
    this.secrets.push(key);
    return key;
  }

  /** The server's port for a stack whose service.port is toggled (or not). */
  private port(toggled: boolean): number {
    return this.host.sglangPort + (toggled ? 1 : 0);
  }

  private url(port = this.proven?.port ?? this.host.sglangPort): string {
    return `http://${this.host.address}:${port}`;
  }

  /**
   * Waits (within the settle period) until no host step of ours runs on the host (or node 1):
   * a step whose session dropped, or whose engine was killed, goes on as a transient unit, and
   * a recovery waits for the GPUs; what the host serves is judged once they have ended.
   */
  private async quiet(deadline: number): Promise<void> {
    const busy = async (h: hosts.HostInfo) => (await hosts.ssh(h, "systemctl list-units --state=active,activating --no-legend --plain 'dflash-step-*' 'dflash-recover-*' | wc -l", { timeoutMs: 20_000 }).catch(() => ({ stdout: "1" }))).stdout.trim() !== "0";
    for (const h of this.nodes()) while (Date.now() < deadline && (await busy(h))) await sleep(1000);
  }

  /** What the host serves now: configuration, unit and owning stack, and which key it takes. */
  private async observe(keys: (string | null)[]): Promise<{ serving: Serving; port: number; unit: string; stack: string; open: boolean; takes: (key: string) => Promise<boolean> } | undefined> {
    const unit = (await this.sh(`systemctl list-units --state=active --no-legend --plain '${UNIT}*.service' | cut -d' ' -f1 | head -n 1`)).stdout.replace(/\.service$/, "");
    const stack = unit ? (await this.sh(`sed -n 's/^X-DFlash-Stack=//p' /etc/systemd/system/${unit}.service 2>/dev/null`)).stdout : "";
    // /server_info needs the key the server runs with: try each one it may have (-f: a 401
    // answer is JSON too, and is no server info), on each port a stack may have given it.
    for (const port of [this.port(false), this.port(true)]) {
      const url = this.url(port);
      const status = async (key: string) => (await this.sh(`curl -s -m 3 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' ${url}/v1/models`)).stdout === "200";
      for (const key of [...new Set([null, ...keys])]) {
        const info = await this.sh(`curl -sf -m 3 ${key ? `-H 'Authorization: Bearer ${key}' ` : ""}${url}/server_info`);
        if (info.code !== 0 || !info.stdout.startsWith("{")) continue;
        const parsed = JSON.parse(info.stdout) as { speculative_ddtree_budget?: number; speculative_draft_window_size?: number | null };
        // Asked once the server answers: a server still starting refuses every connection.
        const open = (await this.sh(`curl -s -m 3 -o /dev/null -w '%{http_code}' ${url}/v1/models`)).stdout === "200";
        return { serving: { budget: parsed.speculative_ddtree_budget ?? null, window: parsed.speculative_draft_window_size ?? null }, port, unit, stack, open, takes: status };
      }
    }
    return undefined;
  }

  /** What node 1 of a group runs: "active <budget>" from its unit file, or what systemd says. */
  private async node1Runs(): Promise<string> {
    const r = await hosts.ssh(this.node1!, `for u in ${UNIT} ${RENAMED}; do if [ "$(systemctl is-active $u.service)" = active ]; then echo "active $(grep -o -- '--speculative-ddtree-budget [0-9]*' /etc/systemd/system/$u.service | cut -d' ' -f2)"; exit 0; fi; done; echo inactive`, { timeoutMs: 20_000 });
    return r.stdout.trim();
  }

  /** Streams through the OpenAI endpoint, started before a step; each resolves to its outcome. */
  private traffic(count: number): Promise<RequestOutcome>[] {
    const key = this.proven?.key;
    return Array.from({ length: count }, async () => {
      let accepted = false;
      try {
        const res = await fetch(`${this.url()}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
          // ignore_eos: every stream runs its 400 tokens (the model's own answer ends far sooner).
          body: JSON.stringify({ messages: [{ role: "user", content: "campaign" }], max_tokens: 400, stream: true, ignore_eos: true }),
          signal: AbortSignal.timeout(120_000),
        });
        if (res.status !== 200) return "refused";
        accepted = true;
        let text = "";
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
        return text.includes("data: [DONE]") ? "completed" : "cut";
      } catch {
        return accepted ? "cut" : "refused";
      }
    });
  }

  /** The invariants after a step, waiting up to SETTLE_MS for what comes back by itself. */
  private async check(allowed: Proven[], output: string, pidsBefore?: string, mayBeEmpty = false, nothingMayServe = false): Promise<string[]> {
    const violations: string[] = [];
    const deadline = Date.now() + SETTLE_MS;
    await this.quiet(deadline);
    // After a destroy that failed or was killed, its host step may have removed the unit; after
    // a failed first install (no known-good to roll back to), no unit of ours may be running.
    const empty =
      (mayBeEmpty && (await this.sh(`{ ls /etc/systemd/system/${UNIT}*.service 2>/dev/null; systemctl list-units --state=active,activating --no-legend --plain '${UNIT}*.service'; } | wc -l`)).stdout === "0") ||
      (nothingMayServe && (await this.sh(`systemctl list-units --state=active,activating --no-legend --plain '${UNIT}*.service' | wc -l`)).stdout === "0");
    if (allowed.length > 0 && !empty) {
      let last = "nothing serves";
      for (;;) {
        const now = await this.observe(allowed.map((p) => p.key)).catch(() => undefined);
        const match = now && allowed.find((p) => p.stack === now.stack && p.serving.budget === now.serving.budget && p.serving.window === now.serving.window && (p.port ?? this.port(false)) === now.port);
        if (now) last = `the host serves stack ${now.stack || "(none)"} as ${now.unit || "(no unit)"}, budget ${now.serving.budget}, window ${now.serving.window}, port ${now.port}`;
        // A group serves only when every node runs the same configuration (node 1 its rank 1).
        const node1 = match && now && this.node1 ? await this.node1Runs() : undefined;
        if (node1 !== undefined && node1 !== `active ${match!.serving.budget}`) {
          last += `, node 1: ${node1 || "nothing"}`;
          if (Date.now() > deadline) {
            violations.push(`after ${SETTLE_MS / 1000} s the group disagrees: ${last}${await this.hostStory()}`);
            break;
          }
          await sleep(1000);
          continue;
        }
        if (match && now) {
          if (match.key) {
            if (!(await now.takes(match.key))) violations.push(`serves ${last} but refuses its own API key`);
            if (now.open) violations.push(`serves ${last} without asking for its API key`);
          } else if (!now.open) {
            violations.push(`serves ${last}, which should need no API key, but refuses a request without one`);
          }
          this.proven = { ...match, unit: now.unit, port: now.port };
          break;
        }
        // With nothing to roll back to, a failed up leaves its unit as it is (a hung load goes on
        // loading): nothing serving is allowed when the up said so (HOST DOWN), or once no unit
        // of ours runs any more (seed 4143, seq. 23: the hung load's unit failed later).
        if (nothingMayServe && !now && (/HOST DOWN/.test(output) || (await this.sh(`systemctl list-units --state=active,activating --no-legend --plain '${UNIT}*.service' | wc -l`)).stdout === "0")) {
          this.proven = null;
          break;
        }
        if (Date.now() > deadline) {
          violations.push(`after ${SETTLE_MS / 1000} s: ${last}; allowed: ${allowed.map((p) => `stack ${p.stack} budget ${p.serving.budget} window ${p.serving.window} port ${p.port ?? this.port(false)}`).join(" or ")}${mayBeEmpty ? " or nothing" : ""}${await this.hostStory()}`);
          break;
        }
        await sleep(1000);
      }
    } else {
      this.proven = null;
    }
    if (pidsBefore !== undefined && (await this.pids()) !== pidsBefore) violations.push("a read-only step (preview or refresh) restarted or stopped a server");
    const left = (await this.sh("find /etc/dflash-sglang /var/lib/dflash-sglang -name '*.dflash-new' 2>/dev/null")).stdout;
    if (left && !this.copiesExcused) violations.push(`secret copies left on the host after the step: ${left.split("\n").join(", ")}`);
    const places: Record<string, string> = { "Pulumi state": allFiles(path.join(this.ws.dir, "state")), "stack files": allFiles(path.join(this.ws.dir, "stacks")), "the step's output": output };
    for (const secret of this.secrets) {
      for (const [where, text] of Object.entries(places)) {
        const forms = secretForms(text, secret);
        if (forms.length) violations.push(`API key ${secret} in ${where} (${forms.join(", ")})`);
      }
    }
    return violations;
  }

  /**
   * A process not of this rollout holds node 0's host lock (a transient unit): for
   * stalled-node0 a root process of the harness, from before the up, STALL_SECONDS; for
   * foreign-lock its holder, FOREIGN_LOCK_SECONDS (`nobody` holds it only where the lock file
   * lets every user open it). Returns whether it holds the lock (once it does, or once
   * the holder's attempt ended).
   */
  private async holdLock(fault: "stalled-node0" | "foreign-lock", holder: ForeignLockHolder = "root"): Promise<boolean> {
    const user = holder === "nobody" ? "--uid=nobody " : "";
    const seconds = fault === "stalled-node0" ? STALL_SECONDS : FOREIGN_LOCK_SECONDS[holder];
    // After a reboot /run is empty: the lock file is made first as the transaction makes it
    // (root's, 0600, in a 0700 folder), or no holder could take it, and a lock file that
    // cannot be opened must not read as a lock that is held.
    const r = await hosts.ssh(
      this.host,
      `(umask 077; mkdir -p ${RUN_DIR} && touch ${HOST_LOCK}) || exit 5; ` +
        `systemd-run --quiet --collect ${user}--unit=campaign-${fault} flock ${HOST_LOCK} sleep ${seconds}; ` +
        `for i in $(seq 100); do [ -e ${HOST_LOCK} ] && ! flock -n ${HOST_LOCK} true 2>/dev/null && exit 0; systemctl is-active --quiet campaign-${fault} || exit 3; sleep 0.1; done; exit 4`,
      { timeoutMs: 30_000 },
    );
    if (fault === "stalled-node0" && r.code !== 0) throw new Error(`the harness could not stall node 0 (${this.host.name}): its lock holder ${r.code === 3 ? "ended" : r.code === 5 ? "could not make the lock file" : "did not take the lock within 10 s"} ${r.stderr.trim()}`);
    return r.code === 0;
  }

  /** Ends a lock holder of holdLock (it may have ended by itself). */
  private async releaseLock(fault: "stalled-node0" | "foreign-lock"): Promise<void> {
    await hosts.ssh(this.host, `systemctl stop campaign-${fault} 2>/dev/null; true`, { timeoutMs: 30_000 });
  }

  private nodes(): hosts.HostInfo[] {
    return [this.host, ...(this.node1 ? [this.node1] : [])];
  }

  /** A harness command on every node (as root); one that fails is the harness's error, naming the node. */
  private async onNodes(what: string, cmd: string, nodes = this.nodes()): Promise<void> {
    await Promise.all(
      nodes.map(async (h) => {
        const r = await hosts.ssh(h, cmd, { timeoutMs: 30_000 });
        if (r.code !== 0) throw new Error(`the harness could not ${what} on ${h.name}: exit ${r.code} ${r.stderr.trim().slice(0, 300)}`);
      }),
    );
  }

  /**
   * read-only-path: `dir` on node 0 mounted read-only over itself (none of READ_ONLY_DIRS has a
   * mount below it); false where the folder does not exist (nothing armed).
   */
  private async mountReadOnly(dir: string): Promise<boolean> {
    const r = await hosts.ssh(this.host, `[ -d ${dir} ] || exit 3; mount --bind ${dir} ${dir} && mount -o remount,bind,ro ${dir}`, { timeoutMs: 30_000 });
    if (r.code === 3) return false;
    if (r.code !== 0) throw new Error(`the harness could not make ${dir} read-only on ${this.host.name}: ${r.stderr.trim()}`);
    return true;
  }

  /** The hosts' own locale (/etc/default/locale for SSH sessions, /etc/locale.conf for systemd) set to `locale`, or back to what it was. */
  private async hostLocale(locale: DrawnLocale | null): Promise<void> {
    const files = "/etc/default/locale /etc/locale.conf";
    await this.onNodes(
      locale ? `set the locale ${locale}` : "restore the locale",
      locale
        ? `for f in ${files}; do if [ -e "$f" ]; then cp -a "$f" "$f.campaign-saved"; else : > "$f.campaign-absent"; fi; echo 'LANG=${locale}' > "$f"; done`
        : `for f in ${files}; do if [ -e "$f.campaign-saved" ]; then mv -f "$f.campaign-saved" "$f"; elif [ -e "$f.campaign-absent" ]; then rm -f "$f" "$f.campaign-absent"; fi; done`,
    );
  }

  /** clock-step: every node's shells and `date` read the wall clock through CLOCK_FILE (offset +0) from now on, or no longer. */
  private async clockHook(on: boolean): Promise<void> {
    const names = CLOCK_ENV.map((e) => e.split("=")[0]).join(" ");
    await this.onNodes(
      on ? "hook the wall clock" : "unhook the wall clock",
      on
        ? `echo +0 > ${CLOCK_FILE} && systemctl set-environment ${CLOCK_ENV.join(" ")} && printf '%s\\n' ${CLOCK_ENV.join(" ")} >> /etc/environment`
        : `systemctl unset-environment ${names} && sed -i '/^LD_PRELOAD=\\|^FAKETIME_/d' /etc/environment && echo +0 > ${CLOCK_FILE}`,
    );
  }

  /**
   * clock-step: the wall clock of every node steps by `by`; proven on node 0 by a unit started
   * then (as the tool's host steps are), whose `date` must read the harness's clock plus the step.
   */
  private async stepClock(by: ClockStep): Promise<void> {
    await this.onNodes(`step the clock ${by}`, `echo '${by}' > ${CLOCK_FILE}`);
    const want = (by.startsWith("-") ? -1 : 1) * Number(by.slice(1, -1)) * 3600;
    const r = await hosts.ssh(this.host, "systemd-run --wait --pipe --quiet --collect date +%s", { timeoutMs: 30_000 });
    const off = Number(r.stdout.trim()) - Date.now() / 1000;
    if (!(Math.abs(off - want) < 60)) throw new Error(`the harness's clock step ${by} did not take on ${this.host.name}: a unit's date reads ${r.stdout.trim() || r.stderr.trim()} (offset ${off.toFixed(0)} s)`);
  }

  /** killed-rollback: SIGKILLs the rollback's host step on node 0 once it runs (within 60 s); its unit's name, or "" if none came. */
  private async killRollbackStep(): Promise<string> {
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const unit = (await this.sh("systemctl list-units --plain --no-legend 'dflash-step-*-rollback-*' | awk 'NR == 1 { print $1 }'")).stdout;
      if (unit) {
        await this.sh(`systemctl kill --signal=SIGKILL ${unit}`);
        return unit;
      }
      await sleep(100);
    }
    return "";
  }

  /**
   * racing-operators: a second operator runs `npx pulumi up` of the same stack while this up
   * holds its lock, from a machine of the same hostname (another pid namespace, starting from
   * other pids, with a lock-owner record of its own). Resolves to what it said and when it
   * began an update (its "Updating (" line), if it did.
   */
  private race(stack: StackName): Promise<{ code: number | null; out: string; updatingAt?: number; endedAt: number }> {
    const owners = fs.mkdtempSync(path.join(os.tmpdir(), "campaign-racer-"));
    const script = 'for ((i = 0; i < 300; i++)); do (:); done; exec "$0" "$@"';
    const args = ["--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", script, path.join(REPO_ROOT, "scripts", "pulumi.sh"), "up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack];
    const child = spawn("unshare", args, { cwd: this.ws.dir, env: { ...this.ws.env, DFLASH_LOCK_OWNERS_DIR: owners }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let updatingAt: number | undefined;
    const read = (d: Buffer) => {
      out += d.toString();
      if (updatingAt === undefined && /Updating \(/.test(out)) updatingAt = Date.now();
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    const limit = setTimeout(() => child.kill("SIGKILL"), RACER_MS);
    return new Promise((resolve) =>
      child.on("close", (code) => {
        clearTimeout(limit);
        fs.rmSync(owners, { recursive: true, force: true });
        this.engineLog += `\n==== the second operator's up ${stack} (exit ${code}) ====\n${out}`;
        resolve({ code, out, updatingAt, endedAt: Date.now() });
      }),
    );
  }

  async baseline(): Promise<string[]> {
    await (await this.ws.stack("a")).up();
    const serving = servingOf(readRepoStackConfig(this.stacks.a.config)["dflash-sglang:speculative"] as Speculative);
    const violations = await this.check([{ stack: "a", unit: UNIT, serving, key: null }], "");
    this.knownGood = this.proven;
    return violations;
  }

  async run(step: Step): Promise<StepRecord> {
    const started = Date.now();
    const record = await (step.op === "up" ? this.up(step) : step.op === "destroy" ? this.destroy(step) : this.readOnly(step));
    const seconds = (Date.now() - started) / 1000;
    if (seconds > stepBoundSeconds() + SETTLE_MS / 1000) record.violations.push(`took ${seconds.toFixed(0)} s, past its bound of ${stepBoundSeconds()} s (deadlines and margin) plus the ${SETTLE_MS / 1000} s settle period`);
    return { ...record, seconds };
  }

  private async readOnly(step: Extract<Step, { op: "preview" | "refresh" }>): Promise<Omit<StepRecord, "seconds">> {
    const stack = await this.ws.stack(step.stack);
    let output = "";
    const onOutput = (s: string) => (output += s);
    const pids = await this.pids();
    const r = await (step.op === "preview" ? stack.preview({ onOutput }) : stack.refresh({ onOutput })).then(
      () => ({ ok: true, cause: undefined }),
      (e: Error) => ({ ok: false, cause: e.message.split("\n").find((l) => /error:/.test(l)) ?? e.message.slice(0, 200) }),
    );
    const violations = await this.check(this.proven ? [this.proven] : [], output, pids);
    return { step, ok: r.ok, cause: r.cause, requests: [], violations };
  }

  /**
   * Runs `up` or `destroy` of a stack, with a timed fault: every SSH session into the host
   * dropped, or the `pulumi` process SIGKILLed (with its plugins, as a crash or an OOM kill
   * would), `atSeconds` after it starts. A killed engine runs as a CLI process of its own.
   */
  private async operate(op: "up" | "destroy", name: StackName, timed: { fault: TimedFault; atSeconds: number; atOutput?: string } | undefined, onOutput: (o: string) => void, events: EngineEvent[], killAfterSeconds?: number): Promise<Operated> {
    const started = Date.now();
    let hungIn: string | undefined;
    const watchdog = (kill: () => void) =>
      killAfterSeconds === undefined
        ? undefined
        : setTimeout(() => {
            hungIn = phaseOf(output);
            kill();
          }, killAfterSeconds * 1000);
    const ended = <T extends object>(r: T) => ({ ...r, seconds: (Date.now() - started) / 1000, ...(hungIn !== undefined ? { hungIn } : {}) });
    let output = "";
    let act: (() => void) | undefined;
    let upOutput = "";
    this.engineLog += `\n==== ${op} ${name} (${new Date().toISOString()}) ====\n`;
    const watch = (o: string) => {
      output += o;
      upOutput += o;
      this.engineLog += o;
      onOutput(o);
      if (act && timed?.atOutput && new RegExp(timed.atOutput).test(output)) act();
    };
    if (timed?.fault === "pulumi-killed") {
      await this.ws.stack(name); // selects it, and cancels a lock a killed engine left
      const args = op === "up" ? ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", name] : ["destroy", "--yes", "--skip-preview", "--non-interactive", "--run-program", "--stack", name];
      const child = spawn("pulumi", args, { cwd: this.ws.dir, env: this.ws.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
      child.stdout.on("data", (d: Buffer) => watch(d.toString()));
      child.stderr.on("data", (d: Buffer) => watch(d.toString()));
      let fired = false;
      let phase: string | undefined;
      const kill = () => {
        act = undefined;
        if (child.exitCode !== null || fired) return;
        fired = true;
        phase = phaseOf(output);
        killEngine(child.pid!);
      };
      act = kill;
      const timer = setTimeout(kill, timed.atSeconds * 1000);
      const hangs = watchdog(() => killEngine(child.pid!));
      const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
      clearTimeout(timer);
      clearTimeout(hangs);
      return ended({ ok: !fired && hungIn === undefined && code === 0, message: fired ? "" : output, fired, ...(phase ? { phase } : {}) });
    }
    const stack = await this.ws.stack(name);
    let fired: boolean | undefined;
    let phase: string | undefined;
    let dropping: Promise<unknown> | undefined;
    const timer =
      timed &&
      setTimeout(() => {
        fired = true;
        phase = phaseOf(output);
        dropping = hosts.dropSessions(this.host).catch(() => undefined);
      }, timed.atSeconds * 1000);
    if (timed) fired = false;
    const onEvent = (e: EngineEvent) => events.push(e);
    const hangs = watchdog(() => killWorkspaceEngine(this.ws.dir));
    const r = await (op === "up" ? stack.up({ onOutput: watch, onEvent }) : stack.destroy({ onOutput: watch, onEvent, runProgram: true })).then(
      () => ({ ok: true, message: "" }),
      (e: Error) => ({ ok: false, message: e.message }),
    );
    if (timer) clearTimeout(timer);
    clearTimeout(hangs);
    await dropping;
    return ended({ ...r, ...(fired !== undefined ? { fired } : {}), ...(phase ? { phase } : {}) });
  }

  private async destroy(step: Extract<Step, { op: "destroy" }>): Promise<Omit<StepRecord, "seconds">> {
    let output = "";
    const requests = this.traffic(2);
    const timed = step.fault && step.atSeconds !== undefined ? { fault: step.fault, atSeconds: step.atSeconds } : undefined;
    const r = await this.operate("destroy", step.stack, timed, (o) => (output += o), []);
    this.lastStepLost = !r.ok && r.fired === true;
    const outcomes = await Promise.all(requests);
    const owned = this.proven?.stack === step.stack;
    // A destroy that failed (its session dropped, its engine killed) may still have removed
    // the unit on the host (the host step goes on): then nothing, or else what ran before.
    const violations = await this.check(r.ok && owned ? [] : this.proven ? [this.proven] : [], output, undefined, !r.ok && owned);
    const gone = owned && (r.ok || this.proven === null);
    if (gone) {
      const left = (await this.sh(`ls /etc/systemd/system/${UNIT}.service /etc/systemd/system/${RENAMED}.service 2>/dev/null; systemctl list-units --state=active --no-legend --plain '${UNIT}*.service'`)).stdout;
      if (r.ok && left) violations.push(`destroy of stack ${step.stack} (which ran the unit) left: ${left.split("\n").join(", ")}`);
      for (const secret of [this.stacks[step.stack].key, this.stacks[step.stack].token]) {
        if (secret && (await this.sh(`grep -rlF -- '${secret}' /etc/dflash-sglang /var/lib/dflash-sglang /etc/systemd/system 2>/dev/null`)).stdout) violations.push(`destroy of stack ${step.stack} left its secret ${secret} on the host`);
      }
    }
    if (outcomes.includes("cut") && !this.stacks[step.stack].proceed) violations.push(`a request the server had accepted was cut during destroy (${outcomeCounts(outcomes)}); drainPolicy is "fail"`);
    // A destroy removes what runs, not the stack's settings: its secrets stay in its
    // configuration, and its next up runs with them (the model used to forget them: seed
    // 3009). The unit's known-good went with it.
    if (owned && this.proven === null) this.knownGood = null;
    const cause = r.ok ? undefined : r.fired && step.fault === "pulumi-killed" ? `pulumi SIGKILLed at ${step.atSeconds} s` : (r.message.split("\n").find((l) => /error: (?!update failed)/.test(l)) ?? r.message.slice(0, 200)).trim().slice(0, 240);
    return { step, ok: r.ok, ...(r.fired !== undefined ? { fired: r.fired } : {}), ...(r.phase ? { phase: r.phase } : {}), cause, requests: outcomes, violations };
  }

  private async up(step: Extract<Step, { op: "up" }>): Promise<Omit<StepRecord, "seconds">> {
    const s = this.stacks[step.stack];
    const stack = await this.ws.stack(step.stack);
    // The change: speculative settings, the secrets, where the unit lives, what the host lacks.
    s.config = step.config;
    const speculative = readRepoStackConfig(step.config)["dflash-sglang:speculative"] as Speculative;
    this.ws.setStackConfig(step.stack, "speculative", speculative);
    if (step.key === "set" || step.key === "rotate") {
      s.key = this.newKey();
      await stack.setConfig("dflash-sglang:apiKey", { value: s.key, secret: true });
    } else if (step.key === "remove" && s.key !== null) {
      s.key = null;
      await stack.removeConfig("dflash-sglang:apiKey");
    }
    if (step.token === "set" || step.token === "rotate") {
      s.token = this.newKey("hf-campaign");
      await stack.setConfig("dflash-sglang:hfToken", { value: s.token, secret: true });
    } else if (step.token === "remove" && s.token !== null) {
      s.token = null;
      await stack.removeConfig("dflash-sglang:hfToken");
    }
    if (step.rename) s.renamed = !s.renamed;
    if (step.servicePort) s.servicePort = !s.servicePort;
    if (step.proceed) s.proceed = !s.proceed;
    const service = simHostConfig(this.host, s.renamed ? RENAMED : UNIT)["dflash-sglang:service"] as Record<string, unknown>;
    this.ws.setStackConfig(step.stack, "service", { ...service, port: this.port(s.servicePort) });
    this.ws.setStackConfig(step.stack, "timeouts", { ...DEADLINES, drainPolicy: s.proceed ? "proceed" : "fail" });
    if (step.otherPort) {
      if (!this.otherPortReady) await hosts.addSshPort(this.host, OTHER_PORT);
      this.otherPortReady = true;
      s.otherPort = !s.otherPort;
    }
    this.ws.setStackConfig(step.stack, "host", { ...(simHostConfig(this.host)["dflash-sglang:host"] as object), ...(s.otherPort ? { port: OTHER_PORT } : {}) });
    const model = (this.ws.stackConfig(step.stack)["dflash-sglang:model"] ?? projectConfig().model) as Record<string, unknown>;
    // The host (or group) holds 8 GPUs per node: twice that is refused before anything stops.
    const tpSize = this.node1 ? 16 : 8;
    this.ws.setStackConfig(step.stack, "model", { ...model, tpSize: step.badTp ? 2 * tpSize : tpSize, extraArgs: step.badFlag ? [BAD_FLAG] : [] });
    const attempted: Proven = { stack: step.stack, unit: s.renamed ? RENAMED : UNIT, port: this.port(s.servicePort), serving: servingOf(speculative), key: s.key };
    // The other stack's unit serves under another name than this up's: the restart refuses to
    // start beside it (both would use the node's GPUs from GPU 0), before it stops anything.
    // Judged by what runs, not by the stacks' settings: a rename rolled back leaves a stack's
    // unit under its old name (seed 3010).
    const competing = this.proven !== null && this.proven.stack !== step.stack && this.proven.unit !== attempted.unit;
    // In a group, the rollout note of a step whose engine was killed or whose sessions dropped
    // keeps the other stacks off for its handover (the slowest node's restart budget, longer
    // than a lock wait), since readiness starts only after every node's restart: a refusal
    // then is the designed limit (docs/design/safety.md, "One writer per host"), not a fault of the rollout.
    const lostBefore = this.lastStepLost;

    // What preview says this up will do.
    let previewed: string[] | undefined;
    let previewOutput = "";
    if (step.previewFirst) {
      const events: EngineEvent[] = [];
      await stack.preview({ onEvent: (e) => events.push(e), onOutput: (o) => (previewOutput += o) }).then(
        () => (previewed = rolloutOps(events)),
        () => undefined,
      );
    }

    // A fault scoped to a configuration would hit the previous one too when both serve the
    // same settings (the other stack's unit, say): then it is not armed, and counted so. A
    // fault of the old server needs one.
    const sameAs = (p: Proven | null) => p !== null && p.serving.budget === attempted.serving.budget && p.serving.window === attempted.serving.window;
    // The known-good too: a rollback starts it, and a fault of the new settings would hit it.
    const same = sameAs(this.proven) || sameAs(this.knownGood);
    // A reboot at its loading phase slows the new configuration's load (scoped to it, as a server fault).
    const rebootingWhileLoading = (REBOOT_FAULTS as readonly string[]).includes(step.fault) && step.rebootAt === "loading";
    // nobody's lock comes with a hung load of the new configuration: a server fault; root's is the host's.
    const rootHoldsLock = step.fault === "foreign-lock" && step.lockHolder === "root";
    const armedWhen = (): boolean => {
      if (step.fault === "none") return false;
      if (step.fault === "stalled-node0") return this.node1 !== undefined;
      if (rootHoldsLock) return true;
      if (OLD_SERVER_FAULTS.includes(step.fault)) return this.proven !== null;
      if (ROLLOUT_FAULTS.includes(step.fault) || step.fault === "sessions-dropped-rollback") return !(same && (step.fault === "sessions-dropped-rollback" || rebootingWhileLoading));
      return !same;
    };
    const armed = armedWhen();
    const sim = armed ? simFault(step.fault, attempted.serving, this.proven?.serving ?? null, step.rebootAt, step.lockHolder) : undefined;
    const faulted = step.fault === "gpu-late" && this.node1 ? this.node1 : this.host;
    if (sim) hosts.fault(faulted.name, JSON.stringify(sim));
    if (armed && step.fault === "stalled-node0") await this.holdLock("stalled-node0");
    // The stall ends when the harness's holder lets go of node 0's lock (holdLock: STALL_SECONDS).
    const stallEndsAt = Date.now() + STALL_SECONDS * 1000;
    const rootHeld = armed && rootHoldsLock ? await this.holdLock("foreign-lock", "root") : undefined;
    // Hosts as teams have them (issue 60), set before the up and undone after it.
    const readOnly = armed && step.fault === "read-only-path" && step.readOnly ? ((await this.mountReadOnly(step.readOnly)) ? step.readOnly : undefined) : undefined;
    const pidsBeforeUp = readOnly ? await this.pids() : undefined;
    if (armed && step.fault === "locale" && step.locale) await this.hostLocale(step.locale);
    const clockHooked = armed && step.fault === "clock-step" && step.clockStep !== undefined;
    if (clockHooked) await this.clockHook(true);
    let racer: Awaited<ReturnType<SequenceRunner["race"]>> | undefined;
    let killedRollback: string | undefined;
    const requests = this.traffic(2);
    // While node 0 is stalled, a request every 2 s, so that some are in flight when node 1 moves
    // on without it (the old group's collectives abort with node 1's old rank). Only while it is
    // stalled: SGLang's drain counts the requests that arrive during it (rid_to_state), so steady
    // traffic through node 0's own drain would keep it from ever reaching 0, and its deadline
    // would cut one by design (drainPolicy "fail" then fails the up and rolls back).
    let upEnded = false;
    const steady =
      armed && step.fault === "stalled-node0"
        ? (async () => {
            while (!upEnded && Date.now() < stallEndsAt) {
              requests.push(...this.traffic(1));
              await sleep(2000);
            }
          })()
        : undefined;
    let output = previewOutput;
    let during: Promise<unknown> | undefined;
    let harnessError: string | undefined;
    let foreignHeld: boolean | undefined;
    const events: EngineEvent[] = [];
    let upOutput = "";
    const watch = (o: string) => {
      output += o;
      upOutput += o;
      if (during || !armed) return;
      // When the readiness step starts: the new server was started a moment ago and loads its
      // weights (2 s here). Its progress line "loading weights" comes only on a load longer
      // than its first report, so it alone never fired on these short loads.
      if (step.fault === "ssh-outage-loading" && /sglang-ready (updating|creating)|loading weights/.test(upOutput)) during = hosts.sshOutage(this.host, 5).catch(() => undefined);
      // A session cut during a rollback needs one: the new configuration crashes (above).
      if (step.fault === "sessions-dropped-rollback" && /rolling back/.test(upOutput)) during = hosts.dropSessions(this.host).catch(() => undefined);
      // The host reboots (node 0 of a group) as the up enters the phase drawn for it.
      const rebootLine = step.atOutput ? new RegExp(step.atOutput) : step.rebootAt ? REBOOT_PHASE_LINES[step.rebootAt] : undefined;
      if ((REBOOT_FAULTS as readonly string[]).includes(step.fault) && rebootLine?.test(upOutput)) {
        // Booting takes the simulated host about 10 s idle; a campaign's parallel sequences on two
        // cores made it pass the harness's default 60 s (seed 4143, seq. 27): the harness's own
        // patience, not a bound of the tool, which waits for a group's node rebootSeconds.
        during = hosts.reboot(this.host.name, { kind: step.fault === "power-cut" ? "power-cut" : "clean", bootTimeoutMs: REBOOT_BOOT_MS }).catch((e: Error) => (harnessError = `the harness could not reboot ${this.host.name}: ${e.message.split("\n")[0]}`));
      }
      // The wall clock steps, a second operator starts `up` of this stack, as the up enters the phase drawn.
      if (step.fault === "clock-step" && step.clockStep && step.phaseAt && REBOOT_PHASE_LINES[step.phaseAt].test(upOutput)) during = this.stepClock(step.clockStep).catch((e: Error) => (harnessError = e.message));
      if (step.fault === "racing-operators" && step.phaseAt && REBOOT_PHASE_LINES[step.phaseAt].test(upOutput)) during = this.race(step.stack).then((r) => (racer = r));
      // The rollback's host step is SIGKILLed (the OOM killer, an operator) once it runs.
      if (step.fault === "killed-rollback" && /rolling back/.test(upOutput)) during = this.killRollbackStep().then((u) => (killedRollback = u));
      // A local user takes the host lock while readiness waits on the load that hangs.
      if (step.fault === "foreign-lock" && step.lockHolder === "nobody" && /sglang-ready (updating|creating)/.test(upOutput)) {
        during = this.holdLock("foreign-lock", "nobody").then(
          (held) => (foreignHeld = held),
          (e: Error) => (harnessError = e.message),
        );
      }
    };
    const timed = armed && (TIMED_FAULTS as readonly string[]).includes(step.fault) && step.atSeconds !== undefined ? { fault: step.fault as TimedFault, atSeconds: step.atSeconds, atOutput: step.atOutput } : undefined;
    const bound = stepBoundSeconds();
    const r = await this.operate("up", step.stack, timed, watch, events, bound + HUNG_UP_GRACE_SECONDS);
    const upEndedAt = Date.now();
    upEnded = true;
    await steady;
    await during;
    // Undone before the checks: what comes back by itself may write, and the next step meets the host as it was
    // (lazily: a process started meanwhile may still hold a file there).
    const pidsAfterUp = readOnly ? await this.pids() : undefined;
    if (readOnly) await this.onNodes(`unmount ${readOnly}`, `umount -l ${readOnly}`, [this.host]);
    if (armed && step.fault === "locale" && step.locale) await this.hostLocale(null);
    if (clockHooked) await this.clockHook(false);
    // Cleared: the hung commands answer, the lock holders end. A foreign lock's hung load stays
    // through the checks: what serves then is what the rollback left, not a load let go on.
    if (step.fault === "stalled-node0" || step.fault === "foreign-lock") await this.releaseLock(step.fault);
    if (step.fault !== "foreign-lock") hosts.fault(faulted.name, "{}");
    const outcomes = await Promise.all(requests);
    const rebooted = (REBOOT_FAULTS as readonly string[]).includes(step.fault) && during !== undefined;
    // The step that took the host lock removed what a power cut left; this step's own power cut leaves its copies.
    if (/holding \S+'s lock/.test(upOutput)) this.copiesExcused = false;
    if (rebooted && step.fault === "power-cut") this.copiesExcused = true;
    // A failed first install (nothing proven to roll back to) may leave nothing serving.
    // With no known-good (nothing proven since the last destroy, or ever) a failed up has
    // nothing to roll back to: it may leave nothing serving, even where a configuration that
    // never passed readiness served before it (a failed first install's, left as it was).
    // A killed rollback may leave nothing serving, where the up said so (HOST DOWN, or a rollback interrupted with nothing serving yet).
    const saidDown = killedRollback !== undefined && /HOST DOWN|ROLLBACK INTERRUPTED/.test(r.message);
    // Nothing served before an up refused before it stopped anything (an earlier step said HOST DOWN): nothing may serve after it (seed 6060, seq. 8).
    const stillDown = !r.ok && this.proven === null && /Preflight failed|nothing was stopped/.test(r.message);
    const violations = await this.check(allowedAfter(this.proven, attempted, r.ok, r.message, this.knownGood), `${output}\n${r.message}`, undefined, false, (!r.ok && this.knownGood === null) || saidDown || stillDown);
    if (step.fault === "foreign-lock") hosts.fault(faulted.name, "{}");
    if (harnessError) violations.push(harnessError);
    if (r.hungIn !== undefined) violations.push(`up did not end by itself: killed by the runner ${HUNG_UP_GRACE_SECONDS} s past its bound of ${bound} s, in phase ${r.hungIn}`);
    else if (r.seconds > bound) violations.push(`up took ${r.seconds.toFixed(0)} s, past its bound of ${bound} s (the stacks' deadlines, lock wait, a restart and a rollback, plus ${STEP_MARGIN_SECONDS} s for the engine)`);
    if (r.ok) this.knownGood = this.proven;
    // Requests die with a host that reboots: the cut is the reboot's, not the rollout's.
    if (outcomes.includes("cut") && !s.proceed && !rebooted) violations.push(`a request the server had accepted was cut (${outcomeCounts(outcomes)}); drainPolicy is "fail"`);
    // Observing is not deciding: an up whose only trouble is one the rollout rides out (none,
    // sshd unreachable for a few seconds while weights load, a slow load, a late SIGTERM, a
    // stale old server, sessions dropped before or after the restart) succeeds, unless its
    // change is one the host refuses (a flag it lacks, a tpSize it cannot hold) or the two
    // stacks' units (renamed apart) compete for the GPUs.
    // A root process not of this tool that holds the lock for less than the lock wait is waited for.
    // A host whose locale is not C, a wall clock that steps, a second operator held off by the lock: ridden out too.
    const ridesOut = ["none", "ssh-outage-loading", "slow-load", "late-sigterm", "stale-server", "locale", "clock-step", "racing-operators"].includes(step.fault) || rootHoldsLock || !armed || (step.fault === "read-only-path" && !readOnly);
    if (readOnly) {
      // A folder the restart writes is read-only: preflight refuses the change before anything stops, naming it.
      if (r.ok) violations.push(`up succeeded although ${readOnly} was read-only`);
      else if (!/cannot be written: .*read-only file system/.test(r.message) && !competing && !/is being reconfigured by/.test(r.message)) violations.push(`up with ${readOnly} read-only failed, but not in preflight on that folder: ${r.message.split("\n").find((l) => /FAILED|error: (?!update failed)/.test(l))?.trim().slice(0, 300) ?? r.message.slice(0, 300)}`);
      if (pidsAfterUp !== pidsBeforeUp) violations.push(`up with ${readOnly} read-only stopped or restarted a server (main pids ${pidsBeforeUp} -> ${pidsAfterUp}); preflight should have refused it first`);
    }
    if (killedRollback) {
      // The rollback's host step SIGKILLed: the up says what the node runs now, with no shell error.
      if (r.ok) violations.push(`up succeeded although its rollback's host step ${killedRollback} was killed`);
      else if (!/HOST DOWN|ROLLBACK INTERRUPTED|ROLLBACK FAILED|Rolled back/.test(r.message)) violations.push(`the rollback's host step ${killedRollback} was killed and up did not say what the node runs now: ${r.message.slice(0, 300)}`);
      if (/No such file or directory/.test(r.message)) violations.push(`a killed rollback printed a shell error: ${r.message.split("\n").find((l) => /No such file/.test(l))?.trim().slice(0, 200)}`);
    }
    if (racer) {
      // The second operator is held off by the stack's lock, told who holds it, and cancels nothing.
      if (RACER_CANCELLED.test(racer.out)) violations.push(`the second operator's up cancelled or broke the first one's lock: ${racer.out.split("\n").find((l) => RACER_CANCELLED.test(l))?.trim().slice(0, 200)}`);
      if (racer.code === 0 && racer.updatingAt !== undefined && racer.updatingAt < upEndedAt) violations.push("two ups of one stack ran at once: the second operator's update began before the first one ended");
      if (racer.code !== 0 && racer.endedAt < upEndedAt && !(RACER_LOCKED.test(racer.out) && RACER_NAMED.test(racer.out))) violations.push(`the second operator's up ended while the first one ran, without saying the stack is locked and by whom: ${racer.out.trim().split("\n").slice(-3).join(" | ").slice(0, 300)}`);
      if (racer.code === null) violations.push(`the second operator's up did not end within ${RACER_MS / 1000} s (killed by the runner)`);
    }
    if (rootHeld && /waiting for .* to finish with this host/.test(upOutput) && !/not a dflash-sglang deployment/.test(upOutput)) violations.push("up waited for a host lock held by a process not of this tool without naming it (pid, user, command)");
    const handover = this.node1 !== undefined && lostBefore && /is being reconfigured by .*proving its restart/.test(r.message);
    this.lastStepLost = !r.ok && r.fired === true;
    if (!r.ok && ridesOut && !step.badFlag && !step.badTp && !handover && !(competing && /holds the GPUs that .* needs; nothing was stopped/.test(r.message))) violations.push(`up failed although nothing but ${step.fault === "none" || !armed ? "the change" : `the fault ${step.fault}`} happened: ${r.message.split("\n").find((l) => /FAILED|error: (?!update failed)/.test(l))?.trim().slice(0, 300) ?? r.message.slice(0, 300)}`);
    const did = rolloutOps(events);
    // An engine that may be killed runs as a CLI process of its own, whose events are not
    // read: what it did is unknown, and the comparison is skipped.
    const sawEvents = timed?.fault !== "pulumi-killed";
    if (previewed && r.ok && sawEvents && previewed.join(", ") !== did.join(", ")) violations.push(`preview said up would run [${previewed.join(", ") || "nothing"}], up ran [${did.join(", ") || "nothing"}]`);
    const cause = r.ok
      ? undefined
      : r.hungIn !== undefined
        ? `killed by the runner at ${r.seconds.toFixed(0)} s (hung in ${r.hungIn})`
        : r.fired && step.fault === "pulumi-killed"
          ? `pulumi SIGKILLed at ${step.atOutput ? `/${step.atOutput}/` : `${step.atSeconds} s`}`
          : (r.message.split("\n").find((l) => /(FAILED|error: (?!update failed))/.test(l)) ?? r.message.slice(0, 200)).trim().slice(0, 240);
    const moment = ["ssh-outage-loading", "sessions-dropped-rollback", "foreign-lock", "clock-step", "racing-operators", ...REBOOT_FAULTS].includes(step.fault);
    const fired =
      step.fault === "killed-rollback" && armed ? !!killedRollback : step.fault === "read-only-path" && armed ? readOnly !== undefined : timed ? r.fired : rootHeld !== undefined ? rootHeld : armed && moment ? during !== undefined : undefined;
    const phase =
      r.phase ??
      (rebooted
        ? step.rebootAt
        : foreignHeld !== undefined
          ? `readiness, ${foreignHeld ? "held by nobody" : "refused to nobody"}`
          : rootHeld !== undefined
            ? `before the up, ${rootHeld ? "held by root" : "not taken by root"}`
            : racer
              ? `${step.phaseAt}, the second operator's up ${racer.code === 0 ? (racer.updatingAt !== undefined ? "ran after it" : "ended") : RACER_LOCKED.test(racer.out) ? "refused on the lock" : `failed (exit ${racer.code})`}`
              : step.fault === "clock-step" && during !== undefined
                ? `${step.phaseAt}, clock ${step.clockStep}`
                : undefined);
    return { step, ok: r.ok, armed, ...(fired !== undefined ? { fired } : {}), ...(phase ? { phase } : {}), cause, requests: outcomes, violations, upSeconds: r.seconds, ...(r.hungIn !== undefined ? { hung: true } : {}) };
  }
}

export function describe(s: Step): string {
  if (s.op === "destroy" && s.fault) return `destroy ${s.stack}, fault ${s.fault} at ${s.atSeconds} s`;
  if (s.op !== "up") return `${s.op} ${s.stack}`;
  const extras = [s.token && `hfToken ${s.token}`, s.rename && "renamed unit", s.badFlag && "unknown flag", s.badTp && "tpSize too large", s.otherPort && "other ssh port", s.servicePort && "service port toggled", s.proceed && "drainPolicy toggled", s.previewFirst && "preview first"].filter(Boolean);
  return `up ${s.stack} -> ${s.config}, key ${s.key}, fault ${s.fault}${s.rebootAt && !s.atOutput ? ` in ${s.rebootAt}` : ""}${s.lockHolder ? ` by ${s.lockHolder}` : ""}${s.readOnly ? ` on ${s.readOnly}` : ""}${s.locale ? ` ${s.locale}` : ""}${s.clockStep ? ` ${s.clockStep}` : ""}${s.phaseAt ? ` in ${s.phaseAt}` : ""}${s.atOutput ? ` at /${s.atOutput}/${s.atSeconds !== undefined ? ` or ${s.atSeconds} s` : ""}` : s.atSeconds !== undefined ? ` at ${s.atSeconds} s` : ""}${extras.length ? ` (${extras.join(", ")})` : ""}`;
}

/**
 * One sequence on fresh hosts (node 1 too for a group), from a baseline `up` of stack a;
 * stops at its first violated step. `projectRoot` runs another checkout's program (to show a
 * regression case failing before its fix).
 */
export async function runSequence(start: StartHost, stop: (name: string) => Promise<void>, label: string, shape: { group: boolean; sudo?: boolean }, steps: Step[], say: (l: string) => void, projectRoot?: string): Promise<SequenceResult> {
  const started = Date.now();
  const { group } = shape;
  const name = `campaign-${process.pid}-${label.replace(/[^A-Za-z0-9-]/g, "-")}`.slice(0, 60);
  const names = group ? [name, `${name}-n1`] : [name];
  // Through sudo: root may not log in, and deploy may run only what the README's sudoers lines allow.
  const sim = { sglang: { profile: "ddtree-fork" as const, loadSeconds: 2, warmupSeconds: 0.3 }, ...(shape.sudo ? { sudoers: sudoersFor("deploy") } : {}) };
  const [host, node1] = await Promise.all(names.map((n) => start(n, sim)));
  const ws = simWorkspace(Object.fromEntries(STACKS.map((s) => [s, SequenceRunner.baseConfig(host, node1, s === "a" ? "b8t4-w2048" : "b4t4-w2048")])), { projectRoot });
  const result: SequenceResult = { label, group, sudo: shape.sudo === true, steps: [], violations: [], seconds: 0 };
  const seq = new SequenceRunner(host, node1, ws, label.replace(/[^A-Za-z0-9]/g, ""));
  try {
    result.violations.push(...(await seq.baseline()).map((v) => `baseline: ${v}`));
    for (const [i, step] of steps.entries()) {
      if (result.violations.length) break;
      // The harness's own failure (a host it could not set up) ends the sequence, kept with its
      // journals and counted against the run (never dropped), instead of ending the campaign.
      const rec = await seq.run(step).catch((e: Error): StepRecord => ({ step, ok: false, seconds: 0, requests: [], violations: [`the harness failed, not the tool (the sequence ends here): ${e.message.split("\n").slice(0, 6).join(" | ")}`] }));
      result.steps.push(rec);
      say(`  [${label}.${i + 1}] ${describe(step)}${rec.fired === false ? " (its moment never came)" : ""}: ${rec.ok ? "ok" : `failed (${rec.cause})`} in ${rec.seconds.toFixed(1)} s${rec.requests.length ? `, requests ${outcomeCounts(rec.requests)}` : ""}${rec.violations.length ? `; VIOLATED: ${rec.violations.join("; ")}` : ""}`);
      result.violations.push(...rec.violations.map((v) => `step ${i + 1} (${describe(step)}): ${v}`));
    }
  } finally {
    if (result.violations.length) result.journal = await journals([host, ...(node1 ? [node1] : [])], seq.engineLog);
    ws.cleanup();
    await Promise.all(names.map((n) => stop(n)));
  }
  result.seconds = (Date.now() - started) / 1000;
  return result;
}

/**
 * What the hosts' journals say about our units and host steps, saved beside a violated
 * sequence's record (bench/out/campaign/) so that a finding can be read without a replay.
 */
async function journals(nodes: hosts.HostInfo[], engineLog: string): Promise<string | undefined> {
  const dir = path.join(process.cwd(), "bench", "out", "campaign");
  const parts: string[] = [];
  for (const [i, h] of nodes.entries()) {
    const r = await hosts
      .ssh(h, `systemctl list-units --all --no-legend --plain '${UNIT}*' 'dflash-*'; echo; journalctl --no-pager -o short-precise -u '${UNIT}*' -u 'dflash-*' | tail -n 2000`, { timeoutMs: 30_000 })
      .catch((e: Error) => ({ stdout: `(could not read: ${e.message})` }));
    parts.push(`==== node ${i} (${h.name}, ${h.address}) ====\n${r.stdout}`);
  }
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${nodes[0].name}.journal.txt`);
  fs.writeFileSync(file, parts.join("\n"));
  // What the engine said, step by step (our progress lines, the FAILED and HOST DOWN lines).
  fs.writeFileSync(path.join(dir, `${nodes[0].name}.engine.txt`), engineLog);
  return path.relative(process.cwd(), file);
}

/** A regression case: a sequence that once broke an invariant, kept in test/campaign/cases/. */
export interface RegressionCase {
  name: string;
  /** Where it comes from (an issue's sequence, or the campaign's seed and index). */
  source: string;
  group: boolean;
  /** Through sudo (planCampaignSequence); absent: as root. */
  sudo?: boolean;
  steps: Step[];
  /** What it broke before its fix (and at which revision), for the reader. */
  brokeBefore?: { revision: string; violations: string[] };
}

/** The regression cases of a file or folder (test/campaign/cases), by file name. */
export function readCases(where: string): { file: string; case: RegressionCase }[] {
  const files = fs.statSync(where).isDirectory() ? fs.readdirSync(where).filter((f) => f.endsWith(".json")).sort().map((f) => path.join(where, f)) : [where];
  return files.map((file) => ({ file, case: JSON.parse(fs.readFileSync(file, "utf8")) as RegressionCase }));
}
