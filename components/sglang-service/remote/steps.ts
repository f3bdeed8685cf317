// The steps of a safe reconfiguration, run over SSH from the dynamic providers:
// preflight + stage (touches nothing that runs), rollout (stop = SGLang's own drain,
// wait for the old process and its GPU memory, install, start) and readiness (wait until
// the *new* configuration serves). Every wait polls a condition against its own deadline.
import { DRAIN_EXIT_MARGIN_SECONDS, HELPER_DIR, HIDDEN_FLAG_ALIASES, SECRETS_DIR, STATE_DIR, sha256, shellQuote, unitPath } from "../render";
import { busyGpus, checkFlagsAgainstHelp, failureCause, listenerPids, parseCurlWithStatus, parseDrainProgress, parseNvidiaSmiGpus, parseSystemctlShow, publicServerArgs, redactSecrets, splitSections, unitState, UnitState } from "../parse";
import { Ssh } from "./ssh";
import { progress } from "./progress";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const elapsed = (since: number) => Math.round((Date.now() - since) / 100) / 10;

/** Base64 keeps any text intact through the remote shell. */
function writeFileScript(path: string, text: string, mode: string): string {
  const tmp = `${path}.dflash-tmp`;
  return `printf %s ${shellQuote(Buffer.from(text, "utf8").toString("base64"))} | base64 -d > ${shellQuote(tmp)} && chmod ${mode} ${shellQuote(tmp)} && mv -f ${shellQuote(tmp)} ${shellQuote(path)}`;
}

export interface PreflightInput {
  python: string;
  flags: string[];
  paths: { what: string; path: string }[];
  tpSize: number;
  label: string;
}

export interface PreflightResult {
  gpuCount: number;
  gpuMemoryMiB: number;
  /** Things worth saying that do not stop the update (e.g. a deprecated flag spelling). */
  notes: string[];
}

/** Checks the host can run the configuration. Reads only; changes nothing. */
export async function preflight(ssh: Ssh, p: PreflightInput): Promise<PreflightResult> {
  const script = [
    "echo @@section help",
    `${shellQuote(p.python)} -m sglang.launch_server --help 2>&1; echo "@@exit $?"`,
    "echo @@section paths",
    ...p.paths.map((x) => `if [ -d ${shellQuote(x.path)} ]; then echo "ok ${x.what}"; else echo "missing ${x.what}"; fi`),
    "echo @@section gpus",
    "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits 2>&1",
  ].join("\n");
  const out = splitSections((await ssh.run(script, { timeoutMs: 120_000 })).stdout);
  const problems: string[] = [];
  const notes: string[] = [];
  const help = out.help ?? "";
  if (!/@@exit 0\s*$/.test(help)) {
    problems.push(`\`${p.python} -m sglang.launch_server --help\` failed: ${help.replace(/@@exit \d+\s*$/, "").trim().split("\n").slice(-3).join(" | ")}. Check service.python points at the Python that has SGLang.`);
  } else {
    const { unknown, viaAlias } = checkFlagsAgainstHelp(help, p.flags, HIDDEN_FLAG_ALIASES);
    for (const a of viaAlias) notes.push(`${a.alias} is a deprecated spelling of ${a.flag} that SGLang accepts but hides from --help; prefer ${a.flag}`);
    if (unknown.length) {
      problems.push(`the installed SGLang does not accept ${unknown.join(", ")} (checked against its --help). Set sglangBuild to the build installed on the host (upstream, ddtree-fork or a flag map), or install a build that has these flags.`);
    }
  }
  for (const x of p.paths) {
    if (!(out.paths ?? "").includes(`ok ${x.what}`)) problems.push(`${x.what} ${x.path} does not exist on the host.`);
  }
  let gpuCount = 0;
  let gpuMemoryMiB = 0;
  try {
    const gpus = parseNvidiaSmiGpus(out.gpus ?? "");
    gpuCount = gpus.length;
    gpuMemoryMiB = gpus[0]?.totalMiB ?? 0;
    if (gpuCount < p.tpSize) problems.push(`this node needs ${p.tpSize} GPUs (model.tpSize over the nodes) but the host has ${gpuCount}.`);
  } catch {
    problems.push(`nvidia-smi did not answer as expected: ${(out.gpus ?? "").trim().slice(0, 200)}`);
  }
  if (problems.length) {
    throw new Error(`Preflight failed for ${p.label} on ${ssh.conn.host}; nothing was stopped or changed, the current server is untouched:\n${problems.map((x) => `  - ${x}`).join("\n")}`);
  }
  return { gpuCount, gpuMemoryMiB, notes };
}

export interface StageInput {
  unitName: string;
  unitText: string;
  helpers: Record<string, string>;
  /** Secret files (path -> content), written 0600 through stdin, never on a command line. */
  secretFiles: Record<string, string>;
}

/** Writes helpers, secret files and the new unit beside (not over) the live one, and verifies it. */
export async function stage(ssh: Ssh, s: StageInput): Promise<{ stagedPath: string }> {
  const hash = sha256(s.unitText);
  const dir = `${STATE_DIR}/${s.unitName}`;
  const stagedPath = `${dir}/staged-${hash.slice(0, 16)}.service`;
  const verifyDir = `${dir}/verify`;
  const secretPaths = Object.keys(s.secretFiles).sort();
  const script = [
    "set -e",
    `mkdir -p ${shellQuote(HELPER_DIR)} ${shellQuote(dir)} ${shellQuote(verifyDir)} ${shellQuote(SECRETS_DIR)}`,
    `chmod 0700 ${shellQuote(SECRETS_DIR)}`,
    // One base64 line per secret file on stdin; printf is a shell builtin, so the
    // content never shows up in a process list.
    ...secretPaths.map((p) => `IFS= read -r line; (umask 077; printf '%s' "$line" | base64 -d > ${shellQuote(`${p}.dflash-tmp`)}) && mv -f ${shellQuote(`${p}.dflash-tmp`)} ${shellQuote(p)}`),
    ...Object.keys(s.helpers).sort().map((name) => writeFileScript(`${HELPER_DIR}/${name}`, s.helpers[name], "0755")),
    writeFileScript(stagedPath, s.unitText, "0644"),
    // systemd-analyze wants the real unit name; verify a copy in a scratch folder.
    `cp ${shellQuote(stagedPath)} ${shellQuote(`${verifyDir}/${s.unitName}.service`)}`,
    `if command -v systemd-analyze >/dev/null; then systemd-analyze verify ${shellQuote(`${verifyDir}/${s.unitName}.service`)}; fi`,
    `rm -f ${shellQuote(`${verifyDir}/${s.unitName}.service`)}`,
  ].join("\n");
  const input = secretPaths.map((p) => `${Buffer.from(s.secretFiles[p], "utf8").toString("base64")}\n`).join("");
  await ssh.check(script, `staging and verifying the unit ${s.unitName}`, { input });
  return { stagedPath };
}

export interface Timeouts {
  drainSeconds: number;
  drainPolicy: "fail" | "proceed";
  stopSeconds: number;
  gpuReleaseSeconds: number;
  readySeconds: number;
  gpuFreeMiB: number;
  pollMs: number;
}

export interface Safety {
  rollback: boolean;
  lockWaitSeconds: number;
  stableSeconds: number;
}

export interface Target {
  unitName: string;
  serverUrl: string;
  port: number;
  tpSize: number;
  timeouts: Timeouts;
  safety: Safety;
  /** Extra curl arguments that authenticate to the server (a 0600 header file), or "". */
  curlAuth: string;
  stack: string;
  urn?: string;
  label: string;
}

const SHOW_PROPS = ["LoadState", "ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainStartTimestampMonotonic", "InvocationID", "Result"];

function showScript(unit: string): string {
  return `systemctl show ${shellQuote(`${unit}.service`)} ${SHOW_PROPS.map((p) => `-p ${p}`).join(" ")} --no-pager`;
}

type LiveUnit = UnitState & { invocationId: string; result: string };

const liveUnit = (show: Record<string, string>): LiveUnit => ({ ...unitState(show), invocationId: show.InvocationID ?? "", result: show.Result ?? "" });

async function unitNow(ssh: Ssh, unit: string): Promise<LiveUnit> {
  return liveUnit(parseSystemctlShow(await ssh.check(showScript(unit), "systemctl show")));
}

export async function installedHash(ssh: Ssh, unit: string): Promise<string | null> {
  const r = await ssh.run(`sha256sum ${shellQuote(unitPath(unit))} 2>/dev/null`);
  return r.code === 0 ? r.stdout.split(/\s+/)[0] : null;
}

interface PollOptions {
  /** What is awaited, as shown in progress lines; may change while waiting. */
  status: () => string;
  deadlineSeconds: number;
  intervalMs: number;
  urn?: string;
  label: string;
  onTimeout: () => Promise<Error> | Error;
}

/** Polls fn until it returns a value, showing progress when the status changes or every 5 s. */
async function poll<T>(opts: PollOptions, fn: (elapsedS: number) => Promise<T | undefined>): Promise<T> {
  const started = Date.now();
  let shownAt = 0;
  let shown = "";
  for (;;) {
    const v = await fn(elapsed(started));
    if (v !== undefined) return v;
    if (Date.now() - started > opts.deadlineSeconds * 1000) throw await opts.onTimeout();
    const status = opts.status();
    if (status !== shown || Date.now() - shownAt > 5000) {
      shown = status;
      shownAt = Date.now();
      await progress(opts.urn, `${opts.label}: ${status} (${elapsed(started)} s, deadline ${opts.deadlineSeconds} s)`);
    }
    await sleep(opts.intervalMs);
  }
}

export interface StopResult {
  /** From `systemctl stop` until SGLang had nothing left in flight. */
  drainSeconds: number;
  /** From then until the old main process was gone. */
  stopSeconds: number;
  /** The drain hit its deadline and the server was killed. */
  killed: boolean;
  /** Requests still in flight then, from SGLang's last drain line (null: it logged none). */
  cut: number | null;
}

/**
 * Stops the server the way SGLang expects it: `systemctl stop` sends SIGTERM, which is
 * SGLang's drain (tokenizer_manager.py sigterm_watchdog: requests in flight, and new
 * ones that arrive meanwhile, finish; then it SIGKILLs itself). No gauge is trusted: the
 * process ending is the drain ending, and its journal says how many requests remain.
 * The drain is bounded: systemd kills at the unit's TimeoutStopSec, and this kills at
 * timeouts.drainSeconds + the exit margin in case the live unit (rendered earlier) says
 * otherwise. Waits until the old main process is gone.
 */
async function stopServer(ssh: Ssh, t: Target, before: LiveUnit): Promise<StopResult> {
  const started = Date.now();
  const unit = shellQuote(`${t.unitName}.service`);
  if (before.activeState === "inactive" || before.activeState === "failed") return { drainSeconds: 0, stopSeconds: 0, killed: false, cut: 0 };
  // Stopped even without a main process: a unit still in ExecStartPre/ExecStartPost (a
  // start that failed) must not be left to finish while the next unit is installed.
  const hostStart = Number((await ssh.check(`date +%s.%N; systemctl stop --no-block ${unit}`, `systemctl stop ${t.unitName}`)).trim().split("\n")[0]);
  // Only what was logged since the stop: a long-lived server's journal can be large.
  const journal = `journalctl -u ${unit} _SYSTEMD_INVOCATION_ID=${shellQuote(before.invocationId)} --since @${Math.floor(hostStart)} -o short-unix --no-pager | grep -F 'Gracefully exiting' | tail -n 1`;
  const drainDeadline = t.timeouts.drainSeconds + DRAIN_EXIT_MARGIN_SECONDS;
  let progressText = "";
  let killedAt = 0;
  let cut: number | null = 0;
  const drainedAfter = await poll(
    {
      status: () => `stopping: SGLang is draining (${progressText || "SIGTERM sent; it checks every 5 s"})`,
      deadlineSeconds: drainDeadline + t.timeouts.stopSeconds,
      intervalMs: t.timeouts.pollMs,
      urn: t.urn,
      label: t.label,
      onTimeout: () => new Error(`the server of ${t.label} (pid ${before.mainPid}) did not exit within ${drainDeadline + t.timeouts.stopSeconds} s of \`systemctl stop\`, even after being killed (timeouts.drainSeconds + timeouts.stopSeconds); check \`systemctl status ${t.unitName}\``),
    },
    async (elapsedS) => {
      const alive = before.mainPid > 0 ? `kill -0 ${before.mainPid} 2>/dev/null && echo alive` : "true";
      const out = splitSections((await ssh.run(`echo @@section show\n${showScript(t.unitName)}\necho @@section alive\n${alive}\necho @@section journal\n${journal}`)).stdout);
      const drain = parseDrainProgress(out.journal ?? "");
      if (drain.remaining !== null) progressText = `${drain.remaining} request${drain.remaining === 1 ? "" : "s"} still in flight`;
      const now = liveUnit(parseSystemctlShow(out.show ?? ""));
      const gone = !(out.alive ?? "").includes("alive") && (now.activeState === "inactive" || now.activeState === "failed");
      if (!gone) {
        if (!killedAt && elapsedS > drainDeadline) {
          cut = drain.remaining;
          killedAt = Date.now();
          await progress(t.urn, `${t.label}: the drain did not end within ${t.timeouts.drainSeconds} s (timeouts.drainSeconds); killing the old server, cutting ${describeCut(cut)}`, false);
          await ssh.run(`systemctl kill --signal=SIGKILL ${unit}`);
        }
        return undefined;
      }
      if (now.result === "timeout" && !killedAt) {
        // systemd's own TimeoutStopSec ended the drain.
        killedAt = Date.now();
        cut = drain.remaining;
      }
      return drain.drainedAt !== null && !killedAt ? Math.max(0, drain.drainedAt - hostStart) : elapsedS;
    },
  );
  const total = elapsed(started);
  const drainSeconds = Math.round(Math.min(drainedAfter, total) * 10) / 10;
  return { drainSeconds, stopSeconds: Math.round((total - drainSeconds) * 10) / 10, killed: killedAt > 0, cut: killedAt > 0 ? cut : 0 };
}

function describeCut(cut: number | null): string {
  return cut === null ? "what was still in flight (SGLang logged no count)" : `${cut} request${cut === 1 ? "" : "s"} still in flight`;
}

/** Waits until the GPUs the server uses show (almost) no memory in use. */
async function waitGpusFree(ssh: Ssh, t: Target): Promise<number> {
  const started = Date.now();
  const gpus = Array.from({ length: t.tpSize }, (_, i) => i);
  let lastBusy = "";
  await poll(
    {
      status: () => `waiting for GPU memory to be released: ${lastBusy || "reading nvidia-smi"}`,
      deadlineSeconds: t.timeouts.gpuReleaseSeconds,
      intervalMs: t.timeouts.pollMs,
      urn: t.urn,
      label: t.label,
      onTimeout: () => new Error(`GPU memory on ${ssh.conn.host} was not released within ${t.timeouts.gpuReleaseSeconds} s after the old server exited (${lastBusy}; timeouts.gpuReleaseSeconds). Find the holder with \`nvidia-smi --query-compute-apps=pid,used_memory --format=csv\``),
    },
    async () => {
      const r = await ssh.check("nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits", "nvidia-smi");
      const busy = busyGpus(parseNvidiaSmiGpus(r), gpus, t.timeouts.gpuFreeMiB);
      lastBusy = busy.map((g) => `GPU ${g.index}: ${g.usedMiB} MiB used`).join(", ");
      return busy.length === 0 ? true : undefined;
    },
  );
  return elapsed(started);
}

/** Installs `source` as the live unit and starts it without blocking (readiness watches it). */
async function installAndStart(ssh: Ssh, unitName: string, source: string): Promise<void> {
  const live = unitPath(unitName);
  const unit = shellQuote(`${unitName}.service`);
  await ssh.check(
    [
      "set -e",
      `install -m 0644 ${shellQuote(source)} ${shellQuote(`${live}.dflash-tmp`)}`,
      `mv -f ${shellQuote(`${live}.dflash-tmp`)} ${shellQuote(live)}`,
      "systemctl daemon-reload",
      `systemctl enable ${unit} 2>/dev/null`,
      `systemctl reset-failed ${unit} 2>/dev/null || true`,
      `systemctl start --no-block ${unit}`,
    ].join("\n"),
    `installing and starting ${unitName}`,
  );
}

export interface RolloutResult {
  applied: boolean;
  drainSeconds: number;
  stopSeconds: number;
  /** Requests cut at the drain deadline (timeouts.drainPolicy "proceed"); 0 normally, null if unknown. */
  requestsCut: number | null;
  gpuReleaseSeconds: number;
  previousMainPid: number;
}

/** One node of a deployment: node 0 serves; further nodes run the other ranks of the model. */
export interface NodeStep {
  ssh: Ssh;
  /** Target of this node (its tpSize is the GPUs it uses). */
  t: Target;
  staged: { stagedPath: string; unitHash: string };
}

const isRunning = (u: LiveUnit) => u.activeState === "active" || u.activeState === "activating" || u.activeState === "reloading";

/**
 * Drain, stop, wait for the old processes and their GPU memory, install the staged units,
 * start. For a model over several nodes: drain the serving node, stop all, wait for the
 * GPUs of all, start all. If anything fails once a server is stopped, the last good
 * configuration is restored on every node (see rollback) before the error is reported.
 */
export async function rollout(nodes: NodeStep[]): Promise<RolloutResult> {
  const [serving] = nodes;
  const t = serving.t;
  const before = await Promise.all(nodes.map((n) => unitNow(n.ssh, n.t.unitName)));
  const installed = await Promise.all(nodes.map((n) => installedHash(n.ssh, n.t.unitName)));
  if (nodes.every((n, i) => installed[i] === n.staged.unitHash && isRunning(before[i]))) {
    await progress(t.urn, `${t.label}: the host${nodes.length > 1 ? "s" : ""} already run${nodes.length > 1 ? "" : "s"} this unit; nothing to restart`, false);
    return { applied: false, drainSeconds: 0, stopSeconds: 0, requestsCut: 0, gpuReleaseSeconds: 0, previousMainPid: before[0].mainPid };
  }
  let stop: StopResult = { drainSeconds: 0, stopSeconds: 0, killed: false, cut: 0 };
  let gpuReleaseSeconds = 0;
  try {
    // The serving node first: its SIGTERM is the drain, and its peers must stay up until
    // it has finished what is in flight. Then the other nodes.
    stop = await stopServer(serving.ssh, t, before[0]);
    await Promise.all(nodes.slice(1).map((n, i) => stopServer(n.ssh, n.t, before[i + 1])));
    if (stop.killed) {
      const what = `the drain deadline (timeouts.drainSeconds = ${t.timeouts.drainSeconds} s) ended the old server, cutting ${describeCut(stop.cut)}`;
      if (t.timeouts.drainPolicy === "fail") throw new Error(`${what}; timeouts.drainPolicy is "fail", so the new configuration is not started. Retry when traffic is lower, raise timeouts.drainSeconds, or set timeouts.drainPolicy to "proceed".`);
      await progress(t.urn, `${t.label}: ${what}; timeouts.drainPolicy is "proceed": starting the new configuration`, false);
    }
    gpuReleaseSeconds = Math.max(...(await Promise.all(nodes.map((n) => waitGpusFree(n.ssh, n.t)))));
    await Promise.all(nodes.map((n) => installAndStart(n.ssh, n.t.unitName, n.staged.stagedPath)));
  } catch (e) {
    await progress(t.urn, `${t.label}: FAILED: ${(e as Error).message.split("\n")[0]}${t.safety.rollback ? "; rolling back" : ""}`, false);
    throw new Error(`${(e as Error).message}\n${await rollback(nodes)}`);
  }
  const summary = before[0].mainPid > 0 ? `old server (pid ${before[0].mainPid}) drained in ${stop.drainSeconds} s and gone ${stop.stopSeconds} s later, GPUs free in ${gpuReleaseSeconds} s` : `no server was running, GPUs free in ${gpuReleaseSeconds} s`;
  await progress(t.urn, `${t.label}: ${summary}; started the new unit${nodes.length > 1 ? ` on ${nodes.length} nodes` : ""}`, false);
  return { applied: true, drainSeconds: stop.drainSeconds, stopSeconds: stop.stopSeconds, requestsCut: stop.cut, gpuReleaseSeconds, previousMainPid: before[0].mainPid };
}

/**
 * Watches the non-serving nodes while node 0 comes up: any of them dying fails the whole
 * group at once, with that node's journal. Resolves when `until.done` is set.
 */
async function watchPeers(peers: NodeStep[], until: { done: boolean }, phase: string): Promise<void> {
  const started = Date.now();
  const seen = new Map<NodeStep, number>();
  while (!until.done && peers.length > 0) {
    for (const p of peers) {
      const state = await unitNow(p.ssh, p.t.unitName);
      const lastPid = seen.get(p) ?? 0;
      if (state.mainPid > 0) seen.set(p, state.mainPid);
      if ((lastPid > 0 && state.mainPid !== lastPid) || state.activeState === "failed" || (state.activeState === "inactive" && Date.now() - started > 10_000)) {
        if (until.done) return;
        throw await unitFailure(p.ssh, p.t, state, phase, elapsed(started));
      }
    }
    await sleep(peers[0].t.timeouts.pollMs);
  }
}

/** Readiness of a group: node 0 must serve while every other node stays up. */
export async function waitReadyGroup(nodes: NodeStep[], r: Omit<ReadinessInput, keyof Target>): Promise<ReadinessResult> {
  const until = { done: false };
  const started = Date.now();
  try {
    return await Promise.race([waitReady(nodes[0].ssh, { ...nodes[0].t, ...r }), watchPeers(nodes.slice(1), until, "the group was starting").then(() => new Promise<never>(() => undefined))]);
  } catch (e) {
    throw await rootCauseInGroup(nodes, e as Error, elapsed(started));
  } finally {
    until.done = true;
  }
}

/** What a rank says when another rank went away first: a consequence, not the cause. */
const LOST_PEER = /NCCL|communicator was aborted|Connection reset by peer|lost node \d/;

/**
 * A node that dies takes the others down with it (their collectives abort), and node 0
 * is often the first to be noticed. When node 0's failure is such an abort, the node
 * that failed for a reason of its own is the cause the user needs.
 */
async function rootCauseInGroup(nodes: NodeStep[], e: Error, seconds: number): Promise<Error> {
  const headline = (x: Error) => x.message.split("\n")[0];
  if (nodes.length < 2 || !LOST_PEER.test(headline(e))) return e;
  for (const p of nodes.slice(1)) {
    const state = await unitNow(p.ssh, p.t.unitName).catch(() => undefined);
    if (!state || isRunning(state)) continue;
    const peer = await unitFailure(p.ssh, p.t, state, "the group was starting", seconds);
    if (!LOST_PEER.test(headline(peer))) return new Error(`${peer.message}\n  Node 0 stopped because of it: ${headline(e)}`);
  }
  return e;
}

export interface ReadinessInput extends Target {
  expectedArgs: Record<string, string | number | boolean | null>;
  modelName: string;
}

export interface ReadinessResult {
  mainPid: number;
  loadToReadySeconds: number;
  acceptLength: number | null;
  serverArgs: Record<string, unknown>;
}

/** The differences between what the server reports and what we deployed. */
export function argMismatches(expected: Record<string, unknown>, reported: Record<string, unknown>): string[] {
  return Object.keys(expected)
    .filter((k) => JSON.stringify(reported[k] ?? null) !== JSON.stringify(expected[k]))
    .map((k) => `${k}=${JSON.stringify(reported[k] ?? null)} (want ${JSON.stringify(expected[k])})`);
}

/** Printable text with no replacement or control characters: a sane generation. */
export function looksLikeText(s: string): boolean {
  return s.trim().length > 0 && !/[\ufffd\u0000-\u0008\u000e-\u001f]/.test(s);
}

/** Unusable generations in a row before the server counts as broken. */
const BAD_GENERATIONS = 3;

async function unitFailure(ssh: Ssh, r: Target, state: LiveUnit, phase: string, seconds: number): Promise<Error> {
  const unit = `${r.unitName}.service`;
  const journal = (await ssh.run(`journalctl -u ${shellQuote(unit)} --no-pager -o cat -n 40 ${state.invocationId ? `_SYSTEMD_INVOCATION_ID=${shellQuote(state.invocationId)}` : ""}`)).stdout;
  // SGLang logs its arguments, API key included, at start-up: mask before showing.
  const cause = redactSecrets(failureCause(journal) ?? `exit status ${state.execMainStatus}`);
  const tail = redactSecrets(journal.trim()).split("\n").slice(-12).map((l) => `    ${l}`).join("\n");
  return new Error(`sglang ${r.label} on ${ssh.conn.host} failed while ${phase} after ${seconds} s: ${cause} (unit ${state.activeState}/${state.subState}).\n  Last journal lines:\n${tail}\n  See all with: journalctl -u ${unit} -n 200`);
}

/**
 * Waits until the configuration serves: the process listening on the port is the unit's
 * main process, the server reports exactly the deployed arguments, and a real generation
 * returns sane text; then it must stay up for safety.stableSeconds. Fails as soon as the
 * process dies, with the cause from the journal.
 */
export async function waitReady(ssh: Ssh, r: ReadinessInput): Promise<ReadinessResult> {
  const unit = `${r.unitName}.service`;
  const body = JSON.stringify({ model: r.modelName, messages: [{ role: "user", content: "Say OK" }], max_tokens: 4, temperature: 0 });
  // /server_info is the endpoint; /get_server_info is deprecated (and logs a warning per
  // call), so it is asked only once /server_info has answered 404.
  let infoPath = "/server_info";
  const script = () =>
    [
      "echo @@section show",
      showScript(r.unitName),
      "echo @@section listen",
      `ss -ltnpH 2>/dev/null | grep -F ':${r.port} ' || true`,
      "echo @@section info",
      `curl -s -m 5 -w '\n@@status %{http_code}\n'${r.curlAuth} ${shellQuote(`${r.serverUrl}${infoPath}`)} || true`,
    ].join("\n");
  const started = Date.now();
  let phase = "starting";
  let sawStart = false;
  let badGenerations = 0;
  let lastPid = 0;

  const ready = await poll(
    {
      status: () => phase,
      deadlineSeconds: r.timeouts.readySeconds,
      intervalMs: r.timeouts.pollMs,
      urn: r.urn,
      label: r.label,
      onTimeout: () => new Error(`${r.label} on ${ssh.conn.host} was not serving the configuration within ${r.timeouts.readySeconds} s (timeouts.readySeconds); last phase: ${phase}${lastPid ? `, main pid ${lastPid}` : ""}. Check \`journalctl -u ${unit}\`.`),
    },
    async (elapsedS) => {
      const out = splitSections((await ssh.run(script(), { timeoutMs: 30_000 })).stdout);
      const state = liveUnit(parseSystemctlShow(out.show ?? ""));
      if (state.activeState === "activating" || state.activeState === "active") sawStart = true;
      // The main process gone (even before systemd has marked the unit failed) is a death.
      const mainExited = lastPid > 0 && state.mainPid !== lastPid;
      if (state.mainPid > 0) lastPid = state.mainPid;
      if (mainExited || state.activeState === "failed" || (state.activeState === "inactive" && (sawStart || elapsedS > 10))) {
        throw await unitFailure(ssh, r, state, phase, elapsedS);
      }
      const pids = listenerPids(out.listen ?? "", r.port);
      const answer = parseCurlWithStatus(out.info ?? "");
      if (answer.status === 404 && pids.includes(state.mainPid)) {
        if (infoPath === "/get_server_info") throw new Error(`${r.label} on ${ssh.conn.host} serves, but answers 404 on both /server_info and /get_server_info, so the tool cannot check that it runs the deployed arguments. Is this SGLang?`);
        infoPath = "/get_server_info";
        phase = "/server_info is 404 on this SGLang version; asking /get_server_info";
        return undefined;
      }
      let info: Record<string, unknown> = {};
      try {
        if (answer.status === 200) info = JSON.parse(answer.body);
      } catch {
        // not JSON yet
      }
      if (pids.length === 0) {
        phase = state.mainPid ? "loading weights (port not open yet)" : state.subState === "start-pre" ? "waiting for GPUs to be free (ExecStartPre)" : `starting (${state.activeState}/${state.subState})`;
        return undefined;
      }
      if (!pids.includes(state.mainPid)) {
        phase = `port ${r.port} held by pid ${pids.join(",")}, not the unit's main pid ${state.mainPid || "(none)"}`;
        return undefined;
      }
      const mismatches = argMismatches(r.expectedArgs, info);
      if (Object.keys(info).length === 0) {
        phase = "warming up (port open, no server info yet)";
        return undefined;
      }
      if (mismatches.length) {
        phase = `serving, but with other arguments: ${mismatches.join(", ")}`;
        return undefined;
      }
      const gen = await ssh.run(`curl -s -m 60${r.curlAuth} -H 'content-type: application/json' -d ${shellQuote(body)} ${shellQuote(`${r.serverUrl}/v1/chat/completions`)}`, { timeoutMs: 90_000 });
      let content = "";
      try {
        content = JSON.parse(gen.stdout).choices?.[0]?.message?.content ?? "";
      } catch {
        // not JSON: still warming up, or broken
      }
      if (looksLikeText(content)) {
        const internal = (info.internal_states as { avg_spec_accept_length?: number }[] | undefined)?.[0];
        // Only the compared and descriptive arguments: the body also holds api_key and other secrets.
        return { mainPid: state.mainPid, loadToReadySeconds: elapsedS, acceptLength: internal?.avg_spec_accept_length ?? null, serverArgs: publicServerArgs(info, Object.keys(r.expectedArgs)), restarts: state.nRestarts };
      }
      if (/"choices"/.test(gen.stdout) && ++badGenerations >= BAD_GENERATIONS) {
        throw new Error(`${r.label} on ${ssh.conn.host} runs the new arguments but its generations are unusable (${BAD_GENERATIONS} in a row), e.g. ${JSON.stringify(content.slice(0, 80))}`);
      }
      phase = `generation check: no usable answer yet (${JSON.stringify(gen.stdout.slice(0, 80))})`;
      return undefined;
    },
  );

  // A server that dies right after its first answer is not a good configuration.
  if (r.safety.stableSeconds > 0) {
    const stableFrom = Date.now();
    phase = `ready; checking it stays up for ${r.safety.stableSeconds} s`;
    await poll(
      { status: () => phase, deadlineSeconds: r.safety.stableSeconds + 60, intervalMs: r.timeouts.pollMs, urn: r.urn, label: r.label, onTimeout: () => new Error("stability check overran") },
      async () => {
        const state = await unitNow(ssh, r.unitName);
        if (state.mainPid !== ready.mainPid || state.activeState === "failed" || state.activeState === "inactive") {
          throw await unitFailure(ssh, r, state, `the first ${r.safety.stableSeconds} s after becoming ready`, elapsed(started));
        }
        return Date.now() - stableFrom >= r.safety.stableSeconds * 1000 ? true : undefined;
      },
    );
  }
  const { restarts: _restarts, ...result } = ready;
  return result;
}

const knownGoodUnit = (unit: string) => `${STATE_DIR}/${unit}/last-good.service`;
const knownGoodNote = (unit: string) => `${STATE_DIR}/${unit}/last-good.json`;

export interface KnownGood {
  stack: string;
  unitHash: string;
  expectedArgs: Record<string, string | number | boolean | null>;
  modelName: string;
  recordedAt: string;
}

/** Remembers the live unit as the last configuration that passed readiness. */
export async function recordKnownGood(ssh: Ssh, unitName: string, note: KnownGood): Promise<void> {
  await ssh.check(
    [
      "set -e",
      `cp ${shellQuote(unitPath(unitName))} ${shellQuote(`${knownGoodUnit(unitName)}.dflash-tmp`)}`,
      `mv -f ${shellQuote(`${knownGoodUnit(unitName)}.dflash-tmp`)} ${shellQuote(knownGoodUnit(unitName))}`,
      writeFileScript(knownGoodNote(unitName), JSON.stringify(note), "0644"),
    ].join("\n"),
    "recording the known-good unit",
  );
}

/**
 * Puts the last known-good configuration back on every node with the same safe sequence
 * (stop, wait for the processes and the GPUs, install, start, readiness) and says how that
 * went. Never throws: its result is appended to the error that caused it.
 */
export async function rollback(nodes: NodeStep[]): Promise<string> {
  const t = nodes[0].t;
  const where = nodes.map((n) => n.ssh.conn.host).join(", ");
  if (!t.safety.rollback) return `Rollback is off (safety.rollback=false): ${t.label} on ${where} is left as it is; check it now.`;
  try {
    const notes = await Promise.all(nodes.map((n) => n.ssh.run(`cat ${shellQuote(knownGoodNote(n.t.unitName))} 2>/dev/null`)));
    const missing = nodes.filter((_, i) => notes[i].code !== 0).map((n) => n.ssh.conn.host);
    if (missing.length) return `HOST DOWN: ${missing.join(", ")} ha${missing.length > 1 ? "ve" : "s"} no earlier configuration of ${t.unitName} that passed readiness, so there is nothing to roll back to. The failed unit is left as it is (\`systemctl status ${t.unitName}\`); fix the configuration and run \`pulumi up\` again.`;
    const good = JSON.parse(notes[0].stdout) as KnownGood;
    if (good.unitHash === nodes[0].staged.unitHash) return `HOST DOWN: the failed configuration is the last known-good one of ${t.unitName} on ${where}; nothing older to restore.`;
    const started = Date.now();
    const back = nodes.map((n) => ({ ...n, t: { ...n.t, label: `${n.t.label} rollback to stack ${good.stack}` } }));
    await progress(t.urn, `${back[0].t.label}: restoring the previous configuration`, false);
    const states = await Promise.all(back.map((n) => unitNow(n.ssh, n.t.unitName)));
    await Promise.all(back.map((n, i) => stopServer(n.ssh, n.t, states[i])));
    await Promise.all(back.map((n) => waitGpusFree(n.ssh, n.t)));
    await Promise.all(back.map((n) => installAndStart(n.ssh, n.t.unitName, knownGoodUnit(n.t.unitName))));
    const ready = await waitReadyGroup(back, { expectedArgs: good.expectedArgs, modelName: good.modelName });
    return `Rolled back: the previous configuration (stack ${good.stack}, unit ${good.unitHash.slice(0, 12)}) is back and serving on ${where} (pid ${ready.mainPid}, ${elapsed(started)} s to restore).`;
  } catch (e) {
    return `ROLLBACK FAILED, HOST DOWN: restoring the previous configuration of ${t.unitName} on ${where} failed: ${(e as Error).message}`;
  }
}

/** Stops and removes the unit, but only if the host still runs the one this stack installed. */
export async function removeUnit(ssh: Ssh, unitName: string, unitHash: string): Promise<string> {
  const installed = await installedHash(ssh, unitName);
  if (installed === null) return `${unitName} is not installed on ${ssh.conn.host}; nothing to remove`;
  if (installed !== unitHash) return `${unitName} on ${ssh.conn.host} now runs another configuration (unit ${installed.slice(0, 12)}), not this stack's (${unitHash.slice(0, 12)}); left the host alone`;
  await ssh.check(
    [`systemctl disable --now ${shellQuote(`${unitName}.service`)} 2>/dev/null || systemctl stop ${shellQuote(`${unitName}.service`)}`, `rm -f ${shellQuote(unitPath(unitName))}`, "systemctl daemon-reload"].join("\n"),
    `removing ${unitName}`,
    { timeoutMs: 300_000 },
  );
  return `${unitName} stopped and removed from ${ssh.conn.host}`;
}
