// One writer per host. The lock is a flock(1) on the host held by a shell that lives as
// long as our SSH session: if `pulumi up` crashes or is killed, the session ends, the
// shell exits and the kernel drops the lock, so a crashed holder never blocks anyone.
// Waiters see who holds it (stack, since when) from a note the holder writes.
import { ChildProcessWithoutNullStreams } from "node:child_process";
import * as os from "node:os";
import { Connection, Ssh } from "./ssh";
import { shellQuote } from "../render";

export const LOCK_DIR = "/run/dflash-sglang";

export interface LockNote {
  stack: string;
  unit: string;
  since: string;
  client: string;
}

export class HostLock {
  private constructor(
    private readonly ssh: Ssh,
    private readonly holder: ChildProcessWithoutNullStreams,
    readonly note: LockNote,
  ) {}

  /**
   * Waits up to `waitSeconds` for the host's lock. `onWait` is called with the holder's
   * note while someone else holds it.
   */
  static async acquire(conn: Connection, note: Omit<LockNote, "since" | "client">, waitSeconds: number, onWait: (holder: string, waitedS: number) => void): Promise<HostLock> {
    const full: LockNote = { ...note, since: new Date().toISOString(), client: `${os.hostname()} pid ${process.pid}` };
    const script = [
      "set -u",
      `d=${LOCK_DIR}`,
      'mkdir -p "$d"',
      'exec 9>>"$d/host.lock"',
      `deadline=$(( $(date +%s) + ${Math.ceil(waitSeconds)} ))`,
      "while ! flock -n 9; do",
      '  echo "BUSY $(cat "$d/host.lock.note" 2>/dev/null)"',
      '  if [ "$(date +%s)" -ge "$deadline" ]; then echo TIMEOUT; exit 3; fi',
      "  sleep 1",
      "done",
      `printf '%s\\n' ${shellQuote(JSON.stringify(full))} > "$d/host.lock.note"`,
      "echo LOCKED",
      // Hold until our side closes stdin (release) or the session dies (crash).
      "cat >/dev/null",
      'rm -f "$d/host.lock.note"',
    ].join("\n");
    const ssh = await Ssh.open(conn);
    const child = ssh.spawnDedicated(script);
    const started = Date.now();
    return new Promise((resolve, reject) => {
      let buf = "";
      let stderr = "";
      let lastHolder = "";
      let settled = false;
      const fail = (e: Error) => {
        if (settled) return;
        settled = true;
        child.kill();
        ssh.close();
        reject(e);
      };
      child.stderr.on("data", (d) => (stderr += d));
      child.stdout.on("data", (d) => {
        buf += d;
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line === "LOCKED" && !settled) {
            settled = true;
            resolve(new HostLock(ssh, child, full));
          } else if (line.startsWith("BUSY")) {
            lastHolder = describe(line.slice(5));
            onWait(lastHolder, Math.round((Date.now() - started) / 1000));
          } else if (line === "TIMEOUT") {
            fail(new Error(`${conn.host} is being reconfigured by ${lastHolder || "another deployment"}; waited ${Math.ceil(waitSeconds)} s for it (safety.lockWaitSeconds). Nothing was changed. Re-run when it is done.`));
          }
        }
      });
      child.on("close", (code) => fail(new Error(`could not take the reconfiguration lock on ${conn.host} (ssh exit ${code}): ${stderr.trim() || "no output"}`)));
    });
  }

  /** Releases the lock and waits until the host has dropped it. */
  release(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.ssh.close();
        resolve();
      };
      if (this.holder.exitCode !== null) return done();
      this.holder.once("close", done);
      this.holder.stdin.end();
    });
  }
}

function describe(noteText: string): string {
  try {
    const n = JSON.parse(noteText) as LockNote;
    return `stack "${n.stack}" (unit ${n.unit}, from ${n.client}, since ${n.since})`;
  } catch {
    return "another deployment";
  }
}

/** Locks held by this provider process, by host: taken by the rollout, released after readiness. */
const held = new Map<string, HostLock>();

export function lockKey(conn: Connection): string {
  return `${conn.host}:${conn.port}`;
}

export async function holdHostLock(conn: Connection, note: Omit<LockNote, "since" | "client">, waitSeconds: number, onWait: (holder: string, waitedS: number) => void): Promise<void> {
  if (held.has(lockKey(conn))) return;
  held.set(lockKey(conn), await HostLock.acquire(conn, note, waitSeconds, onWait));
}

export async function releaseHostLock(conn: Connection): Promise<void> {
  const lock = held.get(lockKey(conn));
  held.delete(lockKey(conn));
  await lock?.release();
}
