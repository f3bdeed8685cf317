// Pure rendering of what runs on the host for a reconfiguration, as shell a reviewer can
// read: the staging script (preflight, then the unit and the transaction written to this
// stack's own folder; nothing that runs is touched) and the transaction script (host lock,
// drain, stop, wait for the old process and the GPUs, install, start; rollback; removal).
// `pulumi up` runs them through @pulumi/command; see sglangService.ts.
import { Deployment } from "./schema";
import { DRAIN_EXIT_MARGIN_SECONDS, GPU_BUSY_AWK, gpuIndices, HELPER_DIR, HOLD_DROP_IN, startTimeoutSeconds, HIDDEN_FLAG_ALIASES, SECRETS_DIR, secretPaths, SecretPresence, shellQuote, STATE_DIR, unitPath } from "./render";

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
 * Bash functions of the host lock, shared by the transaction and the benchmark's hold (which
 * both take it): the folder made root's alone, and who holds the lock. Expects `$run`.
 */
export const LOCK_FUNCTIONS = `# The lock, its note and the rollout's note and claim are root's alone, a 0700 folder of 0600
# files: anyone who can open the lock can take it, and so keep every deployment off the host or
# hold up a rollback. Created so (umask 077); an older version's 0755 folder and 0644 files
# (and any file in it another hand made) are put right here.
run_dir() {
  (umask 077; mkdir -p "$run") || return 1
  if [ "$(stat -c %u "$run")" != 0 ] || [ -n "$(find "$run" -maxdepth 1 \\( ! -user 0 -o -perm /077 \\) -print -quit)" ]; then
    chown -R 0:0 "$run" && chmod -R go= "$run"
  fi
}
# The processes that hold $run/host.lock, lowest pid first: those with an open file of it
# that has the flock (/proc/PID/fdinfo/FD lists a lock of the file description, which the
# process that took it shares with the children it passed it to; /proc/locks names only the
# flock(1) that took it, long gone).
lock_holders() {
  local ino f p
  ino=$(stat -c %i "$run/host.lock" 2>/dev/null) || return 0
  grep -lsE "^lock:[[:space:]]+[0-9]+: FLOCK .*:$ino " /proc/[0-9]*/fdinfo/* 2>/dev/null | while read -r f; do
    p=\${f#/proc/} p=\${p%%/*}
    [ "$(readlink "/proc/$p/fd/\${f##*/}" 2>/dev/null)" = "$run/host.lock" ] && echo "$p"
  done | sort -nu
}
# Who holds the host lock, for one that has to wait: the holder's own note (what it deploys)
# when the process that wrote it holds the lock. Otherwise the lock is held by a process that
# is not ours (or whose note is gone): named by its pid, user and command, and the function
# fails. A note of an older version, which names no process, is taken when root holds the lock.
lock_holder() {
  local text="" pid="" holders p cmd
  { IFS= read -r text; read -r _ pid; } 2>/dev/null < "$run/host.lock.note"
  holders=$(lock_holders)
  if [ -z "$holders" ]; then echo "\${text:-another deployment}"; return 0; fi
  if [ -n "$pid" ] && grep -qxF -- "$pid" <<< "$holders"; then echo "$text"; return 0; fi
  # The first of them whose parent is not one of them: the one that took it (flock(1), not its command).
  for p in $holders; do grep -qxF -- "$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)" <<< "$holders" || break; done
  if [ -z "$pid" ] && [ -n "$text" ] && [ "$(stat -c %u "/proc/$p")" = 0 ]; then echo "$text"; return 0; fi
  # Its command as text a message can carry: printable characters only, at most 200.
  cmd=$(tr '\\0\\n' '  ' < "/proc/$p/cmdline" 2>/dev/null | tr -cd '[:print:]' | cut -c1-200)
  echo "pid $p of user $(stat -c %U "/proc/$p" 2>/dev/null || echo unknown) (\${cmd% }), which is not a dflash-sglang deployment"
  return 1
}`;

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

const heredoc = (path: string, text: string, mode: string): string => {
  const end = "DFLASH_EOF";
  if (text.split("\n").includes(end)) throw new Error(`cannot stage ${path}: its text contains the line ${end}`);
  const tmp = `${path}.dflash-tmp`;
  return [`cat > ${shellQuote(tmp)} <<'${end}'`, text.endsWith("\n") ? text.slice(0, -1) : text, end, `chmod ${mode} ${shellQuote(tmp)} && mv -f ${shellQuote(tmp)} ${shellQuote(path)}`].join("\n");
};

/**
 * Removes this stack's stage folder, then whatever is left empty, and the shared helpers
 * once no stack of any unit is staged on the host and no unit file names them. Run after the
 * transaction's `remove`. A rename's first half leaves the old unit serving (the restart of
 * the new name removes it): its helpers stay, or a crash or a reboot before that restart
 * would find its ExecStartPre gone and leave nothing serving (campaign seed 4143, seq. 64).
 */
export function renderStageRemoval(unitName: string, stack: string): string {
  const q = shellQuote;
  const state = `${STATE_DIR}/${unitName}`;
  const units = unitPath("*").replace(/\*\.service$/, "");
  return [
    `rm -rf ${q(stageDir(unitName, stack))}`,
    `rmdir ${q(`${state}/stacks`)} ${q(state)} 2>/dev/null`,
    `if ! ls -d ${q(STATE_DIR)}/*/stacks/* >/dev/null 2>&1 && ! grep -lqsF -- ${q(`${HELPER_DIR}/`)} ${q(units)}*.service; then rm -rf ${q(HELPER_DIR)}; rmdir ${q(STATE_DIR)} 2>/dev/null; fi`,
    "true",
  ].join("; ");
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
export type PreflightInput = Pick<StageInput, "label" | "host" | "stack" | "unitName" | "python" | "flags" | "paths" | "gpus" | "bounds" | "runAs" | "credentials">;

/**
 * A host command run with a bound: killed (TERM, then KILL 5 s later) past \`seconds\`, when
 * it exits 124 (or 137). Every command that talks to the driver or to systemd runs so: a
 * wedged one fails its step, naming it, instead of holding \`up\` forever.
 */
export function bounded(seconds: number, command: string): string {
  return `timeout -k 5 ${Math.ceil(seconds)} ${command}`;
}

/**
 * Pure: the preflight lines (reads only): the host's SGLang accepts every flag, the paths
 * exist, the node has the GPUs. Exits 1, naming every problem, if the host cannot run the
 * configuration. Shared by the staging script and the stand-alone preflight.
 */
function preflightLines(s: PreflightInput): string[] {
  // A canonical flag that older releases spell otherwise (the spelling they hide from --help):
  // when the host lacks it, the problem names the older spelling a flag map can use.
  const olderSpelling = new Map(Object.entries(HIDDEN_FLAG_ALIASES).map(([alias, canonical]) => [canonical, alias]));
  const flagChecks = s.flags.map((f) => {
    const alias = HIDDEN_FLAG_ALIASES[f];
    const older = olderSpelling.get(f);
    return alias ? `check_flag ${shellQuote(f)} ${shellQuote(alias)}` : older ? `check_flag ${shellQuote(f)} '' ${shellQuote(older)}` : `check_flag ${shellQuote(f)}`;
  });
  return [
    "problems=()",
    `python=${shellQuote(s.python)}`,
    `help=$(${bounded(s.bounds.helpSeconds, '"$python" -m sglang.launch_server --help')} 2>&1)`,
    "help_rc=$?",
    'if [ "$help_rc" = 0 ]; then',
    "  listed=$(printf '%s\\n' \"$help\" | grep -oE -- '--[A-Za-z0-9][A-Za-z0-9-]*' | sort -u)",
    "  unknown=()",
    "  # A here-string, not `printf | grep -q`: grep -q exits at its match, and with pipefail the",
    "  # printf still writing (bash writes line by line) would die of SIGPIPE and fail the test.",
    "  check_flag() { # FLAG [CANONICAL: FLAG is a hidden alias of it] [OLDER: a hidden spelling of FLAG]",
    '    if grep -qxF -- "$1" <<< "$listed"; then return 0; fi',
    '    if [ -n "${2:-}" ] && grep -qxF -- "$2" <<< "$listed"; then',
    '      echo "note: $1 is a deprecated spelling of $2 that SGLang accepts but hides from --help; prefer $2"',
    "      return 0",
    "    fi",
    '    if [ -n "${3:-}" ]; then unknown+=("$1 (older SGLang releases spell it $3 and hide it from --help; a flag map can name that)"); return 0; fi',
    '    unknown+=("$1")',
    "  }",
    ...flagChecks.map((c) => `  ${c}`),
    '  if [ ${#unknown[@]} -gt 0 ]; then',
    '    joined=$(IFS=,; echo "${unknown[*]}")',
    "    # Advice for the case found: a build without DDTree cannot be made to run it by naming",
    "    # another build (sglangBuild: upstream has no DDTREE either); other flags can be mapped.",
    '    if grep -qi -- ddtree <<< "${unknown[*]}" && ! grep -qi -- ddtree <<< "$listed"; then',
    '      problems+=("the installed SGLang has no DDTree: its --help lists no DDTree flag, and this configuration needs ${joined//,/, }. Install the DDTree build of SGLang on the host, or deploy a configuration without DDTree; no sglangBuild setting makes up for a missing algorithm.")',
    "    else",
    '      problems+=("the installed SGLang does not accept ${joined//,/, } (checked against its --help). Set sglangBuild to the build installed on the host (upstream, ddtree-fork or a flag map), or install a build that has these flags.")',
    "    fi",
    "    # A simulated host (npm run simhost) changes its build with one command.",
    "    if [ -f /etc/dflash-sim/sglang.json ]; then",
    '      problems+=("this is a simulated host: \\`npm run simhost -- configure $(hostname) \x27{\\"profile\\":\\"ddtree-fork\\"}\x27\\` gives it the DDTree build (\x27{\\"profile\\":\\"upstream\\"}\x27 the upstream one).")',
    "    fi",
    "  fi",
    'elif [ "$help_rc" = 124 ] || [ "$help_rc" = 137 ]; then',
    `  problems+=("\\\`$python -m sglang.launch_server --help\\\` did not answer within ${Math.ceil(s.bounds.helpSeconds)} s (timeouts.helpSeconds) and was killed: the Python environment hangs on import (a stuck network filesystem, a wedged GPU driver?). Run it by hand on the host, or raise timeouts.helpSeconds if its imports are that slow.")`,
    "else",
    `  problems+=("\\\`$python -m sglang.launch_server --help\\\` failed: $(printf '%s\\n' "$help" | tail -n 3 | paste -sd'|' | sed 's/|/ | /g'). Check service.python points at the Python that has SGLang.")`,
    "fi",
    ...s.paths.map((p) => `[ -d ${shellQuote(p.path)} ] || problems+=(${shellQuote(`${p.what} ${p.path} does not exist on the host.`)})`),
    ...runAsLines(s),
    `gpus=$(${bounded(s.bounds.commandSeconds, "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits")} 2>&1)`,
    "smi_rc=$?",
    'if [ "$smi_rc" = 0 ]; then',
    "  count=$(printf '%s\\n' \"$gpus\" | grep -cE '^[0-9]+, ')",
    ...(isDefaultSelection(s.gpus)
      ? [`  [ "$count" -ge ${s.gpus.length} ] || problems+=("this node needs ${s.gpus.length} GPUs (model.tpSize over the nodes) but the host has $count.")`]
      : [
          // GPUs chosen by CUDA_VISIBLE_DEVICES: each of them must be one nvidia-smi lists.
          `  missing=$(printf '%s\\n' "$gpus" | awk -F', *' -v want=${s.gpus.join(",")} 'BEGIN { n = split(want, g, ",") } /^[0-9]+, / { seen[$1] = 1 } END { for (i = 1; i <= n; i++) if (!(g[i] in seen)) printf "%s%s", (k++ ? "," : ""), g[i] }')`,
          `  [ -z "$missing" ] || problems+=("this node's server uses GPUs ${s.gpus.join(",")} (service.environment.CUDA_VISIBLE_DEVICES) but nvidia-smi lists no GPU $missing (the host has $count).")`,
        ]),
    'elif [ "$smi_rc" = 124 ] || [ "$smi_rc" = 137 ]; then',
    `  problems+=("nvidia-smi did not answer within ${Math.ceil(s.bounds.commandSeconds)} s (timeouts.commandSeconds) and was killed: the GPU driver looks wedged. Run nvidia-smi by hand on the host (a driver reload or a reboot may be needed).")`,
    "else",
    '  problems+=("nvidia-smi did not answer as expected: ${gpus:0:200}")',
    "fi",
    "if [ ${#problems[@]} -gt 0 ]; then",
    `  echo ${shellQuote(`Preflight failed for ${s.label} on ${s.host}; nothing was stopped or changed, the current server is untouched:`)} >&2`,
    "  printf '  - %s\\n' \"${problems[@]}\" >&2",
    "  exit 1",
    "fi",
  ];
}

/**
 * Pure: preflight of a server that runs as a user other than root (service.runAs): the user
 * exists, can run service.python and read every path it needs, and, where it gets secrets,
 * systemd can hand them over (LoadCredential=, systemd 247 on). Nothing for root.
 */
function runAsLines(s: PreflightInput): string[] {
  const user = s.runAs ?? "root";
  if (user === "root") return [];
  const u = shellQuote(user);
  const as = (test: string) => bounded(s.bounds.commandSeconds, `runuser -u ${u} -- test ${test}`);
  return [
    `if ! ${bounded(s.bounds.commandSeconds, `id -u ${u}`)} >/dev/null 2>&1; then`,
    `  problems+=(${shellQuote(`service.runAs: the user ${user} does not exist on ${s.host}. Create it (useradd --system ${user}) or name a user that exists.`)})`,
    "else",
    `  ${as(`-x ${shellQuote(s.python)}`)} || problems+=(${shellQuote(`service.runAs: ${user} cannot run service.python ${s.python}.`)})`,
    ...s.paths.map((p) => `  [ ! -d ${shellQuote(p.path)} ] || ${as(`-r ${shellQuote(p.path)} -a -x ${shellQuote(p.path)}`)} || problems+=(${shellQuote(`service.runAs: ${user} cannot read ${p.what} ${p.path} (it needs read and search permission there and on every folder above).`)})`),
    "fi",
    ...(s.credentials
      ? [
          `systemd_version=$(${bounded(s.bounds.commandSeconds, "systemctl --version")} 2>/dev/null | awk 'NR == 1 { print $2 }')`,
          `[ "\${systemd_version:-0}" -ge 247 ] 2>/dev/null || problems+=("service.runAs: ${user} gets the API key as a systemd credential (LoadCredential=), which needs systemd 247 or later; the host has \${systemd_version:-an unknown version}. Run the server as root on this host, or upgrade systemd.")`,
        ]
      : []),
  ];
}

/** Pure: whether the GPUs are 0..n-1 (no CUDA_VISIBLE_DEVICES choice). */
const isDefaultSelection = (gpus: number[]): boolean => gpus.every((g, i) => g === i);

/**
 * Check before you stop: the preflight alone (reads only), run on the node that will run
 * the configuration before anything of the stack's current unit is touched, also where the
 * unit moves (service.unitName, host.address or host.port changed: the old unit's teardown
 * comes next). A host that cannot run the new configuration keeps serving the old one.
 */
export function renderPreflightScript(s: PreflightInput): string {
  return [
    "#!/bin/bash",
    `# dflash-sglang: preflight of ${s.unitName} for stack ${s.stack} on ${s.host} (reads only). Rendered by components/sglang-service/script.ts.`,
    "set -uo pipefail",
    ...preflightLines(s),
    `echo ${shellQuote(`preflight passed for ${s.label} on ${s.host}`)}`,
    "",
  ].join("\n");
}

/**
 * Preflight (reads only), then the unit, the transaction and the helpers written to this
 * stack's folder (the transaction installs the helpers, under the host's lock) and the unit checked by systemd-analyze. Fails before writing anything
 * if the host cannot run the configuration.
 */
export function renderStageScript(s: StageInput): string {
  const dir = stageDir(s.unitName, s.stack);
  const verify = `${dir}/verify`;
  return [
    "#!/bin/bash",
    `# dflash-sglang: stage ${s.unitName} for stack ${s.stack} on ${s.host}. Rendered by components/sglang-service/script.ts.`,
    "set -uo pipefail",
    "# 1. Preflight: the host can run this configuration. Reads only.",
    ...preflightLines(s),
    "# 2. Stage: this stack's folder only; the live unit is not touched.",
    "set -e",
    `mkdir -p ${shellQuote(`${dir}/helpers`)} ${shellQuote(verify)}`,
    ...Object.keys(s.helpers).sort().map((name) => heredoc(`${dir}/helpers/${name}`, s.helpers[name], "0755")),
    heredoc(`${dir}/unit.service`, s.unitText, "0644"),
    heredoc(`${dir}/transaction.sh`, s.transaction, "0755"),
    "# systemd-analyze wants the real unit name: verify a copy in a scratch folder, pointing",
    "# at the staged helpers (the transaction installs them, under the lock).",
    `sed ${shellQuote(`s#${HELPER_DIR}/#${dir}/helpers/#g`)} ${shellQuote(`${dir}/unit.service`)} > ${shellQuote(`${verify}/${s.unitName}.service`)}`,
    `if command -v systemd-analyze >/dev/null; then ${bounded(s.bounds.commandSeconds, `systemd-analyze verify ${shellQuote(`${verify}/${s.unitName}.service`)}`)} || {`,
    "  rc=$?",
    `  [ "$rc" != 124 ] && [ "$rc" != 137 ] || echo ${shellQuote(`FAILED: systemd-analyze verify did not answer within ${Math.ceil(s.bounds.commandSeconds)} s (timeouts.commandSeconds) on ${s.host}; nothing was changed. Check systemd there (systemctl status).`)} >&2`,
    '  exit "$rc"',
    "}; fi",
    `rm -rf ${shellQuote(verify)}`,
    `echo ${shellQuote(`staged ${s.unitName} for stack ${s.stack} in ${dir}`)}`,
    "",
  ].join("\n");
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
 *   rollback HASH  put the last known-good unit back and start it (HASH failed)
 *   good HASH      record the live unit as known-good (note on stdin); end the rollout
 *   release        end this stack's rollout without recording anything
 *   prove [TOKEN]  (the readiness step's own session) renew this stack's claim on its rollout
 *                  note until stdin closes: while claimed, the note keeps the others off
 *   start-when-free HASH   (run by systemd-run after a GPU deadline) wait for the GPUs,
 *                  then start the unit if it is still HASH
 *   remove [UNIT [MACHINE]]  drain, stop and remove the unit, if the host still runs this
 *                  stack's. UNIT: the stack's unit is now UNIT on this machine (renamed, or
 *                  reached by another address; MACHINE: only if /etc/machine-id is MACHINE),
 *                  and the known-good record is kept for it, under its name
 * Output lines are progress; the last line of a restart is `@@result {json}`.
 */
export function renderTransaction(x: TransactionInput): string {
  const t = x.timeouts;
  const unit = `${x.unitName}.service`;
  const files = secretFileOrder(x.unitName, x.secrets);
  const all = secretPaths(x.unitName);
  const everySecret = [all.serverConfig, all.curlHeaders, all.env];
  const absent = everySecret.filter((p) => !files.includes(p));
  const q = shellQuote;
  const v = (name: string, value: string | number) => `${name}=${q(String(value))}`;
  return `#!/bin/bash
# dflash-sglang host-side transaction: ${x.unitName}, stack ${x.stack}, node ${x.rank}.
# Rendered by components/sglang-service/script.ts; staged by \`pulumi up\`; do not edit.
#   restart HASH [force] | rollback HASH | good HASH | release | prove | remove [UNIT [MACHINE-ID]]
set -uo pipefail
${v("label", x.label)}
${v("host", x.host)}
${v("unit", unit)}
${v("stack", x.stack)}
${v("rank", x.rank)}
${v("group_size", x.groupSize)}
${v("stage", stageDir(x.unitName, x.stack))}
${v("state_root", STATE_DIR)}
${v("state", `${STATE_DIR}/${x.unitName}`)}
${v("secrets_dir", SECRETS_DIR)}
${v("live", unitPath(x.unitName))}
${v("run", RUN_DIR)}
${v("removed_dir", REMOVED_DIR)}
${v("drain_deadline", Math.ceil(t.drainSeconds) + DRAIN_EXIT_MARGIN_SECONDS)}
${v("drain_s", t.drainSeconds)}
${v("drain_policy", t.drainPolicy)}
${v("stop_s", t.stopSeconds)}
${v("gpu_s", t.gpuReleaseSeconds)}
${v("gpu_free_mib", t.gpuFreeMiB)}
${v("gpus", x.gpus.join(","))}
${v("cmd_s", Math.ceil(x.commandSeconds))}
${v("start_s", x.startSeconds)}
${v("step_max_s", transactionBoundSeconds(x))}
${v("poll", (t.pollMs / 1000).toFixed(3))}
${v("lock_wait", Math.ceil(x.lockWaitSeconds))}
${v("prove_s", x.proveSeconds)}
${v("rollback_on", x.rollback ? "yes" : "no")}
${v("recover_s", RECOVER_SECONDS)}
${v("keeper_beat", KEEPER_BEAT_SECONDS)}
${v("keeper_grace", KEEPER_GRACE_SECONDS)}
${v("handover_s", x.handoverSeconds)}
${v("barrier_s", x.barrierSeconds)}
${v("start_wait_s", groupStartWaitSeconds(t))}
node0_idle=0
${v("hold_root", "/run/systemd/system")}
gpus_busy=0
replaced=""

# Every call of systemctl, journalctl and systemd-run here is bounded (timeouts.commandSeconds):
# a wedged systemd or journald fails the step, naming the command, instead of holding \`up\`
# forever. Functions of the programs' own names, so that no call below can miss its bound;
# \`timeout\` runs the program itself (it cannot run a function). A call past its bound says so
# on stderr and fails: its answer counts as unknown (running(): still running). The one call
# that waits longer, a rollback's blocking start, has its own bound (start_s). The message goes
# to fd 8, the step's own stderr, even where a caller silences the call's (2>/dev/null).
exec 8>&2
bounded_cmd() {
  timeout -k 5 "$cmd_s" "$@"
  local rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "$label: \\\`$*\\\` did not answer within $cmd_s s on $host (timeouts.commandSeconds) and was killed: is systemd wedged there?" >&8; fi
  return "$rc"
}
systemctl() { bounded_cmd systemctl "$@"; }
journalctl() { bounded_cmd journalctl "$@"; }
systemd-run() { bounded_cmd systemd-run "$@"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
past() { awk -v a="$1" -v b="$(now)" -v s="$2" 'BEGIN { exit !(b - a > s) }'; }
say() { echo "$label: $*"; }
show() { systemctl show "$unit" -p "$1" --value 2>/dev/null; }
# A state that could not be read (systemctl failed or hung) counts as running: never as gone.
running() { local state; state=$(show ActiveState) || return 0; case "$state" in active|activating|reloading|deactivating) return 0 ;; esac; return 1; }
hash_of() { sha256sum "$1" 2>/dev/null | cut -c1-64; }
# "N requests still in flight", from SGLang's own count (null: it logged none).
in_flight() { case "$1" in null|"") echo "what was still in flight (SGLang logged no count)" ;; 1) echo "1 request still in flight" ;; *) echo "$1 requests still in flight" ;; esac; }

# One writer per host: flock(1) on a file in /run, dropped by the kernel if this script
# dies. A stack whose restart is still being proven (the note in $run/rollout) keeps the
# others off the host until it is done or the note expires.
lock() {
  run_dir || { echo "FAILED: could not make $run root's alone (0700) on $host; nothing was changed." >&2; exit 1; }
  # Under umask 077: a lock file that anyone could open, anyone could take.
  local mask started shown=0 holder foreign
  mask=$(umask) && umask 077 && exec 9>>"$run/host.lock" && umask "$mask"
  started=$(now)
  while :; do
    foreign=0
    if flock -n 9; then
      holder=$(rollout_holder)
      [ -z "$holder" ] && break
      flock -u 9
    else
      holder=$(lock_holder) || foreign=1
    fi
    if past "$started" "$lock_wait"; then
      if [ "$foreign" = 1 ]; then echo "FAILED: the deployment lock of $host is held by $holder; waited $lock_wait s for it (safety.lockWaitSeconds). Nothing was changed. It is not a deployment of this tool: end it (or ask whoever started it), then re-run." >&2
      else echo "FAILED: $host is being reconfigured by $holder; waited $lock_wait s for it (safety.lockWaitSeconds). Nothing was changed. Re-run when it is done." >&2; fi
      exit 3
    fi
    if past "$started" "$shown"; then
      say "waiting for $holder to finish with this host ($(since "$started") s of at most $lock_wait s)"
      shown=$(awk -v s="$shown" 'BEGIN { print s + 5 }')
    fi
    sleep 1
  done
  # The note's second line names the process that holds the lock (this script), so that a
  # waiter tells our holder from a process that is not ours (lock_holder).
  umask 077 && printf '%s\\npid %s\\n' "$(whoami_note)" "$BASHPID" > "$run/host.lock.note"; umask "$mask"
  # The note names the holder while the lock is held; gone with it (a SIGKILLed holder's note
  # stays, but is read only while someone holds the lock, and the next holder replaces it).
  at_exit release_note
  sweep_secret_copies
}
${LOCK_FUNCTIONS}
release_note() { rm -f "$run/host.lock.note"; }
# EXIT hooks, run in order (one trap: a second \`trap ... EXIT\` would replace the first).
exit_hooks=()
at_exit() { exit_hooks+=("$1"); trap 'for h in "\${exit_hooks[@]}"; do "$h"; done' EXIT; }
# Says who we are to a stack that has to wait: stack, unit, the operator's address (and SSH
# user, when it came through sudo), since when.
whoami_note() { echo "stack \\"$stack\\" (unit \${unit%.service}, from \${SSH_CLIENT%% *}\${SUDO_USER:+ as $SUDO_USER}, since $(date -u +%FT%TZ))"; }
# Prints who holds the host while their restart is proven (nothing if nobody else does).
# A note counts while its claim ($run/rollout.due: until when) lasts: the restart sets it to
# cover the moments until the readiness step starts, and that step (\`prove\`, in its own SSH
# session) renews it every few seconds while it proves or rolls back. A note whose claim ran out
# has nobody proving it (its engine was killed): it holds no one off. A note without a claim
# (written by an older version of this script) counts until it expires.
rollout_holder() {
  local s u until who due ds du
  [ -f "$run/rollout" ] && read -r s u until who < "$run/rollout" || return 0
  if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then return 0; fi
  # The claim decides when it is this note's (it names the note's stack and unit); a note
  # without one (an older script's, or a claim left by another note) counts until it expires.
  read -r due ds du < "$run/rollout.due" 2>/dev/null || due=""
  if [[ "$due" =~ ^[0-9]+$ ]] && [ "$ds" = "$s" ] && [ "$du" = "$u" ]; then
    if [ "$due" -le "$(date +%s)" ]; then
      echo "the restart of stack $s (\${u%.service}) on $host has had no one proving it since $(date -u -d "@$due" +%FT%TZ) (its engine is gone): not waiting for it" >&2
      return 0
    fi
  elif ! awk -v u="$until" -v n="$(date +%s)" 'BEGIN { exit !(u > n) }'; then
    return 0
  fi
  echo "\${who%)}; proving its restart)"
}
# Writes a claim on this stack's note until $1 (epoch), whole (rename).
claim_until() {
  (umask 077; echo "$1 $stack $unit" > "$run/rollout.due.$$") && mv -f "$run/rollout.due.$$" "$run/rollout.due"
}
# The note that keeps other stacks off while readiness proves this restart, and its first
# claim (written first, each file whole).
begin_rollout() {
  # A restart nobody has proven yet: whatever readiness step proved an earlier one is done with it.
  rm -f "$run/rollout.proved"
  claim_until "$(( $(date +%s) + handover_s ))"
  (umask 077; echo "$stack $unit $(( $(date +%s) + prove_s )) $(whoami_note)" > "$run/rollout.$$") && mv -f "$run/rollout.$$" "$run/rollout"
}
end_rollout() {
  local s u until
  [ -f "$run/rollout" ] && read -r s u until < "$run/rollout" || return 0
  if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then rm -f "$run/rollout" "$run/rollout.due" "$run/rollout.proved"; fi
}

# SGLang's drain lines (tokenizer_manager.py sigterm_watchdog, every 5 s while it drains):
#   Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=[...].
# drain_remaining: the last count in the journal text on stdin (nothing if none).
drain_remaining() { grep -iE 'remaining number of requests [0-9]+' | tail -n 1 | sed -nE 's/.*[Rr]emaining number of requests ([0-9]+).*/\\1/p'; }
# drained_time: when the count first read 0, from \`journalctl -o short-unix\` text on stdin.
drained_time() { grep -iE 'remaining number of requests 0([^0-9]|$)' | head -n 1 | cut -d' ' -f1; }

# Stops the server the way SGLang expects: SIGTERM is its drain (requests in flight finish;
# then it SIGKILLs itself). Bounded by the drain deadline, after which it is killed.
# Once SGLang has logged a count of 0, its drain is over and nothing can be cut: what
# follows is its own exit (SGLang, v0.5.17 on, waits up to 15 s for its schedulers, its HTTP
# frozen meanwhile, after a poll of up to 5 s), which is not killed at the drain deadline, and
# a kill by systemd's TimeoutStopSec then is no cut (killed stays 0).
# Sets drain_seconds, stop_seconds, killed and cut.
stop_server() {
  drain_seconds=0 stop_seconds=0 killed=0 cut=0
  running || return 0
  local pid inv t0 remaining="" last="" shown=0 line drained_at=""
  pid=$(show MainPID) inv=$(show InvocationID) t0=$(now)
  if [ "$rank" != 0 ] && [ "$1" = drain ] && [ "$node0_idle" = 0 ]; then
    # A further node ends with node 0's old server (its collectives abort); wait for that
    # so node 0 can finish what is in flight, then stop it anyway. Past node 0's own drain
    # deadline and its kill's exit: in a group every node starts here at once (the barrier),
    # so node 0 ends its server (and counts what it cuts) before this node would. When node 0
    # serves nothing (its go says \`go idle\`), this rank serves nothing either: stopped at once.
    while running && ! past "$t0" "$(( drain_deadline + \${stop_s%.*} ))"; do sleep "$poll"; done
    t0=$(now)
  fi
  systemctl stop --no-block "$unit"
  while running || { [ "$pid" -gt 0 ] && kill -0 "$pid" 2>/dev/null; }; do
    line=$(journalctl -u "$unit" "_SYSTEMD_INVOCATION_ID=$inv" --since "@\${t0%.*}" -o cat --no-pager 2>/dev/null | drain_remaining)
    [ -n "$line" ] && remaining=$line
    if [ "$killed" = 0 ] && [ "$remaining" != 0 ] && past "$t0" "$drain_deadline"; then
      killed=1 cut=\${remaining:-null}
      say "the drain did not end within $drain_s s (timeouts.drainSeconds); killing the old server, cutting $(in_flight "$remaining")"
      systemctl kill --signal=SIGKILL "$unit"
    fi
    if past "$t0" "$(( drain_deadline + \${stop_s%.*} ))"; then
      echo "FAILED: the server of $label (pid $pid) did not exit within $(( drain_deadline + \${stop_s%.*} )) s of \\\`systemctl stop\\\`, even after being killed (timeouts.drainSeconds + timeouts.stopSeconds); check \\\`systemctl status $unit\\\`" >&2
      return 1
    fi
    local status="SGLang is draining (SIGTERM sent; it checks every 5 s)"
    [ -n "$remaining" ] && status="SGLang is draining ($(in_flight "$remaining"))"
    [ "$remaining" = 0 ] && status="SGLang is draining (0 requests still in flight): the drain is over, SGLang is ending its processes"
    if [ "$status" != "$last" ] || past "$t0" "$shown"; then
      say "stopping: $status ($(since "$t0") s, deadline $drain_deadline s)"
      last=$status shown=$(awk -v s="$(since "$t0")" 'BEGIN { print s + 5 }')
    fi
    sleep "$poll"
  done
  # In a group, a server that ended during its drain with requests in flight, because another
  # node's rank went away (its collectives aborted), cut them: counted like a kill, so that
  # requestsCut says so and drainPolicy "fail" holds.
  if [ "$killed" = 0 ] && [ "$group_size" -gt 1 ] && [ "$remaining" != 0 ] &&
    journalctl -u "$unit" "_SYSTEMD_INVOCATION_ID=$inv" --since "@\${t0%.*}" -o cat --no-pager 2>/dev/null | grep -qE 'communicator was aborted|lost node [0-9]|Connection reset by peer'; then
    killed=1 cut=\${remaining:-null}
    say "the old server was ended by another node's abort during its drain (its collectives aborted), cutting $(in_flight "$remaining")"
  fi
  # SGLang gave up its own drain (tokenizer_manager.py sigterm_watchdog: "Signal SIGTERM received
  # while health check failed. Force exiting." or "... while force shutdown flag set. ...", lines
  # without a count, often before any count): what its last count held is cut, an unknown
  # number where it logged none.
  local forced
  if [ "$killed" = 0 ] && [ "$remaining" != 0 ] &&
    forced=$(journalctl -u "$unit" "_SYSTEMD_INVOCATION_ID=$inv" --since "@\${t0%.*}" -o cat --no-pager 2>/dev/null | grep -oE 'Signal SIGTERM received while .* Force exiting\\.' | tail -n 1) && [ -n "$forced" ]; then
    killed=1 cut=\${remaining:-null}
    case "$forced" in
      *"health check failed"*) say "SGLang gave up its drain (its health check had failed: a stuck scheduler) and exited, cutting $(in_flight "$remaining")" ;;
      *"force shutdown"*) say "SGLang skipped its drain (SGL_FORCE_SHUTDOWN is set in its environment) and exited, cutting $(in_flight "$remaining")" ;;
      *) say "SGLang gave up its drain and exited, cutting $(in_flight "$remaining")" ;;
    esac
  fi
  if [ "$(show Result)" = timeout ] && [ "$killed" = 0 ]; then
    if [ "$remaining" = 0 ]; then
      say "SGLang had drained every request; systemd's stop timeout (TimeoutStopSec) ended its own exit, which cut nothing"
    else
      killed=1 cut=\${remaining:-null}
    fi
  fi
  local total
  total=$(since "$t0")
  drained_at=$(journalctl -u "$unit" "_SYSTEMD_INVOCATION_ID=$inv" --since "@\${t0%.*}" -o short-unix --no-pager 2>/dev/null | drained_time)
  if [ "$killed" = 0 ] && [ -n "$drained_at" ]; then
    drain_seconds=$(awk -v d="$drained_at" -v a="$t0" -v t="$total" 'BEGIN { x = d - a; if (x < 0) x = 0; if (x > t) x = t; printf "%.1f", x }')
  else
    drain_seconds=$total
  fi
  stop_seconds=$(awk -v t="$total" -v d="$drain_seconds" 'BEGIN { printf "%.1f", t - d }')
}

# Waits until this node's GPUs each use at most gpu_free_mib MiB. Sets gpu_seconds.
wait_gpus() {
  local t0 busy="" last="" shown=0
  t0=$(now)
  while :; do
    # A GPU counts as free only when nvidia-smi lists it with a number at most the limit:
    # an empty or [N/A] cell, a missing GPU or a failing (or hung: killed at cmd_s) nvidia-smi
    # all read as busy (render.ts GPU_BUSY_AWK).
    busy=$(timeout -k 5 "$cmd_s" nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2>&1 |
      awk -F', *' -v gpus="$gpus" -v max="$gpu_free_mib" '${GPU_BUSY_AWK}')
    [ -z "$busy" ] && break
    if past "$t0" "$gpu_s"; then
      gpus_busy=1
      echo "FAILED: GPU memory on $host was not released within $gpu_s s after the old server exited ($busy; timeouts.gpuReleaseSeconds). Find the holder with \\\`nvidia-smi --query-compute-apps=pid,used_memory --format=csv\\\`" >&2
      return 1
    fi
    if [ "$busy" != "$last" ] || past "$t0" "$shown"; then
      say "waiting for GPU memory to be released: $busy ($(since "$t0") s, deadline $gpu_s s)"
      last=$busy shown=$(awk -v s="$(since "$t0")" 'BEGIN { print s + 5 }')
    fi
    sleep "$poll"
  done
  gpu_seconds=$(since "$t0")
}

# A group's ranks are started again by systemd when they end by themselves (render.ts,
# Restart=always), and every rank ends when another node's does. While this step stops them (a
# restart after its go, a rollback, a removal), systemd would start an old rank again, to join
# the group's new ones: a runtime drop-in (in /run: a reboot forgets it) holds those restarts
# off from before the barrier until the new unit is installed (install_unit) or the step ends.
hold_dir() { echo "$hold_root/$1.d"; }
hold_restarts() {
  [ "$group_size" -gt 1 ] || return 0
  local u
  at_exit release_holds
  for u in "$@"; do
    [ -n "$u" ] || continue
    mkdir -p "$(hold_dir "$u")" && printf '[Service]\nRestart=no\n' > "$(hold_dir "$u")/${HOLD_DROP_IN}" || return 1
  done
  systemctl daemon-reload
}
# Drops the holds of $unit and of the unit a rename replaces; with "reload", reloads systemd when one was there.
drop_holds() {
  local u dropped=1
  for u in "$unit" "\${replaced:+$replaced.service}"; do
    if [ -n "$u" ] && [ -e "$(hold_dir "$u")/${HOLD_DROP_IN}" ]; then
      rm -f "$(hold_dir "$u")/${HOLD_DROP_IN}"
      rmdir "$(hold_dir "$u")" 2>/dev/null
      dropped=0
    fi
  done
  [ "$dropped" = 0 ] && [ "\${1:-}" = reload ] && systemctl daemon-reload
  true
}
release_holds() { drop_holds reload; }

# Installs this stack's helpers (the unit's ExecStartPre/ExecStartPost) and $1 as the
# live unit, without starting it (and without a hold on its restarts: hold_restarts).
install_unit() {
  drop_holds
  mkdir -p ${q(HELPER_DIR)} && for h in "$stage"/helpers/*; do install -m 0755 "$h" ${q(HELPER_DIR)}/"$(basename "$h")" || return 1; done &&
    install -m 0644 "$1" "$live.dflash-tmp" && mv -f "$live.dflash-tmp" "$live" &&
    systemctl daemon-reload && { systemctl enable "$unit" 2>/dev/null; systemctl reset-failed "$unit" 2>/dev/null; true; }
}
# The same, then starts it without waiting (readiness watches it).
install_start() { install_unit "$1" && systemctl start --no-block "$unit"; }

# When the GPUs stay busy past timeouts.gpuReleaseSeconds: the known-good unit is installed
# now and started by a transient systemd service as soon as the GPUs are free (waiting up to
# recover_s), so the host comes back by itself, and never with an out-of-memory start.
recover_when_free() {
  local recover="dflash-recover-\${unit%.service}"
  install_unit "$state/last-good.service" || return 1
  systemctl reset-failed "$recover.service" 2>/dev/null
  systemd-run --unit "$recover" --collect --quiet --no-block --description "dflash-sglang: start \${unit%.service} once its GPUs are free" bash "$stage/transaction.sh" start-when-free "$(hash_of "$live")" ||
    return 1
  echo "RECOVERING: the GPUs of $host are still busy, so the previous configuration ($(known_good)) is installed and will start by itself as soon as they are free (waiting up to $recover_s s in $recover.service; follow it with \\\`journalctl -fu $recover\\\`). The new configuration was not started." >&2
}

# This stack's secrets, one base64 line per file on stdin (never on a command line), read
# into new files beside the live ones; the live ones change only when installed.
read_secrets() {
  mkdir -p ${q(SECRETS_DIR)} && chmod 0700 ${q(SECRETS_DIR)} || return 1
  local line
${files.map((p) => `  IFS= read -r line && (umask 077; printf '%s' "$line" | base64 -d > ${q(`${p}.dflash-new`)}) || return 1`).join("\n") || "  :"}
}
secrets_changed() {
${[...files.map((p) => `  cmp -s ${q(`${p}.dflash-new`)} ${q(p)} || return 0`), ...absent.map((p) => `  [ ! -e ${q(p)} ] || return 0`)].join("\n")}
  return 1
}
install_secrets() {
${files.map((p) => `  mv -f ${q(`${p}.dflash-new`)} ${q(p)} || return 1`).join("\n") || "  :"}
${absent.length ? `  rm -f ${absent.map(q).join(" ")}` : "  :"}
}
# What read_secrets left that was not installed (a restart that failed or changed nothing):
# no copy of a secret stays behind.
drop_new_secrets() { rm -f ${everySecret.map((p) => q(`${p}.dflash-new`)).join(" ")}; }
# Copies of secrets that only a holder of the lock writes (read_secrets, the known-good's
# save and restore), of any unit and any stack: whatever is there when the lock is taken, a
# step that died without its EXIT hook left (SIGKILL, a power cut); this run wrote none yet.
sweep_secret_copies() {
  local f
  for f in "$secrets_dir"/*.dflash-new "$secrets_dir"/*.dflash-tmp "$state_root"/*/last-good.secrets.dflash-tmp; do
    [ -e "$f" ] || continue
    rm -rf "$f" && say "removed $f, a copy of a secret that an interrupted step left" >&2
  done
}
# The secret files of unit NAME that exist, the live ones and any copy of them, one a line.
secret_files_of() {
  local f c
  for f in ${(["serverConfig", "curlHeaders", "env"] as const).map((k) => `"$secrets_dir/$1${secretPaths("X")[k].slice(`${SECRETS_DIR}/X`.length)}"`).join(" ")}; do
    for c in "$f" "$f.dflash-new" "$f.dflash-tmp"; do [ ! -e "$c" ] || echo "$c"; done
  done
  [ ! -e "$state_root/$1/last-good.secrets" ] || echo "$state_root/$1/last-good.secrets"
}
# A removal's last check: no secret file of unit NAME is left (removed now if one is), or it fails naming them.
no_secrets_left() {
  local left f
  left=$(secret_files_of "$1")
  [ -z "$left" ] && return 0
  while IFS= read -r f; do rm -rf "$f"; done <<< "$left"
  left=$(secret_files_of "$1")
  [ -z "$left" ] && return 0
  echo "FAILED: could not remove the secret files of $1 on $host: $(paste -sd' ' <<< "$left"); remove them by hand." >&2
  return 1
}

# The secret files the known-good configuration ran with, kept with its unit (a 0700 folder
# of 0600 files): a rollback brings the whole configuration back, with its own secrets, not
# the unit with whatever secrets the failed configuration left (a key it removed or rotated).
save_known_good_secrets() {
  local keep="$state/last-good.secrets" f
  rm -rf "$keep.dflash-tmp" && (umask 077; mkdir -p "$keep.dflash-tmp") || return 1
  for f in ${everySecret.map(q).join(" ")}; do
    [ ! -f "$f" ] || (umask 077; cp -f "$f" "$keep.dflash-tmp/\${f##*/}") || return 1
  done
  rm -rf "$keep" && mv "$keep.dflash-tmp" "$keep"
}
restore_known_good_secrets() {
  local keep="$state/last-good.secrets" f
  # A record made by a version that kept no secrets with it: the live ones stay.
  [ -d "$keep" ] || return 0
  mkdir -p "$secrets_dir" && chmod 0700 "$secrets_dir" || return 1
  for f in ${everySecret.map(q).join(" ")}; do
    if [ -f "$keep/\${f##*/}" ]; then (umask 077; cp -f "$keep/\${f##*/}" "$f.dflash-tmp") && mv -f "$f.dflash-tmp" "$f" || return 1
    else rm -f "$f"; fi
  done
}

# Removes the secret files of unit NAME (render.ts secretPaths): named, never globbed (a
# unit's name may be another's with a dot and more after it).
rm_secret_files() { rm -f ${(["serverConfig", "curlHeaders", "env"] as const).map((k) => `"$secrets_dir/$1${secretPaths("X")[k].slice(`${SECRETS_DIR}/X`.length)}"`).join(" ")}; }

# When $unit was removed, on disk (it must outlive a reboot; REMOVED_DIR in script.ts): a stack
# whose unit this was reads "removed at T" (observe.ts), not the "no unit" of its first install,
# so its next \`up\` puts its unit back. An older version's mark in /run goes: this one is newer.
mark_removed() {
  mkdir -p "$removed_dir" && date +%s > "$removed_dir/\${unit%.service}.dflash-tmp" && mv -f "$removed_dir/\${unit%.service}.dflash-tmp" "$removed_dir/\${unit%.service}"
  rm -f "$run/removed/\${unit%.service}"
}

# The unit a rename of this stack's unit on this machine left serving for this restart to
# replace (remove's marker in $state/replaces), if it is still installed and this stack's.
replaced_unit() {
  local r f
  [ -f "$state/replaces" ] || return 1
  r=$(cat "$state/replaces") f="\${live%/*}/$(cat "$state/replaces").service"
  if [ -n "$r" ] && [ "$r.service" != "$unit" ] && [ -f "$f" ] && [ "$(sed -n 's/^X-DFlash-Stack=//p' "$f")" = "$stack" ]; then echo "$r"; return 0; fi
  # The folder is the unit name's, which stacks may share: another stack's marker stays for
  # that stack; only a marker whose unit is gone is dropped.
  if [ -z "$r" ] || [ ! -f "$f" ]; then rm -f "$state/replaces" "$state/replaced.transaction.sh"; fi
  return 1
}

# Drains and stops the server this restart replaces: this unit's, or the one a rename left
# serving, which is then removed (its configuration is this unit's known-good now). Sets what
# stop_server sets.
stop_old() {
  # This unit first, if it runs (another stack's under the same name, or a recovery's).
  stop_server drain || return 1
  [ -n "$replaced" ] || return 0
  local u=$unit l=$label r=0 k=$killed c=$cut
  unit=$replaced.service label="$replaced (stack $stack)"
  stop_server drain || r=1
  # What either drain cut counts.
  [ "$k" = 1 ] && [ "$killed" = 0 ] && killed=1 cut=$c
  if ! running; then
    systemctl disable "$unit" 2>/dev/null
    rm -f "\${live%/*}/$unit"
    rm_secret_files "$replaced"
    rm -rf "$state_root/$replaced/last-good.service" "$state_root/$replaced/last-good.json" "$state_root/$replaced/last-good.secrets" "$state_root/$replaced/rollbacks" "$state_root/$replaced/group-failed"
    rmdir "$state_root/$replaced" 2>/dev/null
    mark_removed
    systemctl daemon-reload
    systemctl reset-failed "$unit" 2>/dev/null
    rm -f "$state/replaces" "$state/replaced.transaction.sh"
    say "removed $replaced, which \${u%.service} replaces"
  fi
  unit=$u label=$l
  return $r
}

# "NAME (stack S)" of a server of ours other than $unit that is active or starting on this
# node (a unit file that names its stack); fails when there is none.
other_server() {
  local f n
  for f in "\${live%/*}"/*.service; do
    n=\${f##*/}
    if [ "$n" = "$unit" ] || [ "$n" = "$replaced.service" ] || [ ! -f "$f" ] || ! grep -q '^X-DFlash-Stack=' "$f"; then continue; fi
    case "$(systemctl is-active "$n" 2>/dev/null)" in
    active|activating|reloading) echo "\${n%.service} (stack $(sed -n 's/^X-DFlash-Stack=//p' "$f"))"; return 0 ;;
    esac
    # Not running yet, but its recovery waits for the GPUs to start it (recover_when_free).
    case "$(systemctl is-active "dflash-recover-$n" 2>/dev/null)" in
    active|activating) echo "\${n%.service} (stack $(sed -n 's/^X-DFlash-Stack=//p' "$f"))"; return 0 ;;
    esac
  done
  return 1
}
other_stack() { local s=\${1##*(stack }; echo "\${s%)}"; }

# "stack S, unit H" of the last configuration that passed readiness.
known_good() { echo "stack $(sed -nE 's/.*"stack":"([^"]*)".*/\\1/p' "$state/last-good.json" 2>/dev/null), unit $(hash_of "$state/last-good.service" | cut -c1-12)"; }

# The unit is renamed $1 on this node (service.unitName changed): the last configuration that
# passed readiness stays this stack's known-good under the new name (the lines that name the
# unit: its description, journal identifier and secret files, renamed), so that a new
# configuration that fails rolls back to it rather than leaving the host down. A name that
# already has a known-good record keeps its own.
carry_known_good() {
  local to="$state_root/$1" re
  [ -f "$state/last-good.service" ] && [ -f "$state/last-good.json" ] || return 0
  [ -e "$to/last-good.service" ] && return 0
  # The old name as a sed pattern: unit names hold letters, digits, '_', '@', '-' and '.'.
  re=\${unit%.service}; re=\${re//./[.]}
  mkdir -p "$to" || return 1
  sed -e "s#^Description=SGLang $re (#Description=SGLang $1 (#" -e "s#^SyslogIdentifier=$re\\$#SyslogIdentifier=$1#" -e "s#$secrets_dir/\${re}[.]#$secrets_dir/$1.#g" "$state/last-good.service" > "$to/last-good.service.dflash-tmp" &&
    sed -e "s#$secrets_dir/\${re}[.]#$secrets_dir/$1.#g" "$state/last-good.json" > "$to/last-good.json.dflash-tmp" &&
    mv -f "$to/last-good.service.dflash-tmp" "$to/last-good.service" && mv -f "$to/last-good.json.dflash-tmp" "$to/last-good.json" || return 1
  # Its secret files too, under the new name (<unit>.secrets.yaml -> <new>.secrets.yaml, ...).
  if [ -d "$state/last-good.secrets" ]; then
    local f
    rm -rf "$to/last-good.secrets" && (umask 077; mkdir -p "$to/last-good.secrets") || return 1
    for f in "$state/last-good.secrets"/*; do
      [ -e "$f" ] || continue
      f=\${f##*/}
      (umask 077; cp -f "$state/last-good.secrets/$f" "$to/last-good.secrets/$1.\${f#"\${unit%.service}".}") || return 1
    done
  fi
  echo "kept the previous configuration ($(known_good)) as the known-good of $1, the unit's new name: a new configuration that fails rolls back to it"
}

# Back to the last configuration that passed readiness, started without waiting.
restore_known_good() {
  mkdir -p "$state/rollbacks" && echo "$(date -u +%FT%TZ) $1" >> "$state/rollbacks/$1"
  if [ "$rollback_on" != yes ]; then echo "Rollback is off (safety.rollback=false): $label is left as it is; check it now."; return 2; fi
  if [ ! -f "$state/last-good.service" ]; then
    echo "HOST DOWN: $host has no earlier configuration of \${unit%.service} that passed readiness, so there is nothing to roll back to. The failed unit is left as it is (\\\`systemctl status \${unit%.service}\\\`); fix the configuration and run \\\`pulumi up\\\` again."
    return 2
  fi
  if [ "$(hash_of "$state/last-good.service")" = "$1" ]; then echo "HOST DOWN: the failed configuration is the last known-good one of \${unit%.service} on $host; nothing older to restore."; return 2; fi
  say "restoring the previous configuration"
  systemctl kill --signal=SIGKILL "$unit" 2>/dev/null
  systemctl stop "$unit" 2>/dev/null
  restore_known_good_secrets || { echo "ROLLBACK FAILED, HOST DOWN: could not put back the secret files of the previous configuration of \${unit%.service} on $host (in $state/last-good.secrets)."; return 2; }
  # GPUs found busy past their deadline already: do not wait for them a second time.
  if [ "$gpus_busy" = 1 ] || ! wait_gpus; then
    recover_when_free || echo "ROLLBACK FAILED, HOST DOWN: the GPUs of $host stayed busy and the previous configuration of \${unit%.service} could not be installed for a start once they are free (disk full? systemd?); nothing serves. Check \\\`df\\\` and \\\`systemctl status\\\` there, then run \\\`pulumi up\\\` again."
    return 3
  fi
  # The old server is stopped by now: a failure to put the previous configuration back (a
  # full disk, a wedged systemd) leaves nothing serving, and says so.
  install_start "$state/last-good.service" || {
    echo "ROLLBACK FAILED, HOST DOWN: could not install and start the previous configuration of \${unit%.service} on $host (disk full? systemd?); nothing serves. Check \\\`df\\\` and \\\`systemctl status \${unit%.service}\\\` there, then run \\\`pulumi up\\\` again."
    return 2
  }
}

# A group's barrier (script.ts GROUP_PREPARE_MARGIN_SECONDS): this node holds its lock and has
# passed its checks; it stops nothing until the provider, which has heard the same from every
# node of the group, node 0 included, sends \`go\` on stdin. Anything else (\`abort\`, the end of
# stdin, nothing within barrier_s) ends this restart with nothing stopped, and the lock with it.
# group_phase: where a node of a group is, for the provider to name a node that stalls.
group_phase() { [ "$group_size" -gt 1 ] && echo "@@phase $*"; true; }
# Node 0 says whether it serves (\`@@prepared idle\` when no old server runs there): the
# further nodes' go then says so (\`go idle\`), and they do not wait for their ranks to end with
# a server node 0 does not have.
await_go() {
  local word="" rc
  if [ "$rank" = 0 ] && [ "$before_pid" = 0 ]; then echo "@@prepared idle"; else echo "@@prepared"; fi
  say "ready to stop the old server: waiting for every node of the group to be too (at most $barrier_s s)"
  IFS= read -r -t "$barrier_s" word
  rc=$?
  [ "$rc" = 0 ] && [ "$word" = "go idle" ] && node0_idle=1 && return 0
  [ "$rc" = 0 ] && [ "$word" = go ] && return 0
  if [ "$rc" = 0 ]; then echo "FAILED: the group's restart was called off before anything stopped (another node failed or stalled before it was ready to stop; the provider names it); nothing was stopped on $host." >&2
  elif [ "$rc" -gt 128 ]; then echo "FAILED: $label waited $barrier_s s for the group's go and got none (safety.lockWaitSeconds + margins); nothing was stopped on $host. Run \\\`pulumi up\\\` again." >&2
  else echo "FAILED: the session that drives the group's restart ended before its go (the engine stopped, or the connection dropped); nothing was stopped on $host. Run \\\`pulumi up\\\` again." >&2; fi
  return 1
}

# The group's second barrier (script.ts groupStartWaitSeconds): this node's old rank is
# stopped; its new one starts only once every node's is, when the provider sends \`start\`.
# Without a word within start_wait_s, or when the provider's session ends, it starts anyway,
# and says so.
await_start() {
  local word="" rc
  echo "@@stopped"
  say "old server stopped: waiting for every node of the group to stop theirs before starting the new one (at most $start_wait_s s)"
  IFS= read -r -t "$start_wait_s" word
  rc=$?
  [ "$rc" = 0 ] && [ "$word" = start ] && return 0
  if [ "$rc" -gt 128 ]; then say "no word from the provider within $start_wait_s s that every node has stopped; starting the new configuration anyway (readiness proves the group)"
  else say "the session that drives the group's restart ended before every node had stopped; starting the new configuration anyway (readiness, or the next \\\`pulumi up\\\`, proves the group)"; fi
}

main() {
# Once started, every step finishes even if \`pulumi\` (and so our SSH session) goes away: no
# step dies on its next line of output, or on the hang-up, half-way (a rollback that has
# stopped the new server, a remove that has stopped the old one). The next \`up\` or
# \`refresh\` reads what it left.
trap '' PIPE HUP
case "\${1:-}" in
restart)
  want=\${2:?usage: restart HASH}
  [ "$(hash_of "$stage/unit.service")" = "$want" ] || { echo "FAILED: the unit staged for stack $stack is not $want (restaged by another run of this stack?); nothing was changed. Run \\\`pulumi up\\\` again." >&2; exit 1; }
  group_phase "taking the host lock (safety.lockWaitSeconds = $lock_wait s)"
  lock
  group_phase "checking the node (holding its lock)"
  say "holding $host's lock (on the host, as \${DFLASH_HOST_STEP:-this session}: if this connection drops, the restart goes on here under the lock, and the next \\\`pulumi up\\\` proves what it left)"
  replaced=$(replaced_unit) || replaced=""
  before_pid=$(show MainPID)
  # A unit installed but stopped (by hand, or failed) is no first install: said so below.
  had_unit=$(hash_of "$live")
  if [ -n "$replaced" ] && [ "$before_pid" = 0 ]; then
    before_pid=$(systemctl show "$replaced.service" -p MainPID --value 2>/dev/null)
    say "$replaced, which this unit replaces (a rename), still serves: it is this restart's old server"
  fi
  # In a group, the readiness step reads why a node failed from this command's output.
  [ "$group_size" -gt 1 ] && exec 2>&1 8>&1
  rm -f "$state/group-failed"
  at_exit drop_new_secrets
  # Check before you stop: another server of ours on this node holds the GPUs this unit needs
  # (every unit of ours uses the node's GPUs from GPU 0), and it is not the unit this restart
  # replaces. Started beside it, the new unit would wait for GPUs that are never freed.
  if other=$(other_server); then
    echo "FAILED: $other runs on $host and holds the GPUs that \${unit%.service} (stack $stack) needs; nothing was stopped. Remove it first (\\\`npx pulumi destroy --stack $(other_stack "$other")\\\`), or give stack $stack the same service.unitName so that \\\`up\\\` replaces it." >&2
    # In a group too: it is found before the barrier, so no node has stopped anything.
    exit 1
  fi
  group_phase "reading the secrets from stdin"
  read_secrets || { echo "FAILED: could not read the secret files of $unit from stdin; nothing was stopped." >&2; exit 1; }
  if [ "\${3:-}" != force ] && [ "$(hash_of "$live")" = "$want" ] && running && ! secrets_changed; then
    # Already live with these secrets (e.g. a retry, or an upgrade of this tool): nothing to
    # restart; readiness proves it again. (Installing identical secret files changes nothing.)
    install_secrets
    begin_rollout
    say "$host already runs this unit with these secrets (pid $before_pid); nothing to restart"
    echo "@@result {\\"applied\\":false,\\"drainSeconds\\":0,\\"stopSeconds\\":0,\\"requestsCut\\":0,\\"gpuReleaseSeconds\\":0,\\"previousMainPid\\":$before_pid,\\"at\\":$(date +%s)}"
    exit 0
  fi
  if [ "$group_size" -gt 1 ]; then
    hold_restarts "$unit" "\${replaced:+$replaced.service}" || { echo "FAILED: could not hold off systemd's restarts of $unit on $host (a runtime drop-in under /run/systemd/system); nothing was stopped." >&2; exit 1; }
    await_go || exit 1
  fi
  if stop_old; then
    if [ "$killed" = 1 ] && [ "$drain_policy" = fail ] && [ "$rank" = 0 ]; then
      echo "FAILED: the drain deadline (timeouts.drainSeconds = $drain_s s) ended the old server, cutting $(in_flight "$cut"); timeouts.drainPolicy is \\"fail\\", so the new configuration is not started. Retry when traffic is lower, raise timeouts.drainSeconds, or set timeouts.drainPolicy to \\"proceed\\"." >&2
      failed=1
    else
      [ "$killed" = 1 ] && say "the drain deadline (timeouts.drainSeconds = $drain_s s) ended the old server, cutting $(in_flight "$cut"); timeouts.drainPolicy is \\"proceed\\": starting the new configuration"
      if [ "$group_size" -gt 1 ]; then await_start; fi
      wait_gpus && install_secrets && install_start "$stage/unit.service" && failed=0 || failed=1
    fi
  else
    failed=1
  fi
  if [ "$failed" = 1 ] && [ "$group_size" -gt 1 ]; then
    # A group restarts as one: this node does not roll back alone (its old rank could not
    # join the others' new ones). It leaves a mark and says @@failed; the readiness step,
    # which runs after every node's restart, puts the whole group back (rollback clears it).
    echo "$want $(date +%s)" > "$state/group-failed"
    say "FAILED; the group rolls back as one"
    echo "@@failed"
    exit 0
  fi
  if [ "$failed" = 1 ]; then
    if [ "$rollback_on" = yes ]; then say "FAILED; rolling back"; else say "FAILED"; fi
    if restore_known_good "$want"; then
      # "active" is serving: the unit's ExecStartPost waits for a generation (render.ts).
      if timeout -k 5 "$start_s" systemctl start "$unit"; then echo "Rolled back: the previous configuration ($(known_good)) is back and serving on $host (\\\`systemctl status \${unit%.service}\\\`)." >&2
      else echo "ROLLBACK FAILED, HOST DOWN: the previous configuration of \${unit%.service} on $host did not start again: $(systemctl show "$unit" -p Result --value)." >&2; fi
    fi
    exit 1
  fi
  # Other stacks stay off this host until readiness has proven (or rolled back) this restart.
  begin_rollout
  if [ "$before_pid" = 0 ] && [ -n "$had_unit" ]; then say "no server ran before (\${unit%.service} was installed but stopped); GPUs free in $gpu_seconds s; started the new unit"
  elif [ "$before_pid" = 0 ]; then say "no server ran before (a first install); GPUs free in $gpu_seconds s; started the new unit"
  else say "old server (pid $before_pid) drained in $drain_seconds s and gone $stop_seconds s later, GPUs free in $gpu_seconds s; started the new unit"; fi
  echo "@@result {\\"applied\\":true,\\"drainSeconds\\":$drain_seconds,\\"stopSeconds\\":$stop_seconds,\\"requestsCut\\":$cut,\\"gpuReleaseSeconds\\":$gpu_seconds,\\"previousMainPid\\":$before_pid,\\"at\\":$(date +%s)}"
  ;;
rollback)
  lock
  rm -f "$state/group-failed"
  hold_restarts "$unit" || echo "$label: could not hold off systemd's restarts of $unit (a runtime drop-in under /run/systemd/system); rolling back anyway" >&2
  restore_known_good "\${2:?usage: rollback HASH}"
  ;;
good)
  lock
  cp "$live" "$state/last-good.service.dflash-tmp" && mv -f "$state/last-good.service.dflash-tmp" "$state/last-good.service" &&
    cat > "$state/last-good.json.dflash-tmp" && mv -f "$state/last-good.json.dflash-tmp" "$state/last-good.json" &&
    save_known_good_secrets || exit 1
  end_rollout
  ;;
release)
  lock
  end_rollout
  ;;
prove)
  # Run in the readiness step's own SSH session (not as a host step): renews this stack's
  # claim on its rollout note every $keeper_beat s while that step proves (or rolls back) the
  # restart, including a note a second restart of this stack writes meanwhile. Ends when the
  # session does (its stdin closes: the engine ended, was killed, or the session dropped), or
  # when the note has gone (ended by \`good\`, \`release\` or \`remove\`) after it was this
  # stack's. Takes no lock; writes nothing but the claim.
  # TOKEN names the readiness step: the first to prove a restart marks the note as taken up
  # ($run/rollout.proved, kept until the next restart or the note's end), so that a later
  # readiness step (TOKEN of its own) of this stack tells a restart its own \`up\` just made,
  # still to be proven, from one an earlier, killed \`up\` left, whose unit may have died since
  # (handlers.ts parseNodeState): that one is restarted, not waited for.
  token=\${2:-}
  seen=0
  echo "@@keeping"
  while :; do
    s="" u=""
    if [ -f "$run/rollout" ]; then
      read -r s u _ < "$run/rollout"
      if [ "$s" = "$stack" ] && [ "$u" = "$unit" ]; then
        seen=1
        claim_until "$(( $(date +%s) + keeper_grace ))"
        if [ -n "$token" ] && [ ! -e "$run/rollout.proved" ]; then
          (umask 077; echo "$stack $unit $token" > "$run/rollout.proved.$$") && mv -f "$run/rollout.proved.$$" "$run/rollout.proved"
        fi
      fi
    elif [ "$seen" = 1 ]; then
      break
    fi
    read -r -t "$keeper_beat" _
    rc=$?
    # A line, or a timeout (over 128): the session is there. The end of its input: it is gone.
    if [ "$rc" != 0 ] && [ "$rc" -le 128 ]; then break; fi
  done
  ;;
start-when-free)
  # Run by recover_when_free as a transient systemd service, not over SSH.
  gpu_s=$recover_s
  wait_gpus || exit 1
  # Under the host's lock: another stack's install cannot land between the check of what is
  # installed and the start.
  lock
  if [ "$(hash_of "$live")" != "\${2:?usage: start-when-free HASH}" ]; then echo "$live changed meanwhile; not starting it"; exit 0; fi
  systemctl start --no-block "$unit"
  echo "the GPUs of $host are free: started \${unit%.service} ($(known_good))"
  ;;
remove)
  lock
  # Half of a replacement on this same machine: the known-good record stays the stack's.
  carry=\${2:-}
  if [ -n "$carry" ] && [ -n "\${3:-}" ] && [ "$3" != "$(cat /etc/machine-id 2>/dev/null)" ]; then carry=""; fi
  installed=$(hash_of "$live")
  marker="" new_state=$state
  if [ -z "$installed" ] && replaced=$(replaced_unit); then
    # A rename whose restart never ran (its engine killed between the two): the unit it
    # replaces still serves, and is this stack's; that is what there is to remove.
    marker="$state/replaces"
    unit=$replaced.service live="\${live%/*}/$replaced.service" state="$state_root/$replaced" label="$replaced (stack $stack)"
    installed=$(hash_of "$live")
  fi
  if [ -z "$installed" ]; then
    # Secret files without a unit: a first install cut between its secrets and its unit.
    no_secrets_left "\${unit%.service}" || exit 1
    echo "\${unit%.service} is not installed on $host; nothing to remove"
    exit 0
  fi
  # Owned by the stack its unit names (after a rollback that may be another stack's).
  owner=$(sed -n 's/^X-DFlash-Stack=//p' "$live")
  if [ "$owner" != "$stack" ]; then echo "\${unit%.service} on $host now runs another configuration (stack \${owner:-none}, unit \${installed:0:12}), not this stack's; left the host alone"; exit 0; fi
  # The same unit on this same machine, now reached by another address or port: nothing
  # moves, so nothing stops here. The restart that follows (under this lock) replaces it, or
  # finds it already running, and a failure rolls back to its known-good; an engine killed
  # between the two leaves it serving, never stopped with nothing started.
  if [ "$carry" = "\${unit%.service}" ]; then
    if [ -f "$state/last-good.service" ]; then echo "kept the previous configuration ($(known_good)) as the known-good of \${unit%.service}, now reached by another address or port, and left it running: the restart that follows replaces it"
    else echo "\${unit%.service} on $host is now reached by another address or port: left running; the restart that follows replaces it"; fi
    exit 0
  fi
  # Half of a rename on this machine: the known-good record goes to the new unit name, and
  # the old unit goes on serving; the restart of the new name that follows (under this lock)
  # drains, stops and removes it, in the same host step that starts the new one. An engine
  # killed between the two leaves it serving, never nothing.
  if [ -n "$carry" ]; then
    carry_known_good "$carry" || { echo "FAILED: could not keep the known-good record of \${unit%.service} for $carry on $host; nothing was stopped." >&2; exit 1; }
    # This script, kept beside the marker: the stage folder it lives in goes with the old
    # presence, and a destroy before the new restart runs it (\`remove\`) from there.
    mkdir -p "$state_root/$carry" && cp -f "$0" "$state_root/$carry/replaced.transaction.sh" && echo "\${unit%.service}" > "$state_root/$carry/replaces" || exit 1
    end_rollout
    echo "left \${unit%.service} serving on $host: the restart of $carry that follows drains, stops and removes it, in the host step that starts $carry"
    exit 0
  fi
  hold_restarts "$unit" || { echo "FAILED: could not hold off systemd's restarts of $unit on $host (a runtime drop-in under /run/systemd/system); nothing was stopped." >&2; exit 1; }
  stop_server drain || exit 1
  systemctl disable "$unit" 2>/dev/null
  rm -f "$live" ${everySecret.map(q).join(" ")}
  rm_secret_files "\${unit%.service}"
  # After an interrupted rename: the new name's copy of the known-good record (its secrets too).
  [ -n "$marker" ] && rm -rf "$marker" "\${marker%/*}/replaced.transaction.sh" "$new_state/last-good.service" "$new_state/last-good.json" "$new_state/last-good.secrets"
  drop_new_secrets
  rm -f "$state/group-failed"
  rm -rf "$state/last-good.service" "$state/last-good.json" "$state/last-good.secrets" "$state/rollbacks"
  no_secrets_left "\${unit%.service}" || exit 1
  mark_removed
  rmdir ${q(SECRETS_DIR)} 2>/dev/null
  systemctl daemon-reload
  systemctl reset-failed "$unit" 2>/dev/null
  end_rollout
  echo "\${unit%.service} drained, stopped and removed from $host, with its secret files and known-good record"
  ;;
*)
  echo "usage: $0 restart HASH | rollback HASH | good HASH | release | prove | remove [UNIT [MACHINE-ID]]" >&2
  exit 2
  ;;
esac
}

# Run, unless sourced (the tests source it to check single functions). A step started over
# SSH runs as a transient systemd service (a host step, not part of the login session): its
# stdin, output and exit status are the SSH command's (--pipe --wait), and when the session
# drops (a second Ctrl-C, a CI timeout, a killed engine) the step goes on to its end on the
# host, under the host's lock; the next \`pulumi up\` or \`refresh\` reads what it left.
if [ "\${BASH_SOURCE[0]}" = "$0" ]; then
  case "\${1:-}" in
  restart|rollback|good|release|remove)
    if [ -z "\${DFLASH_HOST_STEP:-}" ] && type -P systemd-run >/dev/null 2>&1; then
      step_unit="dflash-step-\${unit%.service}-$1-$(date +%s%N)"
      # RuntimeMaxSec: a backstop over the step's own bounds (transactionBoundSeconds).
      exec systemd-run --unit "$step_unit" --description "dflash-sglang: $1 of \${unit%.service} for stack $stack" \\
        --property=RuntimeMaxSec="$step_max_s" --pipe --wait --collect --quiet --setenv=DFLASH_HOST_STEP="$step_unit" --setenv=SSH_CLIENT="\${SSH_CLIENT:-}" --setenv=SUDO_USER="\${SUDO_USER:-}" \\
        bash "$0" "$@"
    fi
    ;;
  esac
  main "$@"
fi
`;
}
