// The engine in a session of its own (simWorkspace's engineInOwnSession, used by the sweep):
// the rendered `pulumi` runs the engine as a session leader, outside the caller's process
// group (so a Ctrl-C at the terminal does not reach it), under the PID the Automation API
// spawned and signals. A stand-in engine reports what it is; its path needs quoting.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { renderOwnSessionEngine } from "../../lib/workspace";

/** pid, session and process group of a process, from /proc/PID/stat. */
function ids(stat: string): { pid: number; pgid: number; sid: number } {
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pid: Number(stat.split(" ")[0]), pgid: Number(f[2]), sid: Number(f[3]) };
}

test("the engine runs in a new session, as the process the Automation API spawned, with its arguments", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "own-session-"));
  try {
    const engine = path.join(dir, "an engine's folder", "pulumi");
    fs.mkdirSync(path.dirname(engine));
    fs.writeFileSync(engine, '#!/bin/sh\ncat /proc/$$/stat\nprintf "%s\\n" "$@"\n', { mode: 0o755 });
    const wrapper = path.join(dir, "pulumi");
    fs.writeFileSync(wrapper, renderOwnSessionEngine(engine), { mode: 0o755 });
    const child = spawn(wrapper, ["up", "--stack", "b16t4 w2048"], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    assert.equal(await new Promise((resolve) => child.on("exit", resolve)), 0);
    const [stat, ...args] = out.trim().split("\n");
    const engineIds = ids(stat);
    const ours = ids(fs.readFileSync("/proc/self/stat", "utf8"));
    assert.equal(engineIds.pid, child.pid, "the PID the caller signals is the engine's");
    assert.equal(engineIds.sid, engineIds.pid, "a session leader");
    assert.notEqual(engineIds.pgid, ours.pgid, "outside the caller's process group");
    assert.deepEqual(args, ["up", "--stack", "b16t4 w2048"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
