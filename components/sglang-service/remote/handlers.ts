// What the readiness dynamic provider does, as plain async functions of plain data.
// Loaded by ../provider.ts inside the provider process (never serialized). Every change to
// a host goes through the staged transaction script (../script.ts), run over SSH.
import { randomBytes } from "node:crypto";
import { Connection, Ssh, Unreachable } from "./ssh";
import { NodeStep, ReadinessResult, Target, waitReadyGroup } from "./steps";
import { progress } from "./progress";
import { secretPaths, shellQuote, startTimeoutSeconds, STATE_DIR, unitPath } from "../render";
import { groupFinishSeconds, groupPrepareSeconds, RUN_DIR, transactionBoundSeconds } from "../script";
import { bashCommand, hostValues, renderHostScript } from "../hostScript";
import { LOST_MARK, restartGroup } from "./group-restart";
export { applyGroupRestart } from "./group-restart";
export type { GroupRestartInputs } from "./group-restart";
import { exitWithEngine } from "./engine-watch";
import { ConfiguredNodes, NodeConnection, nodesFromConfig } from "../config";
import { BalancerSteps, leaveUnlessOut, rejoinAfter } from "../../fleet/remote/balancer";

exitWithEngine();

export interface ReadyNode {
  connection: Connection;
  unitHash: string;
  /** The staged transaction script on this node. */
  transaction: string;
  /** stdout of this node's restart command (it holds one `@@result {json}` line). */
  restartOutput: string;
}

export interface ReadyInputs {
  target: Target;
  /** What the server must report once it serves this configuration. */
  expectedArgs: Record<string, string | number | boolean | null>;
  modelName: string;
  nodes: ReadyNode[];
  /** The restart's stdin (secret files), for a restart this resource has to run again. */
  secretStdin: string;
  /**
   * What each node ran when the program read it (observe.ts hostRunsOf): anything but this
   * stack's unit makes `up` update this resource, which restarts the node onto it. Optional:
   * state written by earlier versions lacks it.
   */
  hostRuns?: string[];
  providerVersion: string;
  /** A fleet's replica: put back into the balancer once proven, or after a failure (fleet/remote/balancer.ts). */
  balancer?: BalancerSteps;
}

export interface Timings {
  drainSeconds: number;
  stopSeconds: number;
  gpuReleaseSeconds: number;
  loadToReadySeconds: number;
  requestsCut: number | null;
  /** Whether this restart drained and stopped a server (not a first install, a start of a stopped unit, or a proof without a restart). */
  drained: boolean;
}

/**
 * generation: the number of node 0's generation that readiness proved (host/generations.sh:
 * the configuration installed whole, now its known-good); null from a version that kept none.
 */
export type ReadyOutputs = ReadyInputs & Omit<ReadinessResult, "loadToReadySeconds" | "mainStartedAt" | "mainAgeSeconds"> & { timings: Timings; generation: number | null };

interface RestartResult {
  drainSeconds: number;
  stopSeconds: number;
  requestsCut: number | null;
  gpuReleaseSeconds: number;
  /** The host's monotonic clock (seconds since boot, /proc/uptime) when it started the new unit: ready-probe.sh's clock. */
  at?: number;
  /** False when the host already ran this unit (nothing restarted). */
  applied?: boolean;
  /** The server it drained and stopped, 0 when none ran. */
  previousMainPid?: number;
}

/** Seconds the engine may take between a restart and the readiness step that follows it. */
const ENGINE_GAP_SECONDS = 120;

/**
 * Pure: the seconds from the start of the new server to serving. The load begins when the
 * restart starts the unit (without waiting), before the readiness step begins: so it is the
 * main process's age when it served, if that process is the one the restart started (from a
 * few seconds before the restart's clock to a minute after: the unit's GPU check runs first)
 * and it started just before this step (the engine's gap). Otherwise (a server proven again
 * without a restart, a clock or ps not read) it is the readiness step's own wait.
 */
export function loadToReady(restartAt: number | undefined, ready: Pick<ReadinessResult, "loadToReadySeconds" | "mainStartedAt" | "mainAgeSeconds">): number {
  const { loadToReadySeconds: waited, mainStartedAt, mainAgeSeconds } = ready;
  if (restartAt === undefined || mainStartedAt === undefined || mainAgeSeconds === undefined) return waited;
  // The unit's ExecStartPre (the GPU check) runs between the restart's start and the main process.
  const startedByRestart = mainStartedAt >= restartAt - 5 && mainStartedAt <= restartAt + 60;
  const beforeThisStep = mainAgeSeconds - waited;
  return startedByRestart && beforeThisStep >= 0 && beforeThisStep <= ENGINE_GAP_SECONDS ? mainAgeSeconds : waited;
}

/** Pure: a group node's restart output ends with group-restart.ts LOST_MARK (its session dropped after the go). */
export function droppedOut(restartOutput: string): boolean {
  return restartOutput.split("\n").some((l) => l === LOST_MARK || l.startsWith(`${LOST_MARK} `));
}

/**
 * Pure: the restart's result, or null when it printed none, or one that does not parse (a host
 * script run under a locale that writes `0,2` for 0.2 did, before every host script set its own
 * locale): its timings are then unknown, never an exception that would skip readiness and with it
 * the rollback.
 */
export function parseRestartResult(stdout: string): RestartResult | null {
  const line = stdout.split("\n").reverse().find((l) => l.startsWith("@@result "));
  if (!line) return null;
  try {
    const r = JSON.parse(line.slice("@@result ".length)) as unknown;
    return r !== null && typeof r === "object" && !Array.isArray(r) ? (r as RestartResult) : null;
  } catch {
    return null;
  }
}

/**
 * Keeps each node's rollout note claimed (the transaction's \`prove\`, in a session of its own)
 * while this readiness step proves or rolls back a restart, started again after a dropped
 * session (pausing 1 s, then up to 5 s between tries): the note keeps other stacks off the host
 * while someone proves it, and only then (a killed engine's note does not keep them waiting for
 * minutes). A \`prove\` that ends by itself is done; one that cannot run (an exit other than 0
 * and ssh's 255) is said once and not retried. Returns the release, and `taken`: resolves once
 * every node's first \`prove\` has taken the note up (its \`@@taken\`), has ended, or after
 * PROVE_TAKEN_MS. Readiness looks at a node only after that, so that an engine killed while it
 * looks leaves a restart marked as taken up, which the next \`up\` restarts if it has died.
 */
function keepProving(sshs: Ssh[], nodes: ReadyNode[], token: string, say: (line: string) => void): { release: () => void; taken: Promise<void> } {
  let stopped = false;
  const current: { stop: () => void }[] = [];
  const taken = nodes.map(() => {
    let done!: () => void;
    const p = new Promise<void>((r) => (done = r));
    return { p, done };
  });
  nodes.forEach((n, k) => {
    void (async () => {
      for (let pause = 1000; !stopped; pause = Math.min(5000, pause * 2)) {
        let said = "";
        const h = sshs[k].hold(`bash ${shellQuote(n.transaction)} prove ${token}`, (text) => {
          said += text;
          if (/^@@taken$/m.test(said)) taken[k].done();
        });
        current[k] = h;
        const code = await h.ended;
        taken[k].done();
        // 0: it ended by itself (the note ended, or prove_s ran out); 255: ssh's own failure.
        if (stopped || code === 0) return;
        if (code !== 255) {
          say(`cannot keep the rollout note of ${sshs[k].conn.host} claimed (\`transaction.sh prove\` ended with ${code}); other stacks may take the host once its claim runs out`);
          return;
        }
        await new Promise((r) => setTimeout(r, pause));
      }
    })();
  });
  const bound = new Promise<void>((r) => setTimeout(r, PROVE_TAKEN_MS).unref());
  return {
    release: () => {
      stopped = true;
      for (const h of current) h?.stop();
      for (const t of taken) t.done();
    },
    taken: Promise.race([Promise.all(taken.map((t) => t.p)).then(() => undefined), bound]),
  };
}

/** How long readiness waits for its \`prove\` sessions to take the rollout note up before it looks anyway. */
const PROVE_TAKEN_MS = 15_000;

/**
 * A host step of the transaction over this step's SSH connection, bounded by the step's own
 * bound (script.ts transactionBoundSeconds, from the stack's timeouts) plus a minute for the
 * connection: whatever the host does, the call ends.
 */
async function transaction(ssh: Ssh, n: ReadyNode, t: Target, args: string, input?: string): Promise<{ code: number; out: string }> {
  const boundS = transactionBoundSeconds({ lockWaitSeconds: t.safety.lockWaitSeconds, timeouts: t.timeouts, commandSeconds: t.timeouts.commandSeconds ?? 30, startSeconds: startTimeoutSeconds(t.timeouts) });
  const r = await ssh.run(`bash ${shellQuote(n.transaction)} ${args}`, { input, timeoutMs: (boundS + 60) * 1000 });
  return { code: r.code, out: `${r.stdout}${r.stderr}`.trim() };
}

export interface NodeState {
  /** sha256 of the installed unit, or null. */
  hash: string | null;
  /** systemctl is-active. */
  state: string;
  /** The stack whose restart is still being proven on this host (the transaction's note), or null. */
  proving: string | null;
  /** The unit hash of a group restart that failed on this node and was not rolled back yet, or null. */
  groupFailed: string | null;
}

/**
 * Pure: a node's state from the read's output, or undefined when the read did not complete
 * (no `@@end` line: SSH refused or cut, exit 255, output cut short). An unobserved node is
 * never taken for one without the unit: that would restart a healthy group, or report drift
 * that is not there.
 */
export function parseNodeState(stdout: string, unitName: string, token?: string): NodeState | undefined {
  if (!/^@@end$/m.test(stdout)) return undefined;
  const field = (name: string) => new RegExp(`^@@${name} ?(.*)$`, "m").exec(stdout)?.[1].trim() ?? "";
  const [hash, state] = [field("hash"), field("state")];
  if (!state) return undefined;
  const [noteStack, noteUnit] = field("note").split(" ");
  const failedHash = field("groupfailed").split(" ")[0];
  // A note another readiness step already took up (the transaction's \`prove TOKEN\`): a restart
  // an earlier \`up\` made and proved, not one this step is to prove, however fresh its note.
  const [provedStack, provedUnit, provedBy] = field("proved").split(" ");
  const takenUp = provedStack === noteStack && provedUnit === noteUnit && provedBy !== undefined && provedBy !== token;
  return { hash: /^[0-9a-f]{64}$/.test(hash) ? hash : null, state, proving: noteUnit === `${unitName}.service` && !takenUp ? noteStack : null, groupFailed: /^[0-9a-f]{64}$/.test(failedHash) ? failedHash : null };
}

/**
 * Pure: the nodes (ranks) whose group restart failed in this `up` and the lines that say why.
 * A node of a group does not roll back alone: its transaction prints `@@failed` and leaves a
 * mark for the unit it tried (transaction.sh restart). Only a mark still on the node counts,
 * so a failure that an earlier `up` already rolled back (its output stays in state) is
 * retried, not reported again.
 */
export function groupFailures(outputs: string[], live: NodeState[], unitHashes: string[]): { rank: number; why: string }[] {
  return outputs
    .map((out, rank) => ({ out, rank }))
    // A node whose session dropped after the go never printed its @@failed: its mark alone counts.
    .filter(({ out, rank }) => (/^@@failed$/m.test(out) || droppedOut(out)) && live[rank]?.groupFailed === unitHashes[rank])
    .map(({ out, rank }) => ({
      rank,
      why:
        out.split("\n").filter((l) => /FAILED/.test(l) && !/rolls back as one/.test(l)).join("\n") ||
        (droppedOut(out) ? "its session dropped after the group's go, and its restart then failed on the host (its group-failed mark; `journalctl -u 'dflash-step-*'` there says why)" : "its restart failed (see its output above)"),
    }));
}

/** Reads of a node's state before it counts as unobservable, and the pause between them. */
const NODE_READS = 6;
const NODE_READ_PAUSE_MS = 2_000;

/**
 * What the node runs, read again (for about 10 s) while the host cannot be observed; throws,
 * saying nothing was decided or changed, if it never can.
 */
async function nodeState(ssh: Ssh, unitName: string, token?: string): Promise<NodeState> {
  const script = renderHostScript({
    about: [`dflash-sglang: what runs of ${unitName} (reads only).`],
    set: "-u",
    values: { unit_path: unitPath(unitName), service: `${unitName}.service`, run: RUN_DIR, group_failed: `${STATE_DIR}/${unitName}/group-failed` },
    files: ["node-state.sh"],
  });
  let why = "";
  for (let read = 1; ; read++) {
    const r = await ssh.run(bashCommand(script), { timeoutMs: 20_000 }).catch((e: Error) => e);
    const state = r instanceof Error ? undefined : parseNodeState(r.stdout, unitName, token);
    if (state) return state;
    why = r instanceof Error ? r.message : `ssh exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").pop()}` : ""}`;
    if (read >= NODE_READS) break;
    await new Promise((res) => setTimeout(res, NODE_READ_PAUSE_MS));
  }
  throw new Error(`could not observe ${unitName} on ${ssh.conn.host} (${NODE_READS} reads, last: ${why}); nothing was decided or changed from it: run the command again once the host answers`);
}

const running = (n: NodeState) => n.state === "active" || n.state === "activating";

/** What a node runs, as state records it: a unit stopped by hand reads as a different unit (drift). */
const liveHash = (n: NodeState) => (n.hash === null ? "not-installed" : running(n) ? n.hash : `${n.hash} (${n.state})`);

/**
 * Proves the group serves the new configuration. If a node does not run this stack's unit
 * (the last attempt was rolled back, or the unit was edited by hand), the restart is run
 * again first: the restart command already succeeded and would not. On failure, every node
 * is put back on its last known-good unit and the update fails with both stories; this
 * resource's state then still describes the last proven configuration, so the next `up`
 * proves (and, if needed, restarts) again.
 */
/** How long the readiness step tries again to reach nodes that refuse its connection as it starts. */
export const SSH_HICCUP_SECONDS = 15;

/**
 * Readiness; for a fleet's replica (`balancer`), the replica is put back into the balancer
 * afterwards, whether its new configuration was proven or it rolled back (fleet/remote/balancer.ts).
 */
export async function applyReady(i: ReadyInputs): Promise<ReadyOutputs> {
  if (!i.balancer) return proveReady(i);
  const b = i.balancer;
  // Out of the balancer first, here too: readiness restarts a replica itself where the last
  // attempt rolled back or the program found it running something else. A replica this \`up\`'s
  // restart took out is still out (leaveUnlessOut); one out by a run cut short is not checked
  // against minHealthy again.
  await leaveUnlessOut(b, i.target.label, i.target.urn);
  return rejoinAfter(b, i.target.label, i.target.urn, () => proveReady(i));
}

async function proveReady(i: ReadyInputs): Promise<ReadyOutputs> {
  const t = i.target;
  const sshs: Ssh[] = [];
  let release = () => undefined as void;
  try {
    // The restart reached each node a moment ago: a node that refuses the connection now is
    // having a hiccup, and "could not observe" is never "it died": tried again for up to
    // SSH_HICCUP_SECONDS in all (not on top of each node's, nor of the readiness deadline's).
    // A node of a group that dropped out during its restart (group-restart.ts LOST_MARK: a
    // reboot, a power cut) is waited for up to timeouts.rebootSeconds: the group may be split
    // (some nodes on the new rank), and only this step can restart it as one or roll it back.
    const hiccupEnds = Date.now() + SSH_HICCUP_SECONDS * 1000;
    const rebootEnds = Date.now() + t.timeouts.rebootSeconds * 1000;
    for (const n of i.nodes) {
      const lost = i.nodes.length > 1 && droppedOut(n.restartOutput);
      const wait = lost ? `${t.timeouts.rebootSeconds} s (timeouts.rebootSeconds): it dropped out during the group's restart, and the group is put back together once it answers` : `${SSH_HICCUP_SECONDS} s`;
      sshs.push(
        await Ssh.open(n.connection, {
          retryMs: Math.max(0, (lost ? rebootEnds : hiccupEnds) - Date.now()),
          onRetry: (why) => void progress(t.urn, `${t.label}: cannot reach ${n.connection.host} over SSH now (${why.split("\n")[0]}); trying again for up to ${wait}`, false),
        }).catch((e: Error) => {
          if (!lost) throw e;
          throw new Error(`${n.connection.host} dropped out during the group's restart and did not answer over SSH within ${t.timeouts.rebootSeconds} s (timeouts.rebootSeconds): ${e.message.split("\n")[0]}. The group may be split (other nodes may run the new rank); once the host is back, run \`pulumi up\` again: it restarts the group as one or rolls it back.`);
        }),
      );
    }
    // This step's name for the transaction's \`prove\` (parseNodeState): hex, safe in a command line.
    const token = randomBytes(8).toString("hex");
    const proving = keepProving(sshs, i.nodes, token, (line) => void progress(t.urn, `${t.label}: ${line}`, false));
    release = proving.release;
    await proving.taken;
    const nodes: NodeStep[] = i.nodes.map((n, rank) => ({
      ssh: sshs[rank],
      t: rank === 0 ? t : { ...t, label: `${t.label} node ${rank} (${n.connection.host})` },
      staged: { stagedPath: n.transaction, unitHash: n.unitHash },
    }));
    const results = i.nodes.map((n) => parseRestartResult(n.restartOutput));
    // A node whose session dropped may not have rebooted at all (a network blip): its restart
    // goes on there, in its host step under the host lock. It is read once that step has ended
    // (the lock is free; after a reboot it is at once), never mid-drain, which would read as a
    // node to restart again.
    await Promise.all(
      i.nodes.map(async (n, k) => {
        if (i.nodes.length < 2 || !droppedOut(n.restartOutput)) return;
        const finish = groupFinishSeconds(t.timeouts);
        const wait = renderHostScript({ about: [`dflash-sglang: wait until no host step holds the lock of ${n.connection.host}.`], set: "-u", values: { lock: `${RUN_DIR}/host.lock`, finish_s: Math.ceil(finish) }, files: ["wait-lock.sh"] });
        const r = await sshs[k].run(bashCommand(wait), { timeoutMs: (finish + 30) * 1000 }).catch((e: Error) => ({ code: -1, stdout: "", stderr: e.message }));
        if (r.code !== 0) await progress(t.urn, `${nodes[k].t.label}: its restart's host step still holds the host lock after ${finish} s (or the wait failed: ${r.stderr.trim().split("\n").pop() ?? `exit ${r.code}`}); reading the node as it is`, false);
      }),
    );
    const live = await Promise.all(nodes.map((n) => nodeState(n.ssh, t.unitName, token)));
    // A group restarts as one: a node whose restart failed (a drain or GPU deadline) did not
    // roll back alone; the whole group goes back to its known-good configuration here.
    await failGroupIf(groupFailures(i.nodes.map((n) => n.restartOutput), live, i.nodes.map((n) => n.unitHash)), nodes, i);
    // A node needs the restart again when it runs another unit, or when this unit is not
    // running and no restart of this stack is being proven (so it was stopped, not just started).
    const off = live.map((n, k) => (n.hash !== i.nodes[k].unitHash || (!running(n) && n.proving !== t.stack) ? k : -1)).filter((k) => k >= 0);
    if (off.length > 0) {
      const which = off.map((k) => (k === 0 ? i.nodes[0].connection.host : `node ${k} (${i.nodes[k].connection.host})`)).join(", ");
      await progress(t.urn, `${t.label}: ${which} do${off.length > 1 ? "" : "es"} not run this stack's unit (rolled back after the last attempt, edited or stopped by hand); restarting${i.nodes.length > 1 ? " the group" : ""}`, false);
      // A group restarts as a whole (one node cannot rejoin a group that is already up), behind
      // its barrier (group-restart.ts): a node that fails or stalls first stops nothing anywhere.
      const again =
        i.nodes.length > 1
          ? (await restartGroup(sshs, { nodes: i.nodes, secretStdin: i.secretStdin, prepareSeconds: groupPrepareSeconds(t.safety.lockWaitSeconds), finishSeconds: groupFinishSeconds(t.timeouts), label: t.label, urn: t.urn }, true)).map((out) => ({ code: 0, out }))
          : await Promise.all(i.nodes.map((n, k) => transaction(sshs[k], n, t, `restart ${n.unitHash}`, i.secretStdin)));
      const failed = again.find((r) => r.code !== 0);
      // What failed first, then the progress lines that led to it.
      if (failed) throw new Error([...failed.out.split("\n").filter((l) => /FAILED|HOST DOWN|RECOVERING/.test(l)), ...failed.out.split("\n").filter((l) => !/FAILED|HOST DOWN|RECOVERING/.test(l))].join("\n"));
      const relive = await Promise.all(nodes.map((n) => nodeState(n.ssh, t.unitName, token)));
      await failGroupIf(groupFailures(again.map((r) => r.out), relive, i.nodes.map((n) => n.unitHash)), nodes, i);
      again.forEach((r, k) => (results[k] = parseRestartResult(r.out)));
    }
    if (t.curlAuth) {
      // What SGLang breaks and we cannot mend: say it once per restart, plainly.
      await progress(t.urn, `${t.label}: note: SGLang logs its start-up arguments, API key included, so the journal of ${t.unitName} on ${i.nodes.map((n) => n.connection.host).join(", ")} holds the key in clear (sgl-project/sglang issue #37457); whoever can read that journal (root, groups systemd-journal and adm) can read the key. See README, "Secrets".`, false);
    }
    let ready: ReadinessResult;
    try {
      ready = await waitReadyGroup(nodes, { expectedArgs: i.expectedArgs, modelName: i.modelName });
    } catch (e) {
      // Say it now: restoring the previous configuration takes a full restart.
      await progress(t.urn, `${t.label}: FAILED: ${(e as Error).message.split("\n")[0]}${t.safety.rollback ? "; rolling back" : ""}`, false);
      throw new Error(`${(e as Error).message}\n${await rollback(nodes, i)}`);
    }
    const note = JSON.stringify({ stack: t.stack, expectedArgs: i.expectedArgs, modelName: i.modelName, recordedAt: new Date().toISOString() });
    let generation: number | null = null;
    for (const [k, n] of i.nodes.entries()) {
      const r = await transaction(sshs[k], n, t, `good ${n.unitHash}`, note);
      if (r.code !== 0) throw new Error(`${nodes[k].t.label}: recording the known-good unit failed: ${r.out}`);
      const g = /^@@generation (\d+)$/m.exec(r.out);
      if (k === 0 && g) generation = Number(g[1]);
    }
    if (generation !== null) await progress(t.urn, `${t.label}: proven: generation ${generation} on ${i.nodes[0].connection.host} is the known-good configuration now`, false);
    const first = results[0];
    const timings: Timings = {
      drainSeconds: first?.drainSeconds ?? 0,
      stopSeconds: first?.stopSeconds ?? 0,
      gpuReleaseSeconds: Math.max(0, ...results.map((r) => r?.gpuReleaseSeconds ?? 0)),
      loadToReadySeconds: loadToReady(first?.at, ready),
      requestsCut: first ? first.requestsCut : 0,
      drained: first?.applied !== false && (first?.previousMainPid ?? 0) > 0,
    };
    return { ...i, mainPid: ready.mainPid, acceptLength: ready.acceptLength, serverArgs: ready.serverArgs, timings, generation };
  } finally {
    release();
    for (const ssh of sshs) ssh.close();
  }
}

/** Fails the update when nodes of the group failed their restart, after rolling the whole group back. */
async function failGroupIf(failures: { rank: number; why: string }[], nodes: NodeStep[], i: ReadyInputs): Promise<void> {
  if (failures.length === 0) return;
  const t = nodes[0].t;
  const what = failures.map((f) => `${nodes[f.rank].t.label}: ${f.why}`).join("\n");
  await progress(t.urn, `${t.label}: FAILED on ${failures.length} node(s) of the group${t.safety.rollback ? "; rolling the whole group back" : ""}`, false);
  throw new Error(`${what}\n${await rollback(nodes, i)}`);
}

/**
 * Every node back on its last known-good unit (the transaction's rollback), then proven
 * like any configuration. Never throws: its result is appended to the error that caused it.
 */
async function rollback(nodes: NodeStep[], i: ReadyInputs): Promise<string> {
  const t = nodes[0].t;
  const where = nodes.map((n) => n.ssh.conn.host).join(", ");
  try {
    // A group rolls back whole or not at all. A node that cannot be reached (a power cut, a
    // reboot) is waited for up to timeouts.rebootSeconds, as the restart waits for one; one
    // still away then keeps the new unit, installed and enabled, and starts it when it is back:
    // rolling back only the others would leave the group on two configurations.
    if (nodes.length > 1) {
      const until = Date.now() + t.timeouts.rebootSeconds * 1000;
      const reach = async (n: NodeStep): Promise<string> => {
        for (let told = false; ; told = true) {
          const why = await n.ssh.run("true", { timeoutMs: 15_000 }).then((r) => (r.code === 0 ? "" : r.stderr.trim().split("\n").pop() || `exit status ${r.code}`), (e: Error) => e.message);
          if (why === "" || Date.now() >= until) return why;
          if (!told) await progress(t.urn, `${n.t.label}: cannot reach ${n.ssh.conn.host} over SSH now (${why}); waiting up to ${t.timeouts.rebootSeconds} s (timeouts.rebootSeconds) to roll the whole group back`, false);
          await new Promise((r) => setTimeout(r, 1000));
        }
      };
      const reached = await Promise.all(nodes.map(reach));
      const lost = nodes.map((n, k) => (reached[k] === "" ? "" : `${n.t.label} (${n.ssh.conn.host}: ${reached[k]})`)).filter((x) => x !== "");
      if (lost.length) {
        return `NOT ROLLED BACK: ${lost.join("; ")} did not answer within ${t.timeouts.rebootSeconds} s (timeouts.rebootSeconds). Rolling back only the nodes that answer would leave the group on two configurations, so every node keeps the new one, installed and enabled: the group comes back on it by itself once every node is up (systemd starts each rank again until the group is whole), or stays down if the new configuration itself cannot run. Run \`pulumi up\` again once every node answers: it proves what serves, or rolls the whole group back.`;
      }
    }
    const back = await Promise.all(i.nodes.map((n, k) => transaction(nodes[k].ssh, n, nodes[0].t, `rollback ${n.unitHash}`)));
    const stopped = back.findIndex((r) => r.code !== 0);
    if (stopped >= 0) {
      const r = back[stopped];
      const said = r.out.split("\n").filter((l) => !l.startsWith(t.label)).join("\n") || r.out;
      // The step said how it ended (restored, recovering, HOST DOWN, rollback off): that stands.
      if (ROLLBACK_VERDICT.test(r.out)) return said;
      // It ended without a word of it (the OOM killer, an operator's kill, a wedged systemd):
      // what the node runs now, read from the node, is what the user needs.
      return `${await afterKilledRollback(nodes[stopped], i.nodes[stopped].unitHash, r.code)}${said ? `\n${said}` : ""}`;
    }
    // The known-good generation the transaction restored ($state/known-good, host/known-good.sh).
    const read = await nodes[0].ssh.run(
      bashCommand(renderHostScript({ about: [`dflash-sglang: the known-good configuration of ${t.unitName}.`], set: "-u", values: { state: `${STATE_DIR}/${t.unitName}`, curl_headers: secretPaths(t.unitName).curlHeaders }, files: ["known-good.sh"] })),
    );
    const [head, noteText = ""] = read.stdout.split("\n@@note\n");
    const note = JSON.parse(noteText) as { stack: string; expectedArgs: ReadyInputs["expectedArgs"]; modelName: string };
    const good = /^@@good (\S*)$/m.exec(head)?.[1] ?? "";
    const generation = /^@@generation (\d+)$/m.exec(head)?.[1];
    const started = Date.now();
    // The previous configuration listens where it did: on its own port, which a change of
    // service.port moved the target away from.
    const port = typeof note.expectedArgs.port === "number" ? note.expectedArgs.port : undefined;
    // ...and with the secrets it ran with, which the rollback put back: its key, or none,
    // whatever the failed configuration had (a key removed, added or rotated).
    const headers = secretPaths(t.unitName).curlHeaders;
    const curlAuth = /^@@keyed yes$/m.test(head) ? ` -H @${headers}` : "";
    const on = (t: Target): Target => ({ ...t, curlAuth, ...(port === undefined || port === t.port ? {} : { port, serverUrl: t.serverUrl.replace(/:\d+$/, `:${port}`) }) });
    const labelled = nodes.map((n) => ({ ...n, t: { ...on(n.t), label: `${n.t.label} rollback to stack ${note.stack}` } }));
    const ready = await waitReadyGroup(labelled, { expectedArgs: note.expectedArgs, modelName: note.modelName });
    return `Rolled back: the previous configuration (stack ${note.stack}, unit ${good}) is back and serving on ${where}${generation ? ` as generation ${generation}` : ""} (pid ${ready.mainPid}, ${Math.round((Date.now() - started) / 100) / 10} s to restore).`;
  } catch (e) {
    return `ROLLBACK FAILED, HOST DOWN: restoring the previous configuration of ${t.unitName} on ${where} failed: ${(e as Error).message}`;
  } finally {
    await Promise.all(i.nodes.map((n, k) => transaction(nodes[k].ssh, n, nodes[0].t, "release").catch(() => undefined)));
  }
}

/** A line by which the transaction's rollback step says how it ended. */
const ROLLBACK_VERDICT = /Rolled back:|HOST DOWN|RECOVERING:|Rollback is off|NOT ROLLED BACK/;

/**
 * Pure: what a node runs after a rollback step that ended without its verdict (killed), in
 * words: its unit's state and which configuration is installed (`failedHash`: the one that
 * failed), saying HOST DOWN where nothing of it runs.
 */
export function killedRollbackWords(label: string, host: string, code: number, unitName: string, state: Pick<NodeState, "hash" | "state"> | undefined, failedHash: string, why = ""): string {
  const ended = `the rollback's host step on ${host} ended before it finished (exit status ${code}: killed, e.g. by the OOM killer or an operator)`;
  if (!state) return `ROLLBACK FAILED, HOST DOWN?: ${label}: ${ended}, and the node could not be read since (${why}): nothing is known to serve. Run \`pulumi up\` again once the host answers.`;
  const installed = state.hash === null ? "no unit of it is installed" : state.hash === failedHash ? `the configuration that failed (${failedHash.slice(0, 12)}) is still installed` : `the previous configuration (${state.hash.slice(0, 12)}) is installed`;
  if (state.state === "active") return `ROLLBACK INTERRUPTED: ${label}: ${ended}; ${installed} and ${unitName} is active (serving; not proven by this run). Run \`pulumi up\` again: it proves what serves, or restores the previous configuration.`;
  if (state.state === "activating") return `ROLLBACK INTERRUPTED: ${label}: ${ended}; ${installed} and ${unitName} is still starting (activating), so nothing serves yet. Run \`pulumi up\` again: it proves what serves, or restores the previous configuration.`;
  return `ROLLBACK FAILED, HOST DOWN: ${label}: ${ended}; ${installed} and ${unitName} is ${state.state || "not running"}: nothing serves. Run \`pulumi up\` again: it restores the previous configuration.`;
}

/** A node after a rollback step that ended without its verdict: read, then said (never throws). */
async function afterKilledRollback(n: NodeStep, failedHash: string, code: number): Promise<string> {
  const t = n.t;
  const state = await nodeState(n.ssh, t.unitName).catch((e: Error) => e);
  return state instanceof Error ? killedRollbackWords(t.label, n.ssh.conn.host, code, t.unitName, undefined, failedHash, state.message.split("\n")[0]) : killedRollbackWords(t.label, n.ssh.conn.host, code, t.unitName, state, failedHash);
}

/**
 * Where the node's known-good record goes when this teardown is half of a replacement, as
 * the transaction's `remove` arguments: [unit name now] when the stack's configuration gives
 * the node (same address and port) another unit name; [unit name now, machine id] when it
 * names another address or port, with the machine id read through that address, so that the
 * record is kept only if both reach one machine. [] for a plain teardown (destroy, a node
 * dropped, a configuration that cannot be read or a new address that does not answer).
 */
async function carryTo(o: PresenceInputs, configured: NodeConnection | undefined, unit: string | undefined): Promise<string[]> {
  if (!configured || !unit) return [];
  if (configured.host === o.where[0] && configured.port === o.where[1]) return unit !== o.unitName ? [unit] : [];
  const id = await Ssh.once(configured, "cat /etc/machine-id").catch(() => undefined);
  const machine = id?.code === 0 ? id.stdout.trim() : "";
  return /^[0-9a-f]{32}$/.test(machine) ? [unit, machine] : [];
}

/** Reads a key of the stack's configuration as the engine handed it to the provider. */
export type ConfigGetter = (key: string) => string | undefined;

/** The unit name and every node's connection as the stack's configuration names them now; none if it cannot be read. */
function configuredNodes(config: ConfigGetter | undefined, stack: string): Partial<ConfiguredNodes> & { connections: NodeConnection[] } {
  if (!config) return { connections: [] };
  try {
    return nodesFromConfig(config, stack);
  } catch {
    return { connections: [] };
  }
}

/**
 * The connection to use for a node the state knows as `recorded`: the credentials the
 * stack's configuration holds now (a rotated SSH key or host key, another SSH user and how it
 * becomes root) when it still names the same address and port for that node; otherwise (the
 * node moved, or the configuration cannot be read) the recorded one, which reaches the old place.
 */
export function currentConnection(recorded: Connection, now: NodeConnection | undefined): Connection {
  if (!now || now.host !== recorded.host || now.port !== recorded.port) return recorded;
  const { become: _recorded, ...rest } = recorded;
  return { ...rest, user: now.user, hostKey: now.hostKey, privateKey: now.privateKey, ...(now.become ? { become: now.become } : {}) };
}

/**
 * Without --run-program, `refresh` and `destroy` hand the providers the configuration of the
 * last `up`, so a key rotated since then is not seen: say so where SSH is refused.
 */
function withRotationHint(e: unknown): Error {
  const m = (e as Error).message;
  if (!/^(SSH to|cannot reach) /.test(m)) return e as Error;
  return new Error(`${m}\nIf the SSH key or the host key changed since the last \`pulumi up\`, run this with --run-program (\`pulumi refresh --run-program\`, \`pulumi destroy --run-program\`): the providers then take the credentials from the stack's configuration instead of the last \`up\`'s.`);
}

/** What every node really runs: a unit edited or stopped by hand shows up as a changed unit hash (drift). */
export async function readReady(o: ReadyOutputs, config?: ConfigGetter): Promise<ReadyOutputs> {
  const live: string[] = [];
  const configured = configuredNodes(config, o.target.stack).connections;
  const nodes = o.nodes.map((n, rank) => ({ ...n, connection: currentConnection(n.connection, configured[rank]) }));
  for (const n of nodes) {
    const ssh = await Ssh.open(n.connection).catch((e) => Promise.reject(withRotationHint(e)));
    try {
      live.push(liveHash(await nodeState(ssh, o.target.unitName)));
    } finally {
      ssh.close();
    }
  }
  // A node whose unit differs from the one proven reads as a changed input: `up` restarts it.
  return { ...o, nodes: nodes.map((n, k) => ({ ...n, unitHash: live[k] })) };
}

/**
 * The readiness resource's delete (a `destroy`): on each node, a unit of this stack that a
 * rename left serving for a restart that never ran (its engine killed between the old unit's
 * teardown and the new one's presence) is removed by the old unit's own transaction, kept
 * beside the rename's marker (script.ts, `remove` with a new name). The presences' deletes,
 * which come after, remove the rest.
 */
export async function removeInterruptedRenames(o: ReadyOutputs, config?: ConfigGetter): Promise<void> {
  const configured = configuredNodes(config, o.target.stack).connections;
  const script = renderHostScript({
    about: [`dflash-sglang: remove what an interrupted rename of stack ${o.target.stack} left.`],
    set: "-u",
    // The line of the header of a transaction of this stack (hostScript.ts hostValues).
    values: { state_root: STATE_DIR, stack_line: hostValues({ stack: o.target.stack }) },
    files: ["remove-renames.sh"],
  });
  const fleet = configuredNodes(config, o.target.stack).fleet === true;
  for (const [rank, n] of o.nodes.entries()) {
    const connection = currentConnection(n.connection, configured[rank]);
    const r = await Ssh.once(connection, bashCommand(script), 30 * 60_000).catch((e) => (fleet && e instanceof Unreachable ? undefined : Promise.reject(withRotationHint(e))));
    // A fleet's replica whose host is down: its presence's delete names what stays there.
    if (r === undefined) continue;
    const out = `${r.stdout}${r.stderr}`.trim();
    if (out) await progress(o.target.urn, out, false);
    if (r.code !== 0) throw new Error(`removing what an interrupted rename of ${o.target.unitName} (stack ${o.target.stack}) left on ${connection.host} failed (exit ${r.code}): ${out || "no output"}`);
  }
}

/** What this stack has on one node: deleting it drains, stops and removes all of it. */
export interface PresenceInputs {
  connection: Connection;
  rank: number;
  stack: string;
  unitName: string;
  /** Where the unit lives ([address, port, unitName]): a change replaces this resource, old one first. */
  where: [string, number, string];
  /** The node's staged transaction script. */
  transaction: string;
  /** Removes what is left of the stage folder (render's stage removal). */
  stageRemoval: string;
  /** This resource's URN, for progress lines. */
  urn: string;
  providerVersion: string;
}

/**
 * Drains, stops and removes this stack's unit, secret files, known-good record and staged
 * files from the node (the transaction's `remove`, which leaves a unit another stack owns
 * alone), with the credentials the configuration holds now where it still names this node.
 */
export async function removePresence(o: PresenceInputs, config?: ConfigGetter, replacing?: boolean): Promise<void> {
  const now = configuredNodes(config, o.stack);
  const configured = now.connections[o.rank];
  const connection = currentConnection(o.connection, configured);
  // Only the first half of a replacement carries anything over; a destroy's teardown (whatever
  // the stack's configuration names now but never applied: campaign seed 3012) removes.
  // `replacing` undefined: the delete of a presence recorded by an older version, whose
  // provider code (kept in state) does not say; judged by the configuration, as it was then.
  const carry = replacing === false ? [] : await carryTo(o, configured, now.unitName);
  const script = renderHostScript({
    about: [`dflash-sglang: remove ${o.unitName} of stack ${o.stack}.`],
    set: "-u",
    values: { transaction: o.transaction, carry, stage_removal: { text: o.stageRemoval } },
    files: ["remove.sh"],
  });
  const r = await Ssh.once(connection, bashCommand(script), 30 * 60_000).catch((e) => (now.fleet === true && e instanceof Unreachable ? e : Promise.reject(withRotationHint(e))));
  if (r instanceof Unreachable) {
    // A fleet does not wait for a dead replica: it left the balancer's configuration already
    // (the balancer is updated first); what it ran stays on its host, named here.
    await progress(
      o.urn,
      `${o.unitName} (stack ${o.stack}) on ${connection.host} was not removed: ${r.message}. The replica is out of the fleet and its balancer; its unit and this stack's files stay on that host. ` +
        `When the host is back, remove them there (\`systemctl disable --now ${o.unitName}.service\`, then delete ${unitPath(o.unitName)} and ${o.transaction.replace(/\/[^/]*$/, "")}), or add it to fleet.replicas again and run \`pulumi up\`.`,
      false,
    );
    return;
  }
  const out = `${r.stdout}${r.stderr}`.trim();
  if (out) await progress(o.urn, out, false);
  if (r.code !== 0) throw new Error(`removing ${o.unitName} (stack ${o.stack}) from ${o.connection.host} failed (exit ${r.code}): ${out || "no output"}`);
}
