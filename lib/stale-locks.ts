// A `pulumi up` that was killed (not just interrupted) leaves its stack locked in a DIY
// backend; Pulumi's own remedy is `pulumi cancel`. A lock is provably stale when the process
// that took it, on this machine, no longer exists; only then do we clear it. A lock taken on
// another machine (a colleague's, on a shared backend) is never judged from here.
//
// Pulumi keeps a lock as the object .pulumi/locks/<org>/<project>/<stack>/<id>.json of its
// backend: a file in a file:// backend folder, a row of the state table in a postgres://
// one (its key prefixed with the database name; read here with psql).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { postgresProgram, psqlTarget } from "./postgres";

export interface StackLock {
  stack: string;
  pid: number;
  hostname: string;
  /** The lock's file, or its key in the state table. */
  where: string;
}

/** The backend's locks of one project, or why they could not be read. */
export type LockReading = { locks: StackLock[] } | { unreadable: string };

export interface StaleLocks {
  /** Locks whose holder died on this machine. */
  stale: StackLock[];
  /** Set when the backend's locks could not be read: none is cleared, and this says why. */
  unreadable?: string;
}

interface LockContent {
  pid: number;
  hostname: string;
}

const LOCKS = ".pulumi/locks";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Locks in the backend whose holder died on this machine. */
export function staleLocks(backendUrl: string, project: string): StaleLocks {
  const reading = stackLocks(backendUrl, project);
  if ("unreadable" in reading) return { stale: [], unreadable: reading.unreadable };
  return { stale: reading.locks.filter((l) => l.hostname === os.hostname() && !alive(l.pid)) };
}

/**
 * A file:// backend keeps each object's metadata in a sidecar `<object>.attrs` (gocloud's
 * fileblob), written in place (create, then encode): a pulumi killed in between leaves it
 * empty, and every later read of that object fails ("failed to load checkpoint: EOF"), the
 * stack's checkpoint included. A missing sidecar reads as no metadata, so a torn one is
 * removed. Returns the files removed (none for other backends). Run where a killed pulumi is
 * known (a stale lock), before `pulumi cancel`.
 */
export function removeTornMetadata(backendUrl: string): string[] {
  if (!/^file:\/\//i.test(backendUrl)) return [];
  const base = path.join(backendUrl.slice("file://".length).split("?")[0], ".pulumi");
  const removed: string[] = [];
  const walk = (dir: string) => {
    for (const entry of safeList(dir)) {
      const file = path.join(dir, entry);
      let stat: fs.Stats;
      try {
        // Links are not followed (no loop, nothing outside the backend).
        stat = fs.lstatSync(file);
      } catch {
        continue;
      }
      if (stat.isDirectory()) walk(file);
      else if (entry.endsWith(".attrs") && !parsesAsObject(file)) {
        fs.rmSync(file, { force: true });
        removed.push(file);
      }
    }
  };
  // Where a stack's reads go: its checkpoint (and backups) and its locks.
  for (const sub of ["stacks", "locks"]) walk(path.join(base, sub));
  return removed;
}

function parsesAsObject(file: string): boolean {
  try {
    const v = JSON.parse(fs.readFileSync(file, "utf8"));
    return typeof v === "object" && v !== null;
  } catch {
    return false;
  }
}

/** Every stack lock of `project` in a file:// or postgres:// backend. */
export function stackLocks(backendUrl: string, project: string): LockReading {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(backendUrl)?.[1].toLowerCase();
  switch (scheme) {
    case "file":
      return { locks: fileLocks(backendUrl, project) };
    case "postgres":
      return postgresLocks(backendUrl, project);
    default:
      return { unreadable: `locks are looked for only in file:// and postgres:// backends, not in ${scheme ? `${scheme}://` : `"${backendUrl}"`}` };
  }
}

/**
 * The lock named by an object key (`.pulumi/locks/<org>/<project>/<stack>/<id>.json`) and
 * its JSON content, if it is one of `project`'s; null otherwise or when it cannot be read
 * (left to Pulumi's own message).
 */
export function parseLock(key: string, content: string, project: string, where = key): StackLock | null {
  const parts = key.split("/");
  if (parts.length !== 6 || `${parts[0]}/${parts[1]}` !== LOCKS || parts[3] !== project || !parts[5].endsWith(".json")) return null;
  try {
    const lock = JSON.parse(content) as LockContent;
    if (!Number.isInteger(lock.pid) || typeof lock.hostname !== "string") return null;
    return { stack: parts[4], pid: lock.pid, hostname: lock.hostname, where };
  } catch {
    return null;
  }
}

function fileLocks(backendUrl: string, project: string): StackLock[] {
  const root = backendUrl.slice("file://".length).split("?")[0];
  const out: StackLock[] = [];
  for (const org of safeList(path.join(root, LOCKS))) {
    const projectDir = path.join(root, LOCKS, org, project);
    for (const stack of safeList(projectDir)) {
      for (const f of safeList(path.join(projectDir, stack))) {
        const file = path.join(projectDir, stack, f);
        let content: string;
        try {
          content = fs.readFileSync(file, "utf8");
        } catch {
          continue;
        }
        const lock = parseLock(`${LOCKS}/${org}/${project}/${stack}/${f}`, content, project, file);
        if (lock) out.push(lock);
      }
    }
  }
  return out;
}

/**
 * psql's rows of (key, content) as it prints them with zero bytes between fields and rows;
 * keys start with `keyPrefix` (see psqlTarget).
 */
export function parseLockRows(stdout: string, keyPrefix: string, project: string): StackLock[] {
  const fields = stdout.split("\0");
  if (fields.length % 2 === 1 && fields[fields.length - 1].trim() === "") fields.pop();
  const out: StackLock[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const key = fields[i].trim();
    if (!key.startsWith(keyPrefix)) continue;
    const lock = parseLock(key.slice(keyPrefix.length), fields[i + 1], project, key);
    if (lock) out.push(lock);
  }
  return out;
}

function postgresLocks(backendUrl: string, project: string): LockReading {
  const psql = postgresProgram("psql");
  if (!psql) return { unreadable: "psql is not installed (Debian: apt-get install postgresql-client)" };
  let target;
  try {
    target = psqlTarget(backendUrl);
  } catch (e) {
    return { unreadable: (e as Error).message };
  }
  // Pulumi stores each object as {"data": "<base64 of its bytes>"}. The key prefix reaches
  // the query as a psql variable, quoted by psql (:'locks'), which it expands in SQL read
  // from stdin.
  const sql = `SELECT key, convert_from(decode(data->>'data', 'base64'), 'UTF8') FROM ${target.table} WHERE left(key, length(:'locks')) = :'locks';\n`;
  const args = ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v", `locks=${target.keyPrefix}${LOCKS}/`, "--field-separator-zero", "--record-separator-zero", "-d", target.uri];
  const run = spawnSync(psql, args, {
    input: sql,
    env: { ...process.env, PGCONNECT_TIMEOUT: process.env.PGCONNECT_TIMEOUT ?? "10", ...target.env },
    encoding: "utf8",
    timeout: 30_000,
  });
  if (run.status === 0) return { locks: parseLockRows(run.stdout, target.keyPrefix, project) };
  const why = (run.stderr || run.error?.message || `psql ended with ${run.signal}`).trim().split("\n")[0];
  // No stack was ever stored there: Pulumi creates the table on first use.
  if (/relation "[^"]*" does not exist/.test(why)) return { locks: [] };
  return { unreadable: `psql could not read the table ${target.table} of ${target.uri}: ${why}` };
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
