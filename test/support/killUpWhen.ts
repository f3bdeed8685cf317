// Killing `pulumi up` as a crash would, at a chosen moment of its output: the tests of what a
// killed engine leaves on a host.
import { spawn } from "node:child_process";
import { killEngine } from "../../lib/engine-process";

/** Runs `pulumi up` for a stack of the workspace as its own process group and kills it (and its plugins) once `when` shows up in its output; resolves with that output. */
export function killUpWhen(ws: { dir: string; env: Record<string, string> }, stackName: string, when: RegExp): Promise<string> {
  const child = spawn("pulumi", ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stackName], { cwd: ws.dir, env: ws.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      if (when.test(out) && child.exitCode === null) killEngine(child.pid!);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("close", (code, signal) => (signal === "SIGKILL" ? resolve(out) : reject(new Error(`up ended (${code}) before ${when}: ${out.slice(-2000)}`))));
  });
}
