// Killing the adaptive sweep and resuming it repeats no launch: a process of its own
// (test/support/adaptiveSweepChild.ts) runs the sweep through the real engine on two simulated
// hosts; it is killed (SIGKILL to its process group: it, its engine and plugins) while a launch
// is in flight, after at least one launch finished; a second process resumes it. Every launch
// the first one finished (its journal line) is taken over, none is launched again; the launch
// the kill cut is launched anew.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawn } from "node:child_process";
import * as hosts from "../../../../simhost/hosts";
import { REPO_ROOT } from "../../../../lib/pulumi-env";
import { simHostConfig } from "../../../../lib/workspace";
import type { SweepHost } from "../../../../components/sweep/sweep";

const NAMES = [`kill-a-${process.pid}`, `kill-b-${process.pid}`];
const CHILD = path.join(REPO_ROOT, "test", "support", "adaptiveSweepChild.ts");
let sweepHosts: SweepHost[] = [];
let dir = "";

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "adaptive-kill-"));
  for (const name of NAMES) {
    const h = await hosts.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: 4, warmupSeconds: 0.3, speedScale: 4 } });
    sweepHosts.push({ name, config: simHostConfig(h) });
  }
});

after(async () => {
  for (const name of NAMES) await hosts.stop(name);
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the sweep in a process group of its own; `killWhen` (given the output so far) decides when to SIGKILL the group. */
function runChild(resume: boolean, killWhen?: (out: string) => boolean): Promise<{ out: string; killed: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, JSON.stringify({ dir, hosts: sweepHosts, resume })], { cwd: REPO_ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let killed = false;
    const deadline = setTimeout(() => {
      process.kill(-child.pid!, "SIGKILL");
      reject(new Error(`the sweep did not end within 10 minutes:\n${out}`));
    }, 600_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!killed && killWhen?.(out)) {
        killed = true;
        process.kill(-child.pid!, "SIGKILL");
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", () => {
      clearTimeout(deadline);
      // Whatever of the group outlived the kill (an engine's plugin) goes too.
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // the group is gone
      }
      resolve({ out, killed });
    });
  });
}

const launched = (out: string) => [...out.matchAll(/\] (b\d+t\d+-w\w+): launch \(/g)].map((m) => m[1]);
const finished = (out: string) => [...out.matchAll(/\] (b\d+t\d+-w\w+): launched: /g)].map((m) => m[1]);

test("killed while a launch is in flight and resumed, it launches none of the finished launches again", { timeout: 1_200_000 }, async () => {
  // Killed once a launch has finished and a later one is in flight (started after it).
  const first = await runChild(false, (out) => {
    const done = finished(out);
    if (done.length === 0) return false;
    const after = out.slice(out.indexOf(`${done[0]}: launched: `));
    return /: launch \(/.test(after);
  });
  assert.ok(first.killed, `the first run ended before it could be killed:\n${first.out}`);
  const journal = fs.readFileSync(path.join(dir, "adaptive-journal.jsonl"), "utf8").split("\n").filter(Boolean).slice(1);
  const journaled = new Set(journal.map((l) => (JSON.parse(l) as { point: string }).point));
  assert.ok(journaled.size >= 1, `a finished launch is in the journal:\n${first.out}`);
  const cut = launched(first.out).filter((p) => !journaled.has(p));
  assert.ok(cut.length >= 1, `a launch was in flight at the kill:\n${first.out}`);

  const second = await runChild(true);
  assert.match(second.out, /@@done \d+/, second.out);
  const again = launched(second.out);
  assert.deepEqual(again.filter((p) => journaled.has(p)), [], `launched again after the kill:\n${second.out}`);
  for (const p of journaled) assert.match(second.out, new RegExp(`${p}: already launched \\((measured|failed)\\); not launched again \\(--resume\\)`));
  // The launch the kill cut had not finished: it is launched anew, on a host it may have left mid-restart.
  for (const p of cut) assert.ok(again.includes(p), `${p}, cut by the kill, is launched anew (the first design goes on): ${again.join(", ")}`);
  assert.ok(!/FAILED/.test(second.out), `no launch of the resumed sweep failed:\n${second.out}`);
});
