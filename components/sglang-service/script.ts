// Pure rendering of what runs on the host for a reconfiguration, as shell a reviewer can
// read: the staging script (preflight, then the unit and the transaction written to this
// stack's own folder; nothing that runs is touched) and the transaction script (host lock,
// drain, stop, wait for the old process and the GPUs, install, start; rollback; removal).
// `pulumi up` runs them through @pulumi/command; see sglangService.ts. The scripts' bodies are
// the files of host/; here only their values are chosen (hostScript.ts quotes them).
import { Deployment } from "./schema";
import { DRAIN_EXIT_MARGIN_SECONDS, extraArgsFlags, gpuIndices, HELPER_DIR, launchFlags, usesCredentials, HOLD_DROP_IN, startTimeoutSeconds, HIDDEN_FLAG_ALIASES, SECRETS_DIR, secretPaths, SecretPresence, STATE_DIR, unitPath } from "./render";
import { hostFile, HostValue, renderHostScript } from "./hostScript";

/** How long a host whose GPUs stayed busy past their deadline waits for them before it gives up on starting the previous configuration. */
export const RECOVER_SECONDS = 3600;
/** How often the readiness step renews its claim on a restart it proves (the transaction's \`prove\`). */
export const KEEPER_BEAT_SECONDS = 5;
/**
 * How long a claim renewed by the readiness step lasts: past it, with no renewal, nobody proves
 * that restart (its engine was killed) and its rollout note holds no one off. It covers a dropped
 * session of that step: noticed within 15 s (ServerAliveInterval 5 x 3), taken again after a
 * 1 s pause and a connection of up to 10 s (ConnectTimeout), with room to spare.
 */
export const KEEPER_GRACE_SECONDS = 60;

/**
 * A group's barrier (issue 41, item 2). A group restarts as one: node 1's old rank ends with
 * node 0's old server, so a node that stops its old rank while another node is still taking
 * its lock (or checking, or stalled) aborts the serving group and cuts node 0's requests with
 * nobody to count them. So the restart of a group is driven from one place (the provider,
 * remote/group-restart.ts) in two phases over one transaction per node: each node takes its
 * lock, runs its checks and reads its secrets, then says `@@prepared` and waits for a `go`
 * line on its stdin; the provider sends `go` to every node only once every node (node 0
 * too) has said it, and otherwise `abort` (or nothing: a node whose stdin closes, because the
 * provider or its session went away, never gets a go), so that a stall anywhere fails the group
 * before anything stops. The lock stays held across both phases by the one process: no other
 * deployment can come between a node's checks and its stop.
 *
 * The seconds the slowest node may take to get there, beyond its lock wait
 * (safety.lockWaitSeconds): an SSH session and the host step's start, a few systemctl reads and
 * its secrets. The provider's bound on the preparation is groupPrepareSeconds.
 */
export const GROUP_PREPARE_MARGIN_SECONDS = 60;
/**
 * How much longer a prepared node waits for its go than the provider waits for the slowest
 * node: the provider, which knows every node, always decides (and says why) first, and a go
 * sent at its deadline still reaches a node in time.
 */
export const GROUP_GO_GRACE_SECONDS = 30;

/**
 * A group's second barrier: after its go, a node stops its old rank, says `@@stopped`, and
 * starts its new rank only once the provider, which has heard `@@stopped` (or the end) from
 * every node, sends `start`. Otherwise a node with nothing to stop (node 0 stopped by hand, its
 * ranks elsewhere restarted by systemd and waiting for it) would start its new rank at once,
 * and another node's old rank, still waiting, could join it. How long a node waits for its
 * start: every node has stopped within two drains and stops of the go (a further node waits
 * for node 0's, then stops its own), plus the grace. Past it, or when the provider's session
 * ends, the node starts its new rank anyway (the group comes back as before; readiness, or the
 * next `up`, proves it).
 */
export function groupStartWaitSeconds(t: Pick<Deployment["timeouts"], "drainSeconds" | "stopSeconds">): number {
  return groupStopSeconds(t) + GROUP_GO_GRACE_SECONDS;
}

/** How long the provider waits for every node of a group to be prepared (lock, checks, secrets). */
export function groupPrepareSeconds(lockWaitSeconds: number): number {
  return Math.ceil(lockWaitSeconds) + GROUP_PREPARE_MARGIN_SECONDS;
}

/**
 * What a node of a group may take after its go, at most: a further node waits for its old rank
 * to end with node 0's server (node 0's drain deadline and its kill's exit), then stops its own
 * (the same again), waits for its GPUs and starts the new rank. Anything past it is a host step
 * that hung; the provider then says so (what the hosts did is read by the next `up`).
 */
export function groupFinishSeconds(t: Pick<Deployment["timeouts"], "drainSeconds" | "stopSeconds" | "gpuReleaseSeconds">): number {
  return groupStopSeconds(t) + Math.ceil(t.gpuReleaseSeconds) + GROUP_PREPARE_MARGIN_SECONDS;
}

/** By when every node of a group has stopped its old rank after the go: a further node waits for node 0's drain and exit, then stops its own. */
function groupStopSeconds(t: Pick<Deployment["timeouts"], "drainSeconds" | "stopSeconds">): number {
  return 2 * (Math.ceil(t.drainSeconds) + DRAIN_EXIT_MARGIN_SECONDS + Math.ceil(t.stopSeconds));
}

/**
 * What the host keeps that must not outlive a reboot, because it speaks of processes a reboot
 * ends: the lock and its note (a holder), the note of a rollout being proven and its claim
 * (renewed by a live readiness step). /run is a tmpfs, empty after every boot.
 */
export const RUN_DIR = "/run/dflash-sglang";

/**
 * When the transaction last removed each unit (one file a unit, the time in seconds): on disk,
 * because it must outlive a reboot; in /run (RUN_DIR/removed) a reboot cleared it and a stack
 * whose unit another stack's destroy had removed read as a first install, so its next `up`
 * changed nothing while nothing served (issue 41, item 4). Readers also take the /run mark an
 * older version wrote (removedMarkPaths). Everything else the transaction keeps is on disk too
 * (STATE_DIR: the stage, the known-good record, a rename's marker, a group's failure mark).
 * Its own folder beside STATE_DIR, not in it: it stays after a destroy (a few bytes a unit), so
 * that a stack whose unit this was still reads it, while a destroy removes all of STATE_DIR.
 */
export const REMOVED_DIR = `${STATE_DIR}-removed`;

/** Where the "removed at" mark of a unit may be, newest layout first (an older version wrote it in /run). */
export function removedMarkPaths(unitName: string): string[] {
  return [`${REMOVED_DIR}/${unitName}`, `${RUN_DIR}/removed/${unitName}`];
}

/**
 * The unit's helpers (its ExecStartPre and ExecStartPost), installed under HELPER_DIR:
 * wait-gpus-free (GPUs released, read by host/gpu-busy.awk, the one GPU reading of every
 * reader) and wait-ready.
 */
export function helperScripts(): Record<string, string> {
  return {
    "wait-gpus-free": renderHostScript({ shebang: "#!/usr/bin/env bash", about: [], set: "-u", values: { gpu_busy_awk: { text: hostFile("gpu-busy.awk") } }, files: ["wait-gpus-free.sh"] }),
    "wait-ready": renderHostScript({ shebang: "#!/usr/bin/env bash", about: [], set: "-u", values: {}, files: ["wait-ready.sh"] }),
  };
}

/** This stack's own folder on the host: staging here never changes what another stack installs. */
export function stageDir(unitName: string, stack: string): string {
  return `${STATE_DIR}/${unitName}/stacks/${stack}`;
}

export function transactionPath(unitName: string, stack: string): string {
  return `${stageDir(unitName, stack)}/transaction.sh`;
}

/** The secret files a deployment has, in the order the transaction reads them from stdin. */
export function secretFileOrder(unitName: string, secrets: SecretPresence): string[] {
  const p = secretPaths(unitName);
  return [...(secrets.apiKey ? [p.serverConfig, p.curlHeaders] : []), ...(secrets.hfToken ? [p.env] : [])];
}

/**
 * Removes this stack's stage folder, then whatever is left empty, and the shared helpers
 * once no stack of any unit is staged on the host and no unit file names them
 * (host/stage-removal.sh). Run after the transaction's `remove`.
 */
export function renderStageRemoval(unitName: string, stack: string): string {
  return renderHostScript({
    about: [`dflash-sglang: remove the staging of ${unitName} for stack ${stack}.`],
    set: "-u",
    values: { stage: stageDir(unitName, stack), state: `${STATE_DIR}/${unitName}`, state_root: STATE_DIR, helper_dir: HELPER_DIR, units_dir: unitPath("x").replace(/\/x\.service$/, "") },
    files: ["stage-removal.sh"],
  });
}

export interface StageInput {
  label: string;
  /** Address of the node, as the user configured it (for messages). */
  host: string;
  stack: string;
  unitName: string;
  unitText: string;
  transaction: string;
  helpers: Record<string, string>;
  python: string;
  flags: string[];
  /** The flags of \`flags\` that only model.extraArgs names (render.ts extraArgsFlags): the user's, reported as such. */
  extraFlags?: string[];
  paths: { what: string; path: string }[];
  /** The GPUs (nvidia-smi indices) this node's server uses (render.ts gpuIndices). */
  gpus: number[];
  /** Bounds of the host commands preflight runs (timeouts.commandSeconds, timeouts.helpSeconds). */
  bounds: CommandBounds;
  /** service.runAs: the user the server runs as ("root" when unset). */
  runAs?: string;
  /** Whether the unit hands secret files to that user as systemd credentials (render.ts usesCredentials). */
  credentials?: boolean;
}

/** How long one host command may take (schema.ts timeouts.commandSeconds, timeouts.helpSeconds). */
export interface CommandBounds {
  commandSeconds: number;
  helpSeconds: number;
}

/** What preflight checks on a node: the one that will run this configuration. */
export type PreflightInput = Pick<StageInput, "label" | "host" | "stack" | "unitName" | "python" | "flags" | "extraFlags" | "paths" | "gpus" | "bounds" | "runAs" | "credentials">;

/** Pure: what preflight checks for deployment \`d\` on the node at \`host\` (its address), labelled \`label\`. */
export function preflightInput(d: Deployment, stack: string, label: string, host: string, presence: SecretPresence): PreflightInput {
  const paths = [
    { what: "model.path", path: d.model.path },
    ...(d.speculative.algorithm !== null && d.model.drafterPath ? [{ what: "model.drafterPath", path: d.model.drafterPath }] : []),
    { what: "service.workingDirectory", path: d.service.workingDirectory },
  ];
  return {
    label,
    host,
    stack,
    unitName: d.service.unitName,
    python: d.service.python,
    flags: launchFlags(d, presence),
    extraFlags: extraArgsFlags(d, presence),
    paths,
    gpus: gpuIndices(d),
    bounds: { commandSeconds: d.timeouts.commandSeconds, helpSeconds: d.timeouts.helpSeconds },
    runAs: d.service.runAs,
    credentials: presence.apiKey && usesCredentials(d),
  };
}

/**
 * A host command run with a bound: killed (TERM, then KILL 5 s later) past \`seconds\`, when
 * it exits 124 (or 137). Every command that talks to the driver or to systemd runs so: a
 * wedged one fails its step, naming it, instead of holding \`up\` forever.
 */
export function bounded(seconds: number, command: string): string {
  return `timeout -k 5 ${Math.ceil(seconds)} ${command}`;
}

/** Pure: the values of the preflight checks (host/checks.sh), shared by the staging script and the stand-alone preflight. */
function preflightValues(s: PreflightInput): Record<string, HostValue> {
  // A canonical flag that older releases spell otherwise (the spelling they hide from --help):
  // when the host lacks it, the problem names the older spelling a flag map can use.
  const olderSpelling = new Map(Object.entries(HIDDEN_FLAG_ALIASES).map(([alias, canonical]) => [canonical, alias]));
  return {
    label: s.label,
    host: s.host,
    python: s.python,
    help_s: Math.ceil(s.bounds.helpSeconds),
    cmd_s: Math.ceil(s.bounds.commandSeconds),
    flags: s.flags,
    flag_canonicals: s.flags.map((f) => HIDDEN_FLAG_ALIASES[f] ?? ""),
    flag_olders: s.flags.map((f) => (HIDDEN_FLAG_ALIASES[f] ? "" : (olderSpelling.get(f) ?? ""))),
    flag_sources: s.flags.map((f) => (s.extraFlags?.includes(f) ? "model.extraArgs" : "")),
    closest_awk: { text: hostFile("closest.awk") },
    paths: s.paths.map((p) => p.path),
    path_whats: s.paths.map((p) => p.what),
    gpus: s.gpus.join(","),
    gpu_count: s.gpus.length,
    // GPUs chosen by CUDA_VISIBLE_DEVICES (not 0..n-1): each of them must be one nvidia-smi lists.
    gpus_chosen: !s.gpus.every((g, i) => g === i),
    run_as: s.runAs ?? "root",
    credentials: s.credentials === true,
    write_dirs: WRITTEN_DIRS.map(([dir]) => dir),
    write_whats: WRITTEN_DIRS.map(([, what]) => what),
    write_min_kib: WRITE_MIN_KIB,
  };
}

/** Every folder a restart and its rollback write on a node, and what it holds (host/checks.sh check_writable). */
const WRITTEN_DIRS: readonly (readonly [string, string])[] = [
  [HELPER_DIR, "the unit's helper scripts"],
  ["/etc/systemd/system", "the unit files"],
  [STATE_DIR, "the configurations' generations"],
  [SECRETS_DIR, "the secret files"],
  [RUN_DIR, "the host lock and rollout notes"],
];

/** Free space a restart needs where it writes: its generation (unit, helpers, secrets) and the previous one's, with a wide margin. */
const WRITE_MIN_KIB = 10 * 1024;

/**
 * Check before you stop: the preflight alone (reads only), run on the node that will run
 * the configuration before anything of the stack's current unit is touched, also where the
 * unit moves (service.unitName, host.address or host.port changed: the old unit's teardown
 * comes next). A host that cannot run the new configuration keeps serving the old one.
 */
export function renderPreflightScript(s: PreflightInput): string {
  return renderHostScript({
    about: [`dflash-sglang: preflight of ${s.unitName} for stack ${s.stack} on ${s.host} (reads only).`],
    set: "-uo pipefail",
    values: preflightValues(s),
    files: ["checks.sh", "preflight.sh"],
  });
}

/**
 * Preflight (reads only), then the unit, the transaction and the helpers written to this
 * stack's folder (the transaction installs the helpers, under the host's lock) and the unit
 * checked by systemd-analyze (host/stage.sh). Fails before writing anything if the host
 * cannot run the configuration.
 */
export function renderStageScript(s: StageInput): string {
  const names = Object.keys(s.helpers).sort();
  return renderHostScript({
    about: [`dflash-sglang: stage ${s.unitName} for stack ${s.stack} on ${s.host}.`],
    set: "-uo pipefail",
    values: {
      ...preflightValues(s),
      stage: stageDir(s.unitName, s.stack),
      stack: s.stack,
      unit_name: s.unitName,
      helper_dir: HELPER_DIR,
      helper_names: names,
      helper_texts: { texts: names.map((n) => s.helpers[n]) },
      unit_text: { text: s.unitText },
      transaction_text: { text: s.transaction },
    },
    files: ["checks.sh", "stage.sh"],
  });
}

export interface TransactionInput {
  label: string;
  /** Address of the node, as the user configured it (for messages). */
  host: string;
  stack: string;
  unitName: string;
  /** Node rank: 0 serves and drains; the others end with node 0's old server. */
  rank: number;
  timeouts: Deployment["timeouts"];
  lockWaitSeconds: number;
  /** How long the note of an unproven rollout keeps other stacks off the host. */
  proveSeconds: number;
  /**
   * How long a new rollout note holds before the readiness step first renews it: the moments
   * until that step starts, after every node's restart (in a group, the slowest node's lock
   * wait, drain, stop and GPU release).
   */
  handoverSeconds: number;
  rollback: boolean;
  secrets: SecretPresence;
  /** The GPUs (nvidia-smi indices) this node's server uses (render.ts gpuIndices). */
  gpus: number[];
  /** Longest a single host command (systemctl, journalctl, nvidia-smi) may take. */
  commandSeconds: number;
  /** The unit's TimeoutStartSec (render.ts startTimeoutSeconds): a rollback's blocking start waits at most this. */
  startSeconds: number;
  /** Nodes of the group (1: a single host). A group restarts, and rolls back, as one. */
  groupSize: number;
  /** In a group: how long a prepared node waits for the provider's go before it gives up, having stopped nothing. */
  barrierSeconds: number;
  /** service.port: recorded in each generation (host/generations.sh). */
  port: number;
  /** safety.keepGenerations: how many of the newest generations a host keeps, besides the known-good and the current. */
  keepGenerations: number;
}

export function transactionInput(d: Deployment, stack: string, label: string, rank: number, host: string, secrets: SecretPresence): TransactionInput {
  return {
    label,
    host,
    stack,
    unitName: d.service.unitName,
    rank,
    timeouts: d.timeouts,
    lockWaitSeconds: d.safety.lockWaitSeconds,
    proveSeconds: Math.ceil(d.timeouts.readySeconds + d.safety.stableSeconds + d.timeouts.gpuReleaseSeconds + 120),
    // In a group: how much later than this node the slowest node's restart may end (its lock
    // wait, drain, stop and GPU release; the nodes' restarts run at once). Not covered: a node
    // whose unit also moves, whose teardown comes first.
    handoverSeconds: KEEPER_GRACE_SECONDS + (d.nodes.length > 0 ? Math.ceil(groupPrepareSeconds(d.safety.lockWaitSeconds) + d.timeouts.drainSeconds + DRAIN_EXIT_MARGIN_SECONDS + d.timeouts.stopSeconds + d.timeouts.gpuReleaseSeconds) : 0),
    rollback: d.safety.rollback,
    secrets,
    gpus: gpuIndices(d),
    commandSeconds: d.timeouts.commandSeconds,
    startSeconds: startTimeoutSeconds(d.timeouts),
    groupSize: 1 + d.nodes.length,
    barrierSeconds: groupPrepareSeconds(d.safety.lockWaitSeconds) + GROUP_GO_GRACE_SECONDS,
    port: d.service.port,
    keepGenerations: d.safety.keepGenerations,
  };
}

/**
 * Pure: the longest a host step of the transaction can run, by construction: the lock wait,
 * two drains and stops (a rename's old unit after this one), the GPU wait, a rollback (its
 * GPU wait and blocking start), and a bounded systemctl or journalctl call for every poll
 * those waits may make, capped at 60 calls (each poll is one call; most answer in
 * milliseconds, and a hung one costs commandSeconds once before it fails the step). The step
 * runs under systemd's RuntimeMaxSec of this plus a margin: a backstop, since every wait and
 * command inside is bounded already.
 */
export function transactionBoundSeconds(x: Pick<TransactionInput, "lockWaitSeconds" | "commandSeconds" | "startSeconds"> & { timeouts: Pick<Deployment["timeouts"], "drainSeconds" | "stopSeconds" | "gpuReleaseSeconds"> }): number {
  const t = x.timeouts;
  const drainStop = Math.ceil(t.drainSeconds) + DRAIN_EXIT_MARGIN_SECONDS + Math.ceil(t.stopSeconds);
  return Math.ceil(x.lockWaitSeconds + 2 * drainStop + 2 * t.gpuReleaseSeconds + x.startSeconds + 60 * x.commandSeconds);
}

/**
 * The host-side transaction. Modes:
 *   restart HASH [force]  lock, drain, stop, wait for the old process and the GPUs, install
 *                  the staged unit (its sha256 must be HASH) and this stack's secrets (stdin),
 *                  start; nothing when it already runs with these secrets, unless forced
 *   rollback HASH  put the known-good generation back whole and start it (HASH failed)
 *   good HASH      the live unit's generation is proven (note on stdin): it becomes the
 *                  known-good, old ones are pruned; prints @@generation N; end the rollout
 *   release        end this stack's rollout without recording anything
 *   prove [TOKEN]  (the readiness step's own session) renew this stack's claim on its rollout
 *                  note until stdin closes: while claimed, the note keeps the others off
 *   start-when-free HASH   (run by systemd-run after a GPU deadline) wait for the GPUs,
 *                  then start the unit if it is still HASH
 *   remove [UNIT [MACHINE]]  drain, stop and remove the unit, if the host still runs this
 *                  stack's. UNIT: the stack's unit is now UNIT on this machine (renamed, or
 *                  reached by another address; MACHINE: only if /etc/machine-id is MACHINE),
 *                  and the known-good generation is kept for it, under its name
 * Output lines are progress; a restart prints one `@@result {json}` line, then a last line for people.
 */
export function renderTransaction(x: TransactionInput): string {
  const t = x.timeouts;
  const files = secretFileOrder(x.unitName, x.secrets);
  const all = secretPaths(x.unitName);
  const everySecret = [all.serverConfig, all.curlHeaders, all.env];
  return renderHostScript({
    about: [
      `dflash-sglang host-side transaction: ${x.unitName}, stack ${x.stack}, node ${x.rank}; staged by \`pulumi up\`.`,
      "  restart HASH [force] | rollback HASH | good HASH | release | prove | remove [UNIT [MACHINE-ID]]",
    ],
    set: "-uo pipefail",
    values: {
      label: x.label,
      host: x.host,
      unit: `${x.unitName}.service`,
      stack: x.stack,
      rank: x.rank,
      group_size: x.groupSize,
      stage: stageDir(x.unitName, x.stack),
      state_root: STATE_DIR,
      state: `${STATE_DIR}/${x.unitName}`,
      secrets_dir: SECRETS_DIR,
      // This stack's secret files, in the order stdin carries them; those it does not have; all of the unit's.
      secret_files: files,
      absent_secrets: everySecret.filter((p) => !files.includes(p)),
      every_secret: everySecret,
      // What a unit's secret file names add to the unit's name (render.ts secretPaths).
      secret_suffixes: everySecret.map((p) => p.slice(`${SECRETS_DIR}/${x.unitName}`.length)),
      helper_dir: HELPER_DIR,
      live: unitPath(x.unitName),
      run: RUN_DIR,
      removed_dir: REMOVED_DIR,
      drain_deadline: Math.ceil(t.drainSeconds) + DRAIN_EXIT_MARGIN_SECONDS,
      drain_s: t.drainSeconds,
      drain_policy: t.drainPolicy,
      stop_s: t.stopSeconds,
      gpu_s: t.gpuReleaseSeconds,
      gpu_free_mib: t.gpuFreeMiB,
      gpus: x.gpus.join(","),
      cmd_s: Math.ceil(x.commandSeconds),
      start_s: x.startSeconds,
      step_max_s: transactionBoundSeconds(x),
      poll: (t.pollMs / 1000).toFixed(3),
      lock_wait: Math.ceil(x.lockWaitSeconds),
      prove_s: x.proveSeconds,
      rollback_on: x.rollback ? "yes" : "no",
      recover_s: RECOVER_SECONDS,
      keeper_beat: KEEPER_BEAT_SECONDS,
      keeper_grace: KEEPER_GRACE_SECONDS,
      handover_s: x.handoverSeconds,
      barrier_s: x.barrierSeconds,
      start_wait_s: groupStartWaitSeconds(t),
      hold_root: "/run/systemd/system",
      hold_drop_in: HOLD_DROP_IN,
      port: x.port,
      keep_gens: x.keepGenerations,
      gpu_busy_awk: { text: hostFile("gpu-busy.awk") },
      drain_count_awk: { text: hostFile("drain-count.awk") },
    },
    files: ["lock.sh", "generations.sh", "transaction.sh"],
  });
}
