// The restart of a group (deployment `nodes:`), driven from one place, in three phases over one
// transaction per node (why: script.ts, GROUP_PREPARE_MARGIN_SECONDS). Phase 1: every node's
// transaction takes its lock, runs its checks and reads its secrets, and says `@@prepared`.
// Phase 2: only once every node has, each is sent `go` (`go idle` to the further nodes when node 0
// serves nothing: they need not wait for their ranks to end with its server) and drains and
// stops, then says `@@stopped`. Phase 3: only once every node has stopped (or ended), each is
// sent `start` and starts its new rank, so that no old rank still running anywhere joins a new
// one (script.ts groupStartWaitSeconds). A node that fails or stalls before it is prepared calls
// the group off: the others are sent `abort`, and nothing has stopped anywhere. Every wait is
// bounded by the stack's own timeouts.
import { Connection, RunResult, Ssh } from "./ssh";
import { progress } from "./progress";
import { shellQuote } from "../render";

/** One node of the group, as the restart needs it. */
export interface GroupNode {
  connection: Connection;
  unitHash: string;
  /** The staged transaction script on this node. */
  transaction: string;
}

export interface GroupRestartInputs {
  nodes: GroupNode[];
  /** The restart's stdin (secret files, script.ts secretFileOrder): every node's. */
  secretStdin: string;
  /** How long every node may take to be prepared (script.ts groupPrepareSeconds). */
  prepareSeconds: number;
  /** How long a node may take after its go (script.ts groupFinishSeconds). */
  finishSeconds: number;
  label: string;
  urn?: string;
  providerVersion: string;
}

export type GroupRestartOutputs = GroupRestartInputs & {
  /** Each node's output (stdout and stderr), in rank order: it holds an `@@result {json}` or `@@failed` line. */
  outputs: string[];
};

/** Where a node of the group is, as its transaction says it (`@@phase`, `@@prepared`) and as it ends. */
interface NodeRun {
  name: string;
  phase: string;
  prepared: boolean;
  /** Node 0 said it serves nothing (`@@prepared idle`). */
  idle: boolean;
  /** It has stopped its old rank and waits for the group's `start`. */
  stopped: boolean;
  lastLine: string;
  session: ReturnType<Ssh["converse"]>;
  result?: RunResult;
}

const outputOf = (r: RunResult) => `${r.stdout}${r.stderr}`.trim();

/** A node that ended before its barrier: with nothing to restart there (it already runs this unit with these secrets), or failed. */
const nothingToDo = (r: RunResult) => r.code === 0 && /^@@result /m.test(r.stdout);

/**
 * The line a node's output ends with when its session dropped after the group's go, before its
 * transaction said how it ended (`@@result` or `@@failed`): the host rebooted, lost power or
 * its network, and may run either rank now (handlers.ts applyReady reads it).
 */
export const LOST_MARK = "@@lost";

/**
 * Pure: a node's session, open since phase 1, ended by ssh itself (exit 255: the connection
 * closed or reset) before its transaction's last word.
 */
export function lostAfterGo(r: RunResult): boolean {
  return r.code === 255 && !/^@@(result |failed$)/m.test(r.stdout);
}

const lostWhy = (r: RunResult) => `its SSH session ended with exit 255${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").pop()}` : ""}`;

/** The FAILED lines a node printed, first, then the rest that is not a protocol line. */
function failureText(out: string): string {
  const lines = out.split("\n").filter((l) => l && !l.startsWith("@@"));
  return [...lines.filter((l) => /FAILED|HOST DOWN/.test(l)), ...lines.filter((l) => !/FAILED|HOST DOWN/.test(l)).slice(-3)].join("\n");
}

/**
 * Restarts every node of the group at once behind the barrier. Returns each node's output
 * once every node's transaction has ended after its go (a failure past the barrier is the
 * transaction's `@@failed`, which readiness turns into the group's rollback). Throws when the
 * group was called off before anything stopped, naming the node that failed or stalled and
 * where; or when a node's transaction did not end within its bound after its go.
 */
export async function restartGroup(sshs: Ssh[], i: Omit<GroupRestartInputs, "providerVersion">, force = false): Promise<string[]> {
  const say = (line: string) => void progress(i.urn, line);
  // Called on every line and end of a node's transaction, once phase 1 waits for them.
  let changed = () => undefined as void;
  const runs: NodeRun[] = i.nodes.map((n, rank) => {
    const run: NodeRun = { name: `node ${rank} (${n.connection.host})`, phase: "connecting", prepared: false, idle: false, stopped: false, lastLine: "", session: undefined as never };
    let partial = "";
    run.session = sshs[rank].converse(`bash ${shellQuote(n.transaction)} restart ${n.unitHash}${force ? " force" : ""}`, i.secretStdin, (text) => {
      const lines = (partial + text).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        if (line === "@@prepared" || line === "@@prepared idle") {
          run.prepared = true;
          run.idle = line === "@@prepared idle";
          run.phase = "ready to stop its old server (waiting for the group's go)";
        } else if (line === "@@stopped") {
          run.stopped = true;
          run.phase = "its old server stopped (waiting for every node to stop theirs)";
        } else if (line.startsWith("@@phase ")) run.phase = line.slice("@@phase ".length);
        else if (line && !line.startsWith("@@")) {
          run.lastLine = line;
          say(line);
        }
        changed();
      }
    });
    void run.session.ended.then((r) => {
      run.result = r;
      changed();
    });
    return run;
  });

  // Phase 1: every node prepared (or with nothing to restart), or one of them failed, or the bound.
  const passed = (r: NodeRun) => r.prepared || (r.result !== undefined && nothingToDo(r.result));
  const failed = (r: NodeRun) => !r.prepared && r.result !== undefined && !nothingToDo(r.result);
  const verdict = await new Promise<"go" | "failed" | "stalled">((resolve) => {
    const timer = setTimeout(() => resolve("stalled"), i.prepareSeconds * 1000);
    changed = () => {
      const v = runs.some(failed) ? "failed" : runs.every(passed) ? "go" : undefined;
      if (v === undefined) return;
      clearTimeout(timer);
      changed = () => undefined;
      resolve(v);
    };
    changed();
  });

  if (verdict !== "go") {
    // Called off: a prepared node reads `abort`, one still on its way (its lock, its checks)
    // reads it after its secrets; either ends with nothing stopped. Its lock goes with it.
    for (const r of runs) {
      r.session.send("abort");
      r.session.end();
    }
    // The prepared ones end at once; what they said is part of the story only when it is not the abort's echo.
    await Promise.all(runs.filter((r) => r.prepared).map((r) => r.session.ended));
    const why = runs
      .map((r, rank) => {
        if (failed(r)) return `${r.name}: ${failureText(outputOf(r.result!)) || `its restart ended with exit ${r.result!.code} before it was ready to stop`}`;
        if (verdict === "stalled" && !passed(r)) {
          return `${r.name}: FAILED: it did not get ready to stop its old server within ${i.prepareSeconds} s (safety.lockWaitSeconds + margins): it stalled while ${r.phase}${r.lastLine ? `; its last line: ${r.lastLine}` : ""}. Find what holds it on ${i.nodes[rank].connection.host}.`;
        }
        return undefined;
      })
      .filter((l): l is string => l !== undefined);
    const where = i.nodes.map((n) => n.connection.host).join(", ");
    throw new Error(`${why.join("\n")}\nNothing was stopped on any node of the group: its restart was called off before any node stopped its old server, and the old group goes on serving on ${where}. Fix the cause above and run \`pulumi up\` again.`);
  }

  // Phase 2: go, everywhere at once (a node with nothing to restart has ended already).
  const idle = runs[0].idle;
  for (const [rank, r] of runs.entries()) {
    if (r.prepared) r.session.send(rank > 0 && idle ? "go idle" : "go");
    else r.session.end();
  }
  say(`${i.label}: every node of the group is ready to stop its old server; restarting the group${idle ? ` (node 0 serves nothing: the other nodes stop their ranks at once)` : ""}`);
  // Phase 3: start, once every node has stopped its old rank or ended (failed, or lost: the
  // readiness step reads those); a node's transaction bounds its own wait for it.
  changed = () => {
    if (!runs.every((r) => r.stopped || r.result !== undefined)) return;
    changed = () => undefined;
    if (runs.some((r) => r.stopped && r.result === undefined)) say(`${i.label}: every node of the group has stopped its old server; starting the new configuration`);
    for (const r of runs) {
      if (r.result === undefined) r.session.send("start");
      r.session.end();
    }
  };
  changed();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const open = runs.filter((r) => r.result === undefined).map((r) => `${r.name} (${r.lastLine || r.phase})`);
      reject(new Error(`the restart of the group did not end within ${i.finishSeconds} s of its go on ${open.join(", ")} (timeouts.drainSeconds, stopSeconds and gpuReleaseSeconds allow that much): the host step goes on there under its lock; the next \`pulumi up\` proves what it left.`));
    }, i.finishSeconds * 1000);
  });
  try {
    const results = await Promise.race([Promise.all(runs.map((r) => r.session.ended)), late]);
    const broken = results.map((r, rank) => ({ r, rank })).filter(({ r }) => r.code !== 0 && !lostAfterGo(r));
    if (broken.length > 0) {
      throw new Error(broken.map(({ r, rank }) => `${runs[rank].name}: its restart ended with exit ${r.code} after the group's go: ${failureText(outputOf(r)) || "no output"}`).join("\n"));
    }
    // A node that dropped out (a reboot, a power cut) is not a failure of this step: some nodes
    // may already run the new rank, so the group is split, and only the readiness step, which
    // waits for the node to answer again (timeouts.rebootSeconds), can put it back together.
    results.forEach((r, rank) => {
      if (lostAfterGo(r)) say(`${i.label}: ${runs[rank].name} dropped out during the group's restart (${lostWhy(r)}): a reboot or a power cut? The readiness step waits for it, then restarts the group as one or rolls it back`);
    });
    return results.map((r) => (lostAfterGo(r) ? `${outputOf(r)}\n${LOST_MARK} ${lostWhy(r)}` : outputOf(r)));
  } finally {
    clearTimeout(timer);
    // Past the bound, no word is coming: each node's stdin ends (one that still waits for its start starts anyway).
    changed = () => undefined;
    for (const r of runs) r.session.end();
  }
}

/** The provider's create and update: opens every node, restarts the group, echoes the inputs with each node's output. */
export async function applyGroupRestart(i: GroupRestartInputs): Promise<GroupRestartOutputs> {
  const sshs: Ssh[] = [];
  try {
    for (const n of i.nodes) sshs.push(await Ssh.open(n.connection));
    return { ...i, outputs: await restartGroup(sshs, i) };
  } finally {
    for (const ssh of sshs) ssh.close();
  }
}
