// SIGKILL to a session a test started, whole.
import { execFileSync } from "node:child_process";

/**
 * SIGKILL to the leader of a session this test started, then to every process left in it:
 * Pulumi puts each plugin in a process group of its own, but they stay in the session of
 * the `pulumi` that started them (and, once it is dead, nothing starts more).
 */
export function killSession(sid: number): void {
  const kill = (pid: number) => {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  kill(sid);
  execFileSync("ps", ["-eo", "pid=,sid="], { encoding: "utf8" })
    .split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number))
    .filter(([pid, s]) => s === sid && pid > 0)
    .forEach(([pid]) => kill(pid));
}
