// Records of the pulumi processes this project starts on this machine, so that a stack lock
// can be proven to belong to one of them (lib/stale-locks.ts says why that is needed). Each
// pulumi is started by a shell that writes `<dir>/<pid>.json` for itself and then execs pulumi
// (same pid): scripts/pulumi.sh for `npx pulumi`, and the engine wrapper below for the
// Automation API (lib/workspace.ts). The shell text is one, kept in scripts/pulumi.sh between
// its `# >>> lock owner record` and `# <<< lock owner record` lines.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "./pulumi-env";

export interface OwnerRecord {
  pid: number;
  /** /proc/sys/kernel/random/boot_id when it started: a new one each boot, each machine. */
  bootId: string;
  /** Its pid namespace (`pid:[N]`): a pid means this process only within it (containers). */
  pidNs: string;
  /** Field 22 of /proc/<pid>/stat: with the pid, names one process within a boot. */
  startTicks: number;
  /** Wall clock (UTC, whole seconds, rounded down) when it started. */
  startedAt: string;
  hostname: string;
  username: string;
  /** backendKey() of PULUMI_BACKEND_URL it ran with ("" when unknown). */
  backend: string;
}

/** What this machine says about itself and its processes. Tests give their own. */
export interface Machine {
  hostname: string;
  bootId?: string;
  pidNs?: string;
  /** When this boot started (ms since the epoch), for a process's start from its ticks. */
  bootTimeMs?: number;
  /** The process with this pid now, or undefined when there is none. */
  process(pid: number): { startTicks: number; zombie: boolean } | undefined;
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on every Linux architecture in use). */
export const USER_HZ = 100;

/** Where records are kept: the same rule as the shell's in scripts/pulumi.sh. */
export function lockOwnersDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.DFLASH_LOCK_OWNERS_DIR) return env.DFLASH_LOCK_OWNERS_DIR;
  if (env.XDG_CACHE_HOME) return path.join(env.XDG_CACHE_HOME, "dflash-pulumi", "lock-owners");
  if (env.HOME) return path.join(env.HOME, ".cache", "dflash-pulumi", "lock-owners");
  return undefined;
}

/** A backend URL as records keep it: the first 16 hex digits of its SHA-256 (a URL may hold a password). */
export function backendKey(url: string): string {
  return createHash("sha256").update(url).digest("hex").slice(0, 16);
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** State and start ticks from the text of /proc/<pid>/stat. */
export function parseProcStat(stat: string): { startTicks: number; zombie: boolean } | undefined {
  // The command name (field 2) is in parentheses and may hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const startTicks = Number(fields[19]);
  if (!Number.isInteger(startTicks) || !fields[0]) return undefined;
  return { startTicks, zombie: fields[0] === "Z" || fields[0] === "X" || fields[0] === "x" };
}

/** This machine, read from /proc (what it cannot read stays undefined: nothing is then proven). */
export function thisMachine(): Machine {
  const btime = /^btime (\d+)$/m.exec(readText("/proc/stat") ?? "")?.[1];
  let pidNs: string | undefined;
  try {
    pidNs = fs.readlinkSync("/proc/self/ns/pid");
  } catch {
    pidNs = undefined;
  }
  return {
    hostname: os.hostname(),
    bootId: readText("/proc/sys/kernel/random/boot_id")?.trim() || undefined,
    pidNs,
    bootTimeMs: btime ? Number(btime) * 1000 : undefined,
    process: (pid) => {
      const stat = Number.isInteger(pid) && pid > 0 ? readText(`/proc/${pid}/stat`) : undefined;
      return stat === undefined ? undefined : parseProcStat(stat);
    },
  };
}

export function parseOwnerRecord(text: string): OwnerRecord | undefined {
  try {
    const r = JSON.parse(text) as Partial<OwnerRecord>;
    if (!Number.isInteger(r.pid) || !Number.isInteger(r.startTicks) || typeof r.bootId !== "string" || typeof r.startedAt !== "string" || typeof r.hostname !== "string") return undefined;
    return { pid: r.pid!, bootId: r.bootId, pidNs: String(r.pidNs ?? ""), startTicks: r.startTicks!, startedAt: r.startedAt, hostname: r.hostname, username: String(r.username ?? ""), backend: String(r.backend ?? "") };
  } catch {
    return undefined;
  }
}

/** The record of `pid`, if one can be read. */
export function readOwnerRecord(dir: string | undefined, pid: number): OwnerRecord | undefined {
  if (!dir || !Number.isInteger(pid)) return undefined;
  const text = readText(path.join(dir, `${pid}.json`));
  const record = text === undefined ? undefined : parseOwnerRecord(text);
  return record?.pid === pid ? record : undefined;
}

/** Records kept a day after their process ended, unless the backend they ran with was just read. */
const KEEP_MS = 24 * 3600 * 1000;

/**
 * Best effort: removes the records that can prove nothing any more: those of another boot, and
 * those whose process is gone and whose pid no lock in `lockPids` names, where `lockPids` are
 * all the locks of the backend with key `backend` (a record of another backend is kept a day:
 * its locks were not read). Returns the files removed.
 */
export function pruneOwnerRecords(dir: string | undefined, lockPids: Set<number>, backend: string, here: Machine = thisMachine(), now = Date.now()): string[] {
  if (!dir) return [];
  let entries: string[];
  try {
    entries = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const entry of entries) {
    const file = path.join(dir, entry);
    const m = /^\.?(\d+)\.(json|tmp)$/.exec(entry);
    if (!m) continue;
    let drop = false;
    const text = readText(file);
    const record = text === undefined ? undefined : parseOwnerRecord(text);
    if (!record || m[2] === "tmp") {
      // Torn or half-written: only once it is old (a writer may be at it now).
      try {
        drop = now - fs.statSync(file).mtimeMs > 60_000;
      } catch {
        drop = false;
      }
    } else if (!here.bootId || record.bootId !== here.bootId) {
      drop = !!here.bootId;
    } else {
      const p = here.process(record.pid);
      const gone = !p || p.zombie || p.startTicks !== record.startTicks;
      const sameBackend = record.backend !== "" && record.backend === backend;
      drop = gone && !lockPids.has(record.pid) && (sameBackend || now - Date.parse(record.startedAt) > KEEP_MS);
    }
    if (!drop) continue;
    try {
      fs.rmSync(file, { force: true });
      removed.push(file);
    } catch {
      // best effort
    }
  }
  return removed;
}

/** The recorder's shell text (a function, dflash_record_lock_owner), from scripts/pulumi.sh. */
export function lockOwnerRecorder(root = REPO_ROOT): string {
  const text = fs.readFileSync(path.join(root, "scripts", "pulumi.sh"), "utf8");
  const m = /^# >>> lock owner record.*?^# <<< lock owner record\n/ms.exec(text);
  if (!m) throw new Error(`scripts/pulumi.sh of ${root} has no "# >>> lock owner record" section`);
  return m[0];
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Pure but for reading the recorder: a `pulumi` for the Automation API that leaves the owner
 * record of its pid, then execs `engine` (in a session of its own with `ownSession`: setsid(1)
 * calls setsid(2) in place, so the pid stays the one the Automation API spawned and signals).
 */
export function renderRecordingEngine(engine: string, opts: { ownSession?: boolean; root?: string } = {}): string {
  return [
    "#!/bin/sh",
    `# pulumi for the Automation API (lib/workspace.ts): records itself (lib/lock-owners.ts), then runs the engine${opts.ownSession ? " in a session of its own" : ""}`,
    lockOwnerRecorder(opts.root).trimEnd(),
    "dflash_record_lock_owner || true",
    `exec ${opts.ownSession ? "setsid " : ""}${shellQuote(engine)} "$@"`,
    "",
  ].join("\n");
}
