// What a node runs now, read when the program runs (preview and up alike), so that a
// reviewer sees what `up` will change on the host, whichever stack put the live unit
// there, even for a stack that has never been deployed. Reads only.
import { Connection, NoRootAccess, Ssh } from "./ssh";
import { sha256, STATE_DIR, unitLineChanges, unitPath, unitStack } from "../render";
import { bashCommand, renderHostScript } from "../hostScript";
import { removedMarkPaths } from "../script";
import { redactSecrets } from "../parse";

export interface NodeView {
  host: string;
  /** Why the host could not be read at all (a fleet's replica that is down: ssh.ts Unreachable); nothing else is known then. */
  unreachable?: string;
  /** The installed unit's text, or null when the unit is not installed. */
  live: string | null;
  /** When the transaction last removed the unit (seconds since the epoch), if it is not installed and was removed by us. */
  removedAt?: number;
  /** When the unit file was written (seconds since the epoch), if it is installed. */
  installedAt?: number;
  /**
   * What systemd says of the installed unit (\`systemctl is-active\`: active, activating,
   * inactive, failed, ...), and since when it is stopped where it is: a unit that is there but
   * does not run is not "no change" (issue 36). Absent where it was not read.
   */
  state?: string;
  stoppedSince?: string;
  /**
   * The generation installed (\`current\`) and the one readiness last proved (\`known-good\`),
   * host/generations.sh; absent where the host keeps none (an earlier version's host).
   */
  generation?: number;
  knownGood?: number;
}

/** How the host view ends for an installed unit that is stopped (review.ts reads it). */
export const STARTS_IT = "it serves nothing now; `up` starts it.";

/** Pure: whether a node's installed unit is stopped (neither running nor on its way). */
export function isStopped(view: NodeView): boolean {
  return view.live !== null && (view.state === "inactive" || view.state === "failed");
}

/** Pure: "failed since Fri 2026-12-04 10:00:00 UTC", as a reader sees it. */
const stoppedWords = (view: NodeView) => `${view.state === "failed" ? "failed" : "stopped"}${view.stoppedSince ? ` since ${view.stoppedSince}` : ""}`;

export async function readLiveUnit(conn: Connection, unitName: string): Promise<NodeView> {
  // The program's first command on the host (host/read-unit.sh): a user that is not root stops
  // the run there; then the unit, whether it runs, and the transaction's mark of its last removal.
  const script = renderHostScript({
    about: [`dflash-sglang: read ${unitName} (reads only).`],
    set: "-u",
    values: { unit_path: unitPath(unitName), service: `${unitName}.service`, state: `${STATE_DIR}/${unitName}`, removed_marks: removedMarkPaths(unitName) },
    files: ["read-unit.sh"],
  });
  const r = await Ssh.once(conn, bashCommand(script));
  if (r.code === 5 && r.stdout.startsWith("@@notroot ")) {
    throw new NoRootAccess(
      `the SSH user ${conn.user} on ${conn.host}:${conn.port} is not root (the host steps need root: systemctl, unit files, secret files) and host.become is not set. ` +
        "Nothing was changed. Set host.become: sudo (with the sudoers lines of README, \"Hosts where root cannot log in\"), or log in as root.",
    );
  }
  if (r.code !== 0) {
    const at = Number(r.stdout.trim());
    return { host: conn.host, live: null, ...(r.code === 3 && r.stdout.trim() && Number.isInteger(at) ? { removedAt: at } : {}) };
  }
  return { host: conn.host, ...parseLiveUnit(r.stdout) };
}

/** Pure: readLiveUnit's answer for an installed unit: its time, its state, since when stopped, its generations, then its text. */
export function parseLiveUnit(stdout: string): Omit<NodeView, "host"> {
  const [at, state, since, gens = ""] = stdout.split("\n", 4);
  const text = stdout.split("\n").slice(4).join("\n");
  const [current, good] = gens.split(" ").map((g) => (/^\d+$/.test(g) ? Number(g) : undefined));
  return {
    live: text,
    installedAt: Number(at),
    ...(state ? { state } : {}),
    ...(since && since !== "n/a" ? { stoppedSince: since } : {}),
    ...(current !== undefined ? { generation: current } : {}),
    ...(good !== undefined ? { knownGood: good } : {}),
  };
}

/** Pure: " as generation 13" (" as generation 14 (known-good: 13)" when they differ) of a view, or "" where the host keeps none. */
function generationWords(view: NodeView): string {
  if (view.generation === undefined) return view.knownGood === undefined ? "" : ` (known-good: generation ${view.knownGood})`;
  return ` as generation ${view.generation}${view.knownGood !== undefined && view.knownGood !== view.generation ? ` (known-good: ${view.knownGood})` : ""}`;
}

/** What hostRuns says of a node that runs this stack's unit (the one `up` installs). */
export const RUNS_THIS_UNIT = "this stack's unit";

/**
 * Pure: what a node runs, as the readiness resource's `hostRuns` input: RUNS_THIS_UNIT, or
 * what else is there. Any other value makes `up` prove this stack's configuration on the
 * node (restarting it there first): a stack is declarative, so an unchanged stack whose host
 * another stack (or a hand) took over is put back, as `preview` says it will be.
 */
export function hostRunsOf(view: NodeView, want: string): string {
  // Stopped (by hand, or failed): a reading of its own, so that `up` starts it; each stop has
  // its own time, so a unit stopped again after `up` started it is a new reading again.
  if (view.live === want) return isStopped(view) ? `${RUNS_THIS_UNIT}, ${stoppedWords(view)}` : RUNS_THIS_UNIT;
  // Removed since (by another stack's teardown, or a rename): a reading of its own, never the
  // "no unit" a first install records, so that the stack's next `up` puts its unit back.
  if (view.live === null) return view.removedAt === undefined ? "no unit" : `no unit (removed at ${view.removedAt})`;
  const owner = unitStack(view.live);
  // When it was installed: a second takeover by the same unit is a new reading too.
  return `${owner ? `stack ${owner}'s unit` : "a unit of no stack"} (${sha256(view.live).slice(0, 12)}, installed at ${view.installedAt ?? "?"})`;
}

/** One paragraph per node: what it runs and which lines this stack's unit changes. */
export function describeHostChange(unitName: string, stack: string, view: NodeView, want: string, node: string): string {
  const where = `${unitName} on ${view.host}${node}`;
  // A first install: the whole unit, as a reviewer would read it (secrets never are in it).
  if (view.live === null) return `${where}: ${view.removedAt === undefined ? "not installed yet" : `not installed (removed at ${new Date(view.removedAt * 1000).toISOString()})`}; \`up\` installs this stack's unit (${sha256(want).slice(0, 12)}):\n${redactSecrets(want).trimEnd().split("\n").map((l) => `    + ${l}`).join("\n")}`;
  const owner = unitStack(view.live);
  const runs = `runs the unit of ${owner === stack ? "this stack" : owner ? `stack ${owner}` : "no dflash-sglang stack (written by hand?)"} (${sha256(view.live).slice(0, 12)})${generationWords(view)}${isStopped(view) ? `, ${stoppedWords(view)}: it serves nothing now` : ""}`;
  if (view.live === want) return isStopped(view) ? `${where} ${runs.replace(/: it serves nothing now$/, `: ${STARTS_IT}`)}` : `${where} ${runs}; \`up\` changes nothing there.`;
  // A unit written by hand may carry a secret (--api-key sk-..., or its value on the next
  // line after `--api-key \`): masked on the whole unit as it came, before anything else reads
  // it, so that no rewrite of a line can hide a continuation from the masking (issue 36).
  const changes = unitLineChanges(redactSecrets(view.live), redactSecrets(want));
  return `${where} ${runs}; \`up\` replaces it with stack ${stack}'s unit (${sha256(want).slice(0, 12)}), changing ${changes.length} line${changes.length === 1 ? "" : "s"}:\n${changes.map((l) => `    ${l}`).join("\n")}`;
}

/**
 * Pure: the stack whose unit node 0 runs, read from describeHostChange's paragraphs (`stack`:
 * the stack they were written for); undefined when it runs none, or no unit of a stack.
 */
export function servingStackIn(text: string, stack: string): string | undefined {
  const first = text.split("\n")[0];
  if (/ runs the unit of this stack \(/.test(first)) return stack;
  return / runs the unit of stack (\S+) \(/.exec(first)?.[1];
}
