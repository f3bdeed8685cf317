// Killing a `pulumi` engine as a crash would (SIGKILL), for the tests and the fault campaign:
// the engine in its process group, and the plugins it started, each in a process group of its
// own, which upstream leaves running when their engine is SIGKILLed. Only processes below the
// given PID (our own child) are touched.
import * as fs from "node:fs";

/** PIDs of every process below `pid` (from /proc), deepest last. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const ppid = Number(fs.readFileSync(`/proc/${e}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(e)]);
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** SIGKILLs an engine started `detached` (its own process group, led by `pid`) and the plugins below it. */
export function killEngine(pid: number): void {
  const plugins = descendants(pid);
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
  for (const p of plugins) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
