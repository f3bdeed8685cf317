// Killing the adaptive sweep and resuming it repeats no launch: a process of its own
// (test/support/adaptiveSweepChild.ts) runs the sweep through the real engine on two simulated
// hosts, each engine in a session of its own as `npm run sweep` runs them; it is killed
// (SIGKILL to its process group) while an engine is in the middle of a launch's `up` (its
// stack's lock is held), after at least one launch finished; a second process resumes it at
// once. Every launch the first one finished (its journal line) is taken over, none is launched
// again; the launch the kill cut is launched anew, and no lock is left behind. (Whether the
// killed sweep's engine was still holding its lock when the resumed sweep came to it depends on
// timing: the diagnostic says; the wait for a lock itself: run.test.ts.)
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

/** PIDs of the processes the killed sweep left (its engines, in sessions of their own, and their plugins): those whose environment names this test's state. */
function leftBehind(): number[] {
  const mark = `PULUMI_BACKEND_URL=file://${path.join(dir, "state")}`;
  const pids: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(mark)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

after(async () => {
  // The killed sweep's engines and plugins outlive it by design (sessions of their own); the
  // resumed sweep waited for their locks, but a plugin may linger: stopped by PID.
  if (dir) for (const pid of leftBehind()) process.kill(pid, "SIGKILL");
  for (const name of NAMES) await hosts.stop(name);
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the sweep in a process group of its own; `killWhen` (given the output so far) decides when to SIGKILL the group. */
function runChild(resume: boolean, killWhen?: (out: string) => boolean): Promise<{ out: string; killed: boolean }> {
  return new Promise((resolve, reject) => {
    // Its SSH helpers' files (key copies, control sockets) stay in the test's folder.
    const tmp = path.join(dir, "tmp");
    fs.mkdirSync(tmp, { recursive: true });
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, JSON.stringify({ dir, hosts: sweepHosts, resume })], { cwd: REPO_ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, TMPDIR: tmp } });
    let out = "";
    let killed = false;
    const killGroup = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // the group is gone
      }
    };
    const deadline = setTimeout(() => {
      killGroup();
      reject(new Error(`the sweep did not end within 10 minutes:\n${out}`));
    }, 600_000);
    // Looked at on each output and every 200 ms: the lock file appears without a line.
    const look = () => {
      if (!killed && killWhen?.(out)) {
        killed = true;
        killGroup();
      }
    };
    const timer = setInterval(look, 200);
    const onData = (d: Buffer) => {
      out += d.toString();
      look();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", () => {
      clearTimeout(deadline);
      clearInterval(timer);
      // Whatever of the group outlived the kill goes too (the engines are in sessions of their own).
      killGroup();
      resolve({ out, killed });
    });
  });
}

/** The stacks whose lock an engine holds now (the workspace's file backend: state/.pulumi/locks/.../<stack>/<id>.json). */
function lockedStacks(): string[] {
  const root = path.join(dir, "state", ".pulumi", "locks");
  if (!fs.existsSync(root)) return [];
  return (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith(".json")).map((f) => path.basename(path.dirname(f)));
}

const launched = (out: string) => [...out.matchAll(/\] (b\d+t\d+-w\w+): launch \(/g)].map((m) => m[1]);
const finished = (out: string) => [...out.matchAll(/\] (b\d+t\d+-w\w+): launched: /g)].map((m) => m[1]);

test("killed while a launch is in flight and resumed, it launches none of the finished launches again", { timeout: 1_200_000 }, async (t) => {
  // Killed once a launch has finished and an engine holds the lock of a later one (started after it).
  let lockedAtKill: string[] = [];
  const first = await runChild(false, (out) => {
    const done = finished(out);
    if (done.length === 0) return false;
    const later = launched(out.slice(out.indexOf(`${done[0]}: launched: `)));
    lockedAtKill = lockedStacks().filter((s) => later.includes(s));
    return lockedAtKill.length > 0;
  });
  assert.ok(first.killed, `the first run ended before it could be killed:\n${first.out}`);
  const journal = fs.readFileSync(path.join(dir, "adaptive-journal.jsonl"), "utf8").split("\n").filter(Boolean).slice(1);
  const journaled = new Set(journal.map((l) => (JSON.parse(l) as { point: string }).point));
  assert.ok(journaled.size >= 1, `a finished launch is in the journal:\n${first.out}`);
  const cut = launched(first.out).filter((p) => !journaled.has(p));
  assert.ok(cut.length >= 1, `a launch was in flight at the kill:\n${first.out}`);

  assert.ok(lockedAtKill.every((p) => cut.includes(p)), `killed in the middle of the \`up\` of ${lockedAtKill.join(", ")}`);

  const second = await runChild(true);
  assert.match(second.out, /@@done \d+/, second.out);
  const again = launched(second.out);
  assert.deepEqual(again.filter((p) => journaled.has(p)), [], `launched again after the kill:\n${second.out}`);
  for (const p of journaled) assert.match(second.out, new RegExp(`${p}: already launched \\((measured|failed)\\); not launched again \\(--resume\\)`));
  // The launch the kill cut had not finished: it is launched anew, on a host it may have left mid-restart.
  for (const p of cut) assert.ok(again.includes(p), `${p}, cut by the kill, is launched anew (the first design goes on): ${again.join(", ")}`);
  assert.ok(!/FAILED|not launched: its stack is still locked/.test(second.out), `no launch of the resumed sweep failed:\n${second.out}`);
  assert.deepEqual(lockedStacks(), [], "no engine holds a lock once the resumed sweep is done");
  t.diagnostic(`journaled before the kill: ${[...journaled].join(", ")}; cut: ${cut.join(", ")} (lock held at the kill: ${lockedAtKill.join(", ")}); the resumed sweep ${/is locked by another/.test(second.out) ? "waited for the killed sweep's engine" : "found no lock (the killed sweep's engine had ended)"}`);
});
