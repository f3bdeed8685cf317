// The steps of a safe reconfiguration, run over SSH from the dynamic providers:
// preflight + stage (touches nothing that runs), rollout (drain, stop, wait for the old
// process and its GPU memory, install, start) and readiness (wait until the *new*
// configuration serves). Every wait polls a condition against its own deadline.
import { HELPER_DIR, SECRETS_DIR, STATE_DIR, sha256, shellQuote, unitPath } from "../render";
import { busyGpus, failureCause, listenerPids, parseNvidiaSmiGpus, parsePrometheus, parseSystemctlShow, splitSections, unitState, UnitState } from "../parse";
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
  const help = out.help ?? "";
  if (!/@@exit 0\s*$/.test(help)) {
    problems.push(`\`${p.python} -m sglang.launch_server --help\` failed: ${help.replace(/@@exit \d+\s*$/, "").trim().split("\n").slice(-3).join(" | ")}. Check service.python points at the Python that has SGLang.`);
  } else {
    const known = new Set(help.match(/--[A-Za-z0-9][A-Za-z0-9-]*/g) ?? []);
    const unknown = p.flags.filter((f) => !known.has(f));
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
  return { gpuCount, gpuMemoryMiB };
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

const SHOW_PROPS = ["LoadState", "ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStatus", "ExecMainStartTimestampMonotonic", "InvocationID"];

function showScript(unit: string): string {
  return `systemctl show ${shellQuote(`${unit}.service`)} ${SHOW_PROPS.map((p) => `-p ${p}`).join(" ")} --no-pager`;
}

type LiveUnit = UnitState & { invocationId: string };

async function unitNow(ssh: Ssh, unit: string): Promise<LiveUnit> {
  const show = parseSystemctlShow(await ssh.check(showScript(unit), "systemctl show"));
  return { ...unitState(show), invocationId: show.InvocationID ?? "" };
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

/** Waits until in-flight requests are done; returns seconds waited. */
async function drain(ssh: Ssh, t: Target): Promise<number> {
  const started = Date.now();
  let lastLoad = "";
  try {
    await poll(
      {
        status: () => `draining: ${lastLoad || "reading /metrics"}`,
        deadlineSeconds: t.timeouts.drainSeconds,
        intervalMs: t.timeouts.pollMs,
        urn: t.urn,
        label: t.label,
        onTimeout: () => new Error("drain timed out"),
      },
      async () => {
        const r = await ssh.run(`curl -s -m 5${t.curlAuth} ${shellQuote(`${t.serverUrl}/metrics`)}`);
        if (r.code !== 0 || !r.stdout.includes("sglang:")) return "not-serving";
        const m = parsePrometheus(r.stdout);
        const running = m.get("sglang:num_running_reqs") ?? 0;
        const queued = m.get("sglang:num_queue_reqs") ?? 0;
        lastLoad = `${running} running, ${queued} queued`;
        return running + queued === 0 ? "idle" : undefined;
      },
    );
  } catch (e) {
    if (t.timeouts.drainPolicy !== "proceed") {
      throw new Error(`${(e as Error).message}: ${t.label} on ${ssh.conn.host} still had ${lastLoad} after ${t.timeouts.drainSeconds} s (timeouts.drainSeconds). Nothing was stopped; the old configuration is still serving. Retry when traffic is lower, raise timeouts.drainSeconds, or set timeouts.drainPolicy to "proceed".`);
    }
    await progress(t.urn, `${t.label}: drain timed out after ${t.timeouts.drainSeconds} s with ${lastLoad}; drainPolicy=proceed, stopping anyway`, false);
  }
  return elapsed(started);
}

/** `systemctl stop`, then waits until the unit is down and its old main process gone. */
async function stopServer(ssh: Ssh, t: Target, before: LiveUnit): Promise<number> {
  const started = Date.now();
  const unit = `${t.unitName}.service`;
  if (before.activeState !== "inactive" && before.activeState !== "failed") {
    await ssh.check(`systemctl stop --no-block ${shellQuote(unit)}`, `systemctl stop ${unit}`);
  }
  await poll(
    {
      status: () => `waiting for the old server (pid ${before.mainPid || "none"}) to exit`,
      deadlineSeconds: t.timeouts.stopSeconds,
      intervalMs: t.timeouts.pollMs,
      urn: t.urn,
      label: t.label,
      onTimeout: () => new Error(`the server of ${t.label} (pid ${before.mainPid}) did not exit within ${t.timeouts.stopSeconds} s of \`systemctl stop\` (timeouts.stopSeconds)`),
    },
    async () => {
      const now = await unitNow(ssh, t.unitName);
      if (now.activeState !== "inactive" && now.activeState !== "failed") return undefined;
      if (before.mainPid > 0 && (await ssh.run(`kill -0 ${before.mainPid}`)).code === 0) return undefined;
      return true;
    },
  );
  return elapsed(started);
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
    return { applied: false, drainSeconds: 0, stopSeconds: 0, gpuReleaseSeconds: 0, previousMainPid: before[0].mainPid };
  }
  const drainSeconds = before[0].activeState === "active" ? await drain(serving.ssh, t) : 0;
  let stopSeconds = 0;
  let gpuReleaseSeconds = 0;
  try {
    stopSeconds = Math.max(...(await Promise.all(nodes.map((n, i) => stopServer(n.ssh, n.t, before[i])))));
    gpuReleaseSeconds = Math.max(...(await Promise.all(nodes.map((n) => waitGpusFree(n.ssh, n.t)))));
    await Promise.all(nodes.map((n) => installAndStart(n.ssh, n.t.unitName, n.staged.stagedPath)));
  } catch (e) {
    await progress(t.urn, `${t.label}: FAILED: ${(e as Error).message.split("\n")[0]}${t.safety.rollback ? "; rolling back" : ""}`, false);
    throw new Error(`${(e as Error).message}\n${await rollback(nodes)}`);
  }
  const summary = before[0].mainPid > 0 ? `drained in ${drainSeconds} s, old server (pid ${before[0].mainPid}) gone in ${stopSeconds} s, GPUs free in ${gpuReleaseSeconds} s` : `no server was running, GPUs free in ${gpuReleaseSeconds} s`;
  await progress(t.urn, `${t.label}: ${summary}; started the new unit${nodes.length > 1 ? ` on ${nodes.length} nodes` : ""}`, false);
  return { applied: true, drainSeconds, stopSeconds, gpuReleaseSeconds, previousMainPid: before[0].mainPid };
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
  try {
    return await Promise.race([waitReady(nodes[0].ssh, { ...nodes[0].t, ...r }), watchPeers(nodes.slice(1), until, "the group was starting").then(() => new Promise<never>(() => undefined))]);
  } finally {
    until.done = true;
  }
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
  const cause = failureCause(journal) ?? `exit status ${state.execMainStatus}`;
  const tail = journal.trim().split("\n").slice(-12).map((l) => `    ${l}`).join("\n");
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
  const script = [
    "echo @@section show",
    showScript(r.unitName),
    "echo @@section listen",
    `ss -ltnpH 2>/dev/null | grep -F ':${r.port} ' || true`,
    "echo @@section info",
    `curl -s -m 5${r.curlAuth} ${shellQuote(`${r.serverUrl}/get_server_info`)} || curl -s -m 5${r.curlAuth} ${shellQuote(`${r.serverUrl}/server_info`)} || true`,
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
      const out = splitSections((await ssh.run(script, { timeoutMs: 30_000 })).stdout);
      const show = parseSystemctlShow(out.show ?? "");
      const state: LiveUnit = { ...unitState(show), invocationId: show.InvocationID ?? "" };
      if (state.activeState === "activating" || state.activeState === "active") sawStart = true;
      // The main process gone (even before systemd has marked the unit failed) is a death.
      const mainExited = lastPid > 0 && state.mainPid !== lastPid;
      if (state.mainPid > 0) lastPid = state.mainPid;
      if (mainExited || state.activeState === "failed" || (state.activeState === "inactive" && (sawStart || elapsedS > 10))) {
        throw await unitFailure(ssh, r, state, phase, elapsedS);
      }
      const pids = listenerPids(out.listen ?? "", r.port);
      let info: Record<string, unknown> = {};
      try {
        info = JSON.parse(out.info ?? "");
      } catch {
        // port not open yet
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
        return { mainPid: state.mainPid, loadToReadySeconds: elapsedS, acceptLength: internal?.avg_spec_accept_length ?? null, serverArgs: info, restarts: state.nRestarts };
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
