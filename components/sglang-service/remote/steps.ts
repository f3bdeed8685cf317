// Readiness, run over SSH from the readiness provider: wait until the *new* configuration
// serves (its own process on the port, its own arguments, a real generation, stable),
// watching every node of a group and naming the node that failed first. The changes to
// the host (drain, stop, install, start, rollback) are the staged transaction script's
// (../script.ts). Every wait polls a condition against its own deadline.
import { causeExcerpt, failureCause, journalLines, listenerPids, parseCurlWithStatus, parseMainAge, parseSystemctlShow, phaseFromEvidence, publicServerArgs, redactSecrets, splitSections, unitState, UnitState } from "../parse";
import { Ssh } from "./ssh";
import { bashCommand, renderHostScript } from "../hostScript";
import { progress } from "./progress";
import { monotonicMs } from "../../../lib/monotonic";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** Seconds, to a tenth, since `since` (monotonicMs: every wait here times itself on it, never on the wall clock, issue 60). */
const elapsed = (since: number) => Math.round((monotonicMs() - since) / 100) / 10;

export interface Timeouts {
  drainSeconds: number;
  drainPolicy: "fail" | "proceed";
  stopSeconds: number;
  gpuReleaseSeconds: number;
  readySeconds: number;
  /** Longest a single host command may take (absent in the state of a version before it). */
  commandSeconds?: number;
  helpSeconds?: number;
  /** A group's node that dropped out mid-restart, waited for (readiness runs on the program's inputs of today, never a state's). */
  rebootSeconds: number;
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

/** The words of a target's curlAuth (" -H @<file>": words without spaces of their own), for a host script's values. */
const curlArgs = (curlAuth: string): string[] => curlAuth.split(" ").filter(Boolean);

/** The unit's state (host/show.sh), as a command line. */
function showScript(unit: string): string {
  return bashCommand(renderHostScript({ about: [`dflash-sglang: the state of ${unit}.service.`], set: "-u", values: { service: `${unit}.service`, show_props: SHOW_PROPS }, files: ["show.sh", "unit-show.sh"] }));
}

type LiveUnit = UnitState & { invocationId: string; result: string };

const liveUnit = (show: Record<string, string>): LiveUnit => ({ ...unitState(show), invocationId: show.InvocationID ?? "", result: show.Result ?? "" });

/**
 * Pure: the unit's state from `systemctl show` output, or undefined when the output is not a
 * complete read (empty, cut short). Observing is not deciding: a read that did not complete
 * (SSH refused or cut, exit 255, a timeout) says nothing about the server, so its caller
 * waits and reads again within its deadline. Only facts read from the host (the main PID
 * gone, the unit failed, the port held by another process) ever count as a death.
 */
export function observedUnit(show: string | undefined): LiveUnit | undefined {
  const fields = parseSystemctlShow(show ?? "");
  return fields.ActiveState && fields.MainPID !== undefined ? liveUnit(fields) : undefined;
}

/** Why a read of the host did not complete, for progress lines and deadline messages. */
function unobserved(r: { code: number; stderr: string } | Error): string {
  const why = r instanceof Error ? r.message : `ssh exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").pop()}` : ""}`;
  return `could not observe the host (${why}); reading again`;
}

/** The unit's state, or undefined when the host could not be observed (see observedUnit). */
async function unitNow(ssh: Ssh, unit: string, timeoutMs = 20_000): Promise<LiveUnit | undefined> {
  const r = await ssh.run(showScript(unit), { timeoutMs }).catch(() => undefined);
  return r?.code === 0 ? observedUnit(r.stdout) : undefined;
}

export interface PollOptions {
  /** What is awaited, as shown in progress lines; may change while waiting. */
  status: () => string;
  deadlineSeconds: number;
  intervalMs: number;
  urn?: string;
  label: string;
  onTimeout: () => Promise<Error> | Error;
}

/** Seconds a single probe may take beyond what is left of its wait's deadline (connection set-up). */
const PROBE_GRACE_SECONDS = 3;

/**
 * Polls fn until it returns a value, showing progress when the status changes or every 5 s.
 * fn gets the seconds left before the deadline and must bound its probes by them (plus
 * PROBE_GRACE_SECONDS), so that a hung probe cannot hold the wait past its deadline; a probe
 * that fails once the deadline has passed is the deadline. Timed on the monotonic clock: a step
 * of the wall clock neither ends the wait at once nor holds it for hours (issue 60). Exported for
 * its test (remote/steps.test.ts).
 */
export async function poll<T>(opts: PollOptions, fn: (elapsedS: number, leftS: number) => Promise<T | undefined>): Promise<T> {
  const started = monotonicMs();
  let shownAt = -Infinity;
  let shown = "";
  for (;;) {
    const leftS = Math.max(0, opts.deadlineSeconds - (monotonicMs() - started) / 1000);
    let v: T | undefined;
    try {
      v = await fn(elapsed(started), leftS);
    } catch (e) {
      if (monotonicMs() - started > opts.deadlineSeconds * 1000) throw await opts.onTimeout();
      throw e;
    }
    if (v !== undefined) return v;
    if (monotonicMs() - started > opts.deadlineSeconds * 1000) throw await opts.onTimeout();
    const status = opts.status();
    if (status !== shown || monotonicMs() - shownAt > 5000) {
      shown = status;
      shownAt = monotonicMs();
      await progress(opts.urn, `${opts.label}: ${status} (${elapsed(started)} s, deadline ${opts.deadlineSeconds} s)`);
    }
    await sleep(opts.intervalMs);
  }
}

/** One node of a deployment: node 0 serves; further nodes run the other ranks of the model. */
export interface NodeStep {
  ssh: Ssh;
  /** Target of this node (its tpSize is the GPUs it uses). */
  t: Target;
  staged: { stagedPath: string; unitHash: string };
}

/**
 * A group's rank that ended and waits for systemd to start it again (render.ts, Restart=always):
 * a death to a step that watches it, not a start.
 */
export const endedForRestart = (u: UnitState) => u.subState === "auto-restart";

const isRunning = (u: LiveUnit) => u.activeState === "active" || u.activeState === "activating" || u.activeState === "reloading";

/**
 * Watches the non-serving nodes while node 0 comes up: any of them dying fails the whole
 * group at once, with that node's journal. Resolves when `until.done` is set.
 */
async function watchPeers(peers: NodeStep[], until: { done: boolean }, phase: string): Promise<void> {
  const started = monotonicMs();
  const seen = new Map<NodeStep, number>();
  while (!until.done && peers.length > 0) {
    for (const p of peers) {
      const state = await unitNow(p.ssh, p.t.unitName);
      if (!state) continue;
      const lastPid = seen.get(p) ?? 0;
      if (state.mainPid > 0) seen.set(p, state.mainPid);
      if ((lastPid > 0 && state.mainPid !== lastPid) || state.activeState === "failed" || endedForRestart(state) || (state.activeState === "inactive" && monotonicMs() - started > 10_000)) {
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
  const started = monotonicMs();
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
    const state = await unitNow(p.ssh, p.t.unitName);
    if (!state || (isRunning(state) && !endedForRestart(state))) continue;
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
  /** Seconds this step waited for the server to serve. */
  loadToReadySeconds: number;
  /** The host's clock (seconds since its boot, as the restart's @@result "at": issue 60) when the main process started, and how long it had run when it served (to a tenth of a second; host/ready-probe.sh). */
  mainStartedAt?: number;
  mainAgeSeconds?: number;
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
  const journal = (await ssh.run(bashCommand(renderHostScript({ about: [`dflash-sglang: the journal of ${unit}'s failed run.`], set: "-u", values: { service: unit, invocation: state.invocationId }, files: ["unit-journal.sh"] })))).stdout;
  const lines = journalLines(journal);
  // SGLang logs its arguments, API key included, at start-up: mask before showing.
  const cause = redactSecrets(failureCause(journal) ?? `exit status ${state.execMainStatus}`);
  const tail = redactSecrets(lines.slice(-12).map((l) => `    ${l.text}`).join("\n"));
  // The first rank's exception, where the other ranks' lines pushed it out of the tail.
  const first = causeExcerpt(lines.map((l) => l.text), 12);
  const firstWords = first.length ? `\n  The first exception in the journal:\n${redactSecrets(first.map((l) => `    ${l}`).join("\n"))}` : "";
  // Where the start had got to: the host's journal, not only the tool's last look.
  return new Error(`sglang ${r.label} on ${ssh.conn.host} failed while ${phaseFromEvidence(phase, lines)} after ${seconds} s: ${cause} (unit ${state.activeState}/${state.subState}).${firstWords}\n  Last journal lines:\n${tail}\n  See all with: journalctl -u ${unit} -n 2000`);
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
  // One look at the node (host/ready-probe.sh), sent whole each time (bashCommand).
  const script = () =>
    bashCommand(
      renderHostScript({
        about: [`dflash-sglang: readiness probe of ${unit}.`],
        set: "-u",
        values: { service: unit, show_props: SHOW_PROPS, port: r.port, curl_auth: curlArgs(r.curlAuth), info_url: `${r.serverUrl}${infoPath}` },
        files: ["show.sh", "ready-probe.sh"],
      }),
    );
  const started = monotonicMs();
  let phase = "starting";
  let sawStart = false;
  let badGenerations = 0;
  let lastPid = 0;
  // It served a generation, and waits for systemd's "active".
  let served = false;
  // Set while the host cannot be observed; shown beside the phase, which it does not change.
  let blind = "";

  const ready = await poll(
    {
      status: () => (blind ? `${phase}; ${blind}` : phase),
      deadlineSeconds: r.timeouts.readySeconds,
      intervalMs: r.timeouts.pollMs,
      urn: r.urn,
      label: r.label,
      onTimeout: () => new Error(`${r.label} on ${ssh.conn.host} was not serving the configuration within ${r.timeouts.readySeconds} s (timeouts.readySeconds); last phase: ${phase}${lastPid ? `, main pid ${lastPid}` : ""}${blind ? `; last read: ${blind}` : ""}. Check \`journalctl -u ${unit}\`.`),
    },
    async (elapsedS, leftS) => {
      const probe = await ssh.run(script(), { timeoutMs: (Math.min(30, leftS) + PROBE_GRACE_SECONDS + 5) * 1000 }).catch((e: Error) => e);
      const out = probe instanceof Error ? {} : splitSections(probe.stdout);
      const observed = probe instanceof Error || probe.code !== 0 ? undefined : observedUnit(out.show);
      if (!observed) {
        blind = unobserved(probe instanceof Error || probe.code !== 0 ? probe : new Error("incomplete output"));
        return undefined;
      }
      blind = "";
      const state = observed;
      if (state.activeState === "activating" || state.activeState === "active") sawStart = true;
      // The main process gone (even before systemd has marked the unit failed) is a death.
      const mainExited = lastPid > 0 && state.mainPid !== lastPid;
      if (state.mainPid > 0) lastPid = state.mainPid;
      // In ExecStartPost the main process has started; none now means it died (the unit is
      // marked failed only when ExecStartPost gives up), before its port ever opened.
      const diedInStartPost = state.subState === "start-post" && state.mainPid === 0;
      // Dead at the first look, after its main process had started: it died loading (SGLang
      // opens its port only once the weights are loaded).
      const diedBeforeFirstLook = lastPid === 0 && state.mainPid === 0 && state.execMainStartTimestampMonotonic > 0 && (state.activeState === "failed" || state.activeState === "inactive" || endedForRestart(state));
      if ((diedInStartPost || diedBeforeFirstLook) && phase.startsWith("starting")) phase = "loading weights (port not open yet)";
      if (diedInStartPost || mainExited || state.activeState === "failed" || endedForRestart(state) || (state.activeState === "inactive" && (sawStart || elapsedS > 10))) {
        throw await unitFailure(ssh, r, state, phase, elapsedS);
      }
      const pids = listenerPids(out.listen ?? "", r.port);
      const answer = parseCurlWithStatus(out.info ?? "");
      // An answer that can never turn good is not "still loading": the server refuses the key.
      if ((answer.status === 401 || answer.status === 403) && pids.includes(state.mainPid)) {
        throw new Error(
          `${r.label} on ${ssh.conn.host} serves, but refuses the tool's probes (${answer.status} on ${infoPath}): it demands ${r.curlAuth ? "an API key other than" : "an API key, and the stack sets none in"} the secret apiKey. ` +
            "Set the server's key only through apiKey (npx pulumi config set --secret apiKey ...), never in model.extraArgs, service.environment or the host's SGLang defaults",
        );
      }
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
        phase = served ? "it had served a generation, then its port closed (before systemd marked it active)" : state.mainPid ? "loading weights (port not open yet)" : state.subState === "start-pre" ? "waiting for GPUs to be free (ExecStartPre)" : `starting (${state.activeState}/${state.subState})`;
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
      // A generation may take a while on a cold server, but never past the deadline.
      const genSeconds = Math.max(1, Math.ceil(Math.min(60, leftS)));
      const asked = renderHostScript({ about: [`dflash-sglang: one generation from ${unit}.`], set: "-u", values: { url: `${r.serverUrl}/v1/chat/completions`, body, seconds: genSeconds, curl_auth: curlArgs(r.curlAuth) }, files: ["probe-generation.sh"] });
      const gen = await ssh.run(bashCommand(asked), { timeoutMs: (genSeconds + PROBE_GRACE_SECONDS) * 1000 }).catch((e: Error) => e);
      if (gen instanceof Error || gen.code === 255) {
        blind = unobserved(gen);
        return undefined;
      }
      let content = "";
      try {
        content = JSON.parse(gen.stdout).choices?.[0]?.message?.content ?? "";
      } catch {
        // not JSON: still warming up, or broken
      }
      // Serving, and systemd says so too: its start gate (the unit's ExecStartPost,
      // host/wait-ready.sh) asks SGLang's health check, which takes at least 1 s, so it lags a
      // moment; a step after this one (the benchmark, another stack's check) reads the unit's
      // state and must find it "active".
      if (looksLikeText(content) && state.activeState !== "active") {
        served = true;
        phase = `serving; waiting for systemd to mark ${unit} active (${state.activeState}/${state.subState}: the unit's start gate)`;
        return undefined;
      }
      if (looksLikeText(content)) {
        const internal = (info.internal_states as { avg_spec_accept_length?: number }[] | undefined)?.[0];
        // Only the compared and descriptive arguments: the body also holds api_key and other secrets.
        const main = parseMainAge(out.age);
        return { mainPid: state.mainPid, loadToReadySeconds: elapsedS, ...main, acceptLength: internal?.avg_spec_accept_length ?? null, serverArgs: publicServerArgs(info, Object.keys(r.expectedArgs)), restarts: state.nRestarts };
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
    const stableFrom = monotonicMs();
    phase = `ready; checking it stays up for ${r.safety.stableSeconds} s`;
    await poll(
      {
        status: () => (blind ? `${phase}; ${blind}` : phase),
        deadlineSeconds: r.safety.stableSeconds + 60,
        intervalMs: r.timeouts.pollMs,
        urn: r.urn,
        label: r.label,
        onTimeout: () => new Error(`${r.label} on ${ssh.conn.host} served, but could not be seen to stay up for ${r.safety.stableSeconds} s (safety.stableSeconds): the host could not be observed for 60 s after it (${blind || "no complete read"})`),
      },
      async () => {
        const state = await unitNow(ssh, r.unitName);
        if (!state) {
          blind = unobserved(new Error("systemctl show did not complete"));
          return undefined;
        }
        blind = "";
        if (state.mainPid !== ready.mainPid || state.activeState === "failed" || state.activeState === "inactive") {
          throw await unitFailure(ssh, r, state, `the first ${r.safety.stableSeconds} s after becoming ready`, elapsed(started));
        }
        return monotonicMs() - stableFrom >= r.safety.stableSeconds * 1000 ? true : undefined;
      },
    );
  }
  const { restarts: _restarts, ...result } = ready;
  return result;
}
