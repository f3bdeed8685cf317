// Issue 41, item 8: the engine ends a provider process without letting it clean up, and the
// operator's temp folder kept a copy of the stack's private key from every such process. A
// provider-like child (test/support/sshKeyChild.ts) is killed with SIGKILL in the middle of a
// command on a simulated host: no readable file in the temp folders holds the key, and no
// agent of the child's outlives it; the next process's first connection removes what the
// killed one left, and earlier versions' folders that held the key, but not a live owner's.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as hosts from "../../../../simhost/hosts";
import { REPO_ROOT } from "../../../../lib/pulumi-env";

const HOST = `sshkey-${process.pid}`;
const CHILD = path.join(REPO_ROOT, "test/support/sshKeyChild.ts");
let host: hosts.HostInfo;
/** A key of this test's own, authorized on the host and kept in memory only: any file that holds it is a copy. */
let privateKey: string;

before(async () => {
  host = await hosts.start(HOST);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sshkey-gen-"));
  try {
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path.join(dir, "k")]);
    privateKey = fs.readFileSync(path.join(dir, "k"), "utf8");
    const authorized = await hosts.ssh(host, "cat >> /root/.ssh/authorized_keys", { input: fs.readFileSync(path.join(dir, "k.pub"), "utf8") });
    assert.equal(authorized.code, 0, authorized.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

after(async () => {
  await hosts.stop(HOST);
});

function connectionJson(): string {
  return JSON.stringify({ host: host.address, port: host.port, user: host.user, hostKey: host.hostKey, privateKey });
}

/** The child with `tmp` as its temp folder (where Ssh keeps whatever it keeps), the connection on its stdin. */
function startChild(mode: "hold" | "connect", tmp: string): { child: ChildProcess; exited: Promise<number | null>; stdout: () => string; stderr: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, mode], { cwd: REPO_ROOT, env: { ...process.env, TMPDIR: tmp }, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdin!.end(connectionJson());
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

async function until(what: string, ready: () => boolean, failed: () => string | undefined = () => undefined): Promise<void> {
  while (!ready()) {
    const why = failed();
    if (why !== undefined) throw new Error(`${what}: ${why}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Kills a child running `hold` once the host runs its command. */
async function killMidCall(tmp: string): Promise<void> {
  const c = startChild("hold", tmp);
  let code: number | null | undefined;
  void c.exited.then((x) => (code = x));
  await until("the child's command on the host", () => c.stdout().includes("mid-call"), () => (code !== undefined ? `the child exited (${code}): ${c.stderr()}` : undefined));
  c.child.kill("SIGKILL");
  await c.exited;
}

/** The lines of the key's base64 body after its first (which every ed25519 key shares). */
function keyBodyLines(): string[] {
  return privateKey
    .split("\n")
    .filter((l) => l && !l.startsWith("-----"))
    .slice(1)
    .filter((l) => l.length >= 16);
}

/** Every regular file under `roots` this test can read that holds a line of the key's body. */
function filesHoldingKey(roots: string[]): string[] {
  const needles = keyBodyLines().map((l) => Buffer.from(l));
  const found = new Set<string>();
  const walk = (p: string): void => {
    const st = fs.lstatSync(p, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) {
      let names: string[] = [];
      try {
        names = fs.readdirSync(p);
      } catch {
        return;
      }
      for (const n of names) walk(path.join(p, n));
    } else if (st.isFile()) {
      let content: Buffer;
      try {
        content = fs.readFileSync(p);
      } catch {
        return;
      }
      if (needles.some((n) => content.includes(n))) found.add(p);
    }
  };
  for (const root of roots) walk(root);
  return [...found];
}

/** Running processes (ssh-agent, ssh masters, ...) whose command line names `dir`. */
function processesNaming(dir: string): string[] {
  const out: string[] = [];
  for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    let argv: string;
    try {
      argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      if (fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z")) continue;
    } catch {
      continue;
    }
    if (argv.includes(dir) && Number(pid) !== process.pid) out.push(`${pid} ${argv}`);
  }
  return out;
}

const agentsNaming = (dir: string) => processesNaming(dir).filter((p) => /^\d+ \S*ssh-agent /.test(p));

test("a provider killed with SIGKILL mid-call leaves no file holding the private key, and no agent of its own", { timeout: 180_000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sshkey-run-"));
  try {
    await killMidCall(tmp);
    assert.deepEqual(filesHoldingKey([tmp, os.tmpdir(), "/dev/shm", "/var/tmp"]), [], "a file holds the private key after the process that used it was killed");
    // ssh-agent's parent check ends an agent whose command has ended: await it, whatever it takes.
    await until("the killed child's agent to end", () => agentsNaming(tmp).length === 0);
  } finally {
    for (const p of processesNaming(tmp)) process.kill(Number(p.split(" ")[0]), "SIGTERM");
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test("the next process's first connection removes what a killed one left and earlier versions' key folders untouched for a day, not a live owner's", { timeout: 180_000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sshkey-sweep-"));
  // An earlier version's folder (the key as `id`) whose process is gone, one whose ssh still
  // runs, and one made just now that no process names yet (a run of that version between two
  // ssh processes: kept). The first two were last changed two days ago.
  const earlierDead = path.join(tmp, "dflash-ssh-Dead01");
  const earlierLive = path.join(tmp, "dflash-ssh-Live01");
  const earlierFresh = path.join(tmp, "dflash-ssh-Frsh01");
  for (const dir of [earlierDead, earlierLive, earlierFresh]) {
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.writeFileSync(path.join(dir, "id"), privateKey, { mode: 0o600 });
  }
  const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
  for (const dir of [earlierDead, earlierLive]) fs.utimesSync(dir, twoDaysAgo, twoDaysAgo);

  const liveUser = spawn(process.execPath, ["-e", "process.stdin.resume()", "--", "-i", path.join(earlierLive, "id")], { stdio: ["pipe", "ignore", "ignore"] });
  // A folder of this layout whose owner (this test) runs.
  const ticks = fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ")[19];
  const ownedLive = path.join(tmp, `dflash-ssh-${process.pid}.${ticks}-Live02`);
  fs.mkdirSync(ownedLive, { mode: 0o700 });
  try {
    await killMidCall(tmp);
    const next = startChild("connect", tmp);
    assert.equal(await next.exited, 0, next.stderr());
    const left = fs.readdirSync(tmp).filter((n) => n.startsWith("dflash-ssh-")).sort();
    assert.deepEqual(left, [path.basename(earlierFresh), path.basename(earlierLive), path.basename(ownedLive)].sort(), "only the folders whose owner runs, or may run, are left");
    assert.deepEqual(filesHoldingKey([tmp]).sort(), [path.join(earlierFresh, "id"), path.join(earlierLive, "id")].sort());
    // Its agent and its multiplexing master were told to end: await it, whatever it takes.
    await until("the killed child's agent and ssh master to end", () => processesNaming(tmp).every((p) => p.startsWith(`${liveUser.pid} `)));
  } finally {
    liveUser.kill("SIGKILL");
    for (const p of processesNaming(tmp)) process.kill(Number(p.split(" ")[0]), "SIGTERM");
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
