// A `pulumi up` that was killed (not just interrupted) leaves its stack locked in a
// file:// backend; Pulumi's own remedy is `pulumi cancel`. A lock is provably stale when
// the process that took it, on this machine, no longer exists; only then do we clear it.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface StaleLock {
  stack: string;
  pid: number;
  file: string;
}

interface LockContent {
  pid: number;
  hostname: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Locks in a file:// backend folder whose holder died on this machine. */
export function staleLocks(backendUrl: string, project: string): StaleLock[] {
  if (!backendUrl.startsWith("file://")) return [];
  const root = path.join(backendUrl.slice("file://".length).split("?")[0], ".pulumi", "locks");
  const out: StaleLock[] = [];
  // Layout: locks/<org>/<project>/<stack>/<uuid>.json
  for (const org of safeList(root)) {
    const projectDir = path.join(root, org, project);
    for (const stack of safeList(projectDir)) {
      for (const f of safeList(path.join(projectDir, stack)).filter((n) => n.endsWith(".json"))) {
        const file = path.join(projectDir, stack, f);
        try {
          const lock = JSON.parse(fs.readFileSync(file, "utf8")) as LockContent;
          if (lock.hostname === os.hostname() && !alive(lock.pid)) out.push({ stack, pid: lock.pid, file });
        } catch {
          // unreadable lock: leave it to Pulumi's own message
        }
      }
    }
  }
  return out;
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
