// A `pulumi up` that was killed (not just interrupted) leaves its stack locked in a DIY
// backend; Pulumi's own remedy is `pulumi cancel`. We run it for a lock only when the lock's
// owner is PROVEN gone, never from a hostname and a pid alone.
//
// Why: a lock names a pid, a user, a hostname and a time, and nothing else. Two machines can
// share a hostname (cloned VMs, containers), and a pid is only meaningful on the machine, in
// the boot and the pid namespace it was given in. Judging "same hostname, pid not alive here"
// as stale let an operator's guard cancel a colleague's live lock on a shared backend: two
// updates then ran on one stack at once (issue 60).
//
// The rule: a lock is stale when
//   - its hostname is this machine's, and
//   - a record left by a pulumi this project started on this machine (lib/lock-owners.ts:
//     scripts/pulumi.sh and the Automation API's engine write one just before they exec
//     pulumi) names the lock's pid, with this boot's id, this pid namespace, the hostname,
//     the lock's user and backend (where known), and
//   - the lock was not taken before that process started (a second of slack): an older lock
//     is not that process's, and
//   - that process is gone: no process has the pid, or a zombie has it, or one with other
//     start ticks that started after the lock was taken (one that started before could be
//     the holder itself, a pulumi that left no record).
// Anything else is held: the guard says who holds it and how to clear it by hand, and clears
// nothing. Records whose process is gone and which no lock names are pruned as locks are read.
//
// Pulumi keeps a lock as the object .pulumi/locks/<org>/<project>/<stack>/<id>.json of its
// backend: a file in a file:// backend folder, a row of the state table in a postgres://
// one (its key prefixed with the database name; read here with psql).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { postgresProgram, psqlTarget } from "./postgres";
import { backendKey, lockOwnersDir, Machine, OwnerRecord, pruneOwnerRecords, readOwnerRecord, thisMachine, USER_HZ } from "./lock-owners";

export interface StackLock {
  project: string;
  stack: string;
  pid: number;
  hostname: string;
  /** Who took it ("" when the lock does not say). */
  username: string;
  /** When it was taken, as the lock says (RFC 3339; "" when it does not say). */
  timestamp: string;
  /** The lock's file, or its key in the state table. */
  where: string;
}

/** A lock not proven stale, and why not. */
export interface HeldLock extends StackLock {
  why: string;
}

/** The backend's locks of one project, or why they could not be read. */
export type LockReading = { locks: StackLock[] } | { unreadable: string };

export interface StaleLocks {
  /** Locks whose holder is proven gone (see the rule above). */
  stale: StackLock[];
  /** The other locks of the project, each with why it is not judged stale. */
  held: HeldLock[];
  /** Set when the backend's locks could not be read: none is cleared, and this says why. */
  unreadable?: string;
}

interface LockContent {
  pid: number;
  hostname: string;
  username?: unknown;
  timestamp?: unknown;
}

const LOCKS = ".pulumi/locks";

/** Slack between the clocks of a record (whole seconds, rounded down) and of a lock. */
const SLACK_MS = 1000;

export type Judgement = { stale: true } | { stale: false; why: string };

/**
 * Pure: whether `lock` is proven stale, given the owner record of its pid (if any), this
 * machine, and the key of the backend it was read from (lib/lock-owners.ts backendKey).
 */
export function judgeLock(lock: StackLock, record: OwnerRecord | undefined, here: Machine, backend?: string): Judgement {
  const held = (why: string): Judgement => ({ stale: false, why });
  const pid = lock.pid;
  if (lock.hostname !== here.hostname) return held(`it runs, or was killed, on that machine`);
  if (!record) return held(`it may be running on another machine with the same hostname (no pulumi this project started here left a record as pid ${pid})`);
  if (!here.bootId || record.bootId !== here.bootId) return held(`it may be running on another machine with the same hostname (the record of pid ${pid} here is of another boot)`);
  if (record.hostname !== here.hostname) return held(`it may be running on another machine with the same hostname (the record of pid ${pid} here was written under the hostname ${record.hostname})`);
  if (record.pidNs !== (here.pidNs ?? "")) return held(`it may be running in another container of this machine (the record of pid ${pid} here is of another pid namespace)`);
  if (backend && record.backend && record.backend !== backend) return held(`it may be running on another machine with the same hostname (the pulumi recorded here as pid ${pid} used another backend)`);
  if (lock.username && record.username && lock.username !== record.username) return held(`it may be running on another machine with the same hostname (the pulumi recorded here as pid ${pid} ran as ${record.username})`);
  const taken = Date.parse(lock.timestamp);
  const started = Date.parse(record.startedAt);
  if (!Number.isFinite(taken) || !Number.isFinite(started)) return held(`it may be running on another machine with the same hostname (the lock's time, or the start of the pulumi recorded here as pid ${pid}, cannot be read)`);
  if (taken < started - SLACK_MS) return held(`it may be running on another machine with the same hostname (the lock is older than the pulumi recorded here as pid ${pid})`);
  const now = here.process(pid);
  if (now && !now.zombie) {
    if (now.startTicks === record.startTicks) return held(`it still runs on this machine`);
    // The pid was given to another process since. One that started before the lock was
    // taken could be the holder (a pulumi that left no record).
    if (here.bootTimeMs === undefined) return held(`it may still run on this machine (pid ${pid} runs a process whose start cannot be told)`);
    const nowStarted = here.bootTimeMs + (now.startTicks * 1000) / USER_HZ;
    if (nowStarted <= taken + 2 * SLACK_MS) return held(`it may still run on this machine (pid ${pid} runs a process that started before the lock was taken)`);
  }
  return { stale: true };
}

export interface StaleLockOptions {
  /** Where owner records are (lib/lock-owners.ts lockOwnersDir of the environment pulumi ran with). */
  ownersDir?: string;
  /** This machine (tests give their own). */
  machine?: Machine;
}

/** The backend's locks of `project`, judged (see the rule above); prunes the owner records that prove nothing any more. */
export function staleLocks(backendUrl: string, project: string, opts: StaleLockOptions = {}): StaleLocks {
  // Every project's locks: those of others may name a record's pid too (pruning below).
  const reading = stackLocks(backendUrl, null);
  if ("unreadable" in reading) return { stale: [], held: [], unreadable: reading.unreadable };
  const ownersDir = "ownersDir" in opts ? opts.ownersDir : lockOwnersDir();
  const here = opts.machine ?? thisMachine();
  const backend = backendKey(backendUrl);
  const stale: StackLock[] = [];
  const held: HeldLock[] = [];
  for (const lock of reading.locks) {
    if (lock.project !== project) continue;
    const judged = judgeLock(lock, readOwnerRecord(ownersDir, lock.pid), here, backend);
    if (judged.stale) stale.push(lock);
    else held.push({ ...lock, why: judged.why });
  }
  pruneOwnerRecords(ownersDir, new Set(reading.locks.map((l) => l.pid)), backend, here);
  return { stale, held };
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

/** Every stack lock of `project` (of every project with null) in a file:// or postgres:// backend. */
export function stackLocks(backendUrl: string, project: string | null): LockReading {
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
 * its JSON content, if it is one of `project`'s (any project's with null); null otherwise or
 * when it cannot be read (left to Pulumi's own message).
 */
export function parseLock(key: string, content: string, project: string | null, where = key): StackLock | null {
  const parts = key.split("/");
  if (parts.length !== 6 || `${parts[0]}/${parts[1]}` !== LOCKS || (project !== null && parts[3] !== project) || !parts[5].endsWith(".json")) return null;
  try {
    const lock = JSON.parse(content) as LockContent;
    if (!Number.isInteger(lock.pid) || typeof lock.hostname !== "string") return null;
    const text = (v: unknown) => (typeof v === "string" ? v : "");
    return { project: parts[3], stack: parts[4], pid: lock.pid, hostname: lock.hostname, username: text(lock.username), timestamp: text(lock.timestamp), where };
  } catch {
    return null;
  }
}

function fileLocks(backendUrl: string, project: string | null): StackLock[] {
  const root = backendUrl.slice("file://".length).split("?")[0];
  const out: StackLock[] = [];
  for (const org of safeList(path.join(root, LOCKS))) {
    for (const proj of project === null ? safeList(path.join(root, LOCKS, org)) : [project]) {
      const projectDir = path.join(root, LOCKS, org, proj);
      for (const stack of safeList(projectDir)) {
        for (const f of safeList(path.join(projectDir, stack))) {
          const file = path.join(projectDir, stack, f);
          let content: string;
          try {
            content = fs.readFileSync(file, "utf8");
          } catch {
            continue;
          }
          const lock = parseLock(`${LOCKS}/${org}/${proj}/${stack}/${f}`, content, project, file);
          if (lock) out.push(lock);
        }
      }
    }
  }
  return out;
}

/**
 * psql's rows of (key, content) as it prints them with zero bytes between fields and rows;
 * keys start with `keyPrefix` (see psqlTarget).
 */
export function parseLockRows(stdout: string, keyPrefix: string, project: string | null): StackLock[] {
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

function postgresLocks(backendUrl: string, project: string | null): LockReading {
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
