// No simulated host outlives the program that booted it. A real program
// (test/fixtures/owns-a-host.ts, wired like the demo, the sweep and the benchmarks) boots one
// real host and is signalled: SIGTERM, SIGINT and SIGHUP stop the host, during its boot too,
// and the program exits 128 + the signal's number. SIGKILLed, it leaves its host behind, and
// the next reclaim stops that host and says which host and which owner. Kept hosts (`simhost
// start`), hosts whose owner runs, and hosts without an owner record are never reclaimed.
// Needs root and the compiled simulators, as test/simhost/hosts.test.ts does; one host at a time.
import { after, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { parseProcStat, reclaimOrphans, STATE_ROOT, status, stop } from "../../simhost/hosts";
import { REPO_ROOT } from "../../lib/pulumi-env";

const PREFIX = `orphans-${process.pid}`;
const names: string[] = [];
after(async () => {
  for (const name of names) await stop(name);
});

/** The fixture program, owning host `name`. */
function ownerOf(name: string, flags: string[] = []) {
  names.push(name);
  const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "test/fixtures/owns-a-host.ts"), name, ...flags], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const seen: (() => void)[] = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
    for (const check of seen) check();
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    pid: child.pid!,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    signal: (signal: NodeJS.Signals) => child.kill(signal),
    /** The first match of `re` on stdout; fails if the program ends or 60 s pass first. */
    until(re: RegExp): Promise<RegExpMatchArray> {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${re} on stdout within 60 s:\n${stdout}\n${stderr}`)), 60_000);
        const check = () => {
          const m = re.exec(stdout);
          if (m) {
            clearTimeout(timer);
            resolve(m);
          }
        };
        seen.push(check);
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`the program ended before ${re}:\n${stdout}\n${stderr}`));
        });
        check();
      });
    },
  };
}

/** What a TCP connection to address:22 meets: sshd, a refusal (nothing listens), or no answer within 5 s. */
function sshProbe(address: string): Promise<"accepts" | "refused" | "silent"> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: address, port: 22, timeout: 5_000 });
    socket.on("connect", () => {
      socket.destroy();
      resolve("accepts");
    });
    socket.on("timeout", () => {
      socket.destroy();
      resolve("silent");
    });
    socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED" ? "refused" : "silent"));
  });
}

async function assertGone(name: string, address: string): Promise<void> {
  assert.equal(fs.existsSync(path.join(STATE_ROOT, name)), false, `state of ${name} left in ${STATE_ROOT}`);
  // Its address is free, or (other test files start hosts meanwhile) another host's now.
  const claimant = (): string => {
    try {
      return fs.readFileSync(path.join(STATE_ROOT, "addresses", address, "owner"), "utf8").trim();
    } catch {
      return fs.existsSync(path.join(STATE_ROOT, "addresses", address)) ? "(a host being started)" : "";
    }
  };
  assert.notEqual(claimant(), name, `address ${address} still claimed by ${name}`);
  assert.ok(!status().some((h) => h.name === name), `${name} still listed by status`);
  const running = fs.readdirSync("/proc").filter((pid) => {
    try {
      return /^\d+$/.test(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(`--machine=${name}`);
    } catch {
      return false;
    }
  });
  assert.deepEqual(running, [], `processes of ${name}`);
  for (const hierarchy of ["systemd", "unified"]) {
    assert.equal(fs.existsSync(`/sys/fs/cgroup/${hierarchy}/nspawn-${name}`), false, `cgroup ${hierarchy} of ${name} left, with the container's processes`);
  }
  const probe = await sshProbe(address);
  if (probe !== "refused") {
    const now = claimant();
    assert.ok(now !== "" && now !== name, `something still listens on ${address}:22 (${probe}), and no other host claims the address`);
  }
}

for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
  test(`${signal} to a program that owns a host: the host is stopped, the address freed, exit ${code}`, { timeout: 120_000 }, async () => {
    const name = `${PREFIX}-${signal.slice(3).toLowerCase()}`;
    const owner = ownerOf(name);
    const [, address] = await owner.until(/^ready (\S+)$/m);
    assert.equal(status().find((h) => h.name === name)?.alive, true);
    owner.signal(signal);
    assert.deepEqual(await owner.exited, { code, signal: null }, owner.stderr());
    assert.match(owner.stderr(), new RegExp(`owns-a-host: ${signal}: stopping simulated host\\(s\\) ${name}, then exiting`));
    await assertGone(name, address);
  });
}

test("SIGHUP while the host still boots: the half-booted host is stopped too, exit 129", { timeout: 120_000 }, async () => {
  const name = `${PREFIX}-hup`;
  // The boot is held unfinished, so the signal cannot come after it; it comes once sshd runs.
  const owner = ownerOf(name, ["--hold-boot"]);
  await owner.until(/^simhost: .*waiting for sshd/m);
  const address = JSON.parse(fs.readFileSync(path.join(STATE_ROOT, name, "host.json"), "utf8")).address as string;
  const deadline = Date.now() + 60_000;
  while ((await sshProbe(address)) !== "accepts") {
    assert.ok(Date.now() < deadline, `sshd of ${name} did not start within 60 s:\n${owner.stdout()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  owner.signal("SIGHUP");
  assert.deepEqual(await owner.exited, { code: 129, signal: null }, owner.stderr());
  assert.doesNotMatch(owner.stdout(), /^ready /m, "the signal came during the boot");
  await assertGone(name, address);
});

test("a SIGKILLed owner leaves its host running; the next reclaim stops it and names the host and the dead owner", { timeout: 120_000 }, async () => {
  const name = `${PREFIX}-kill`;
  const owner = ownerOf(name);
  const [, address] = await owner.until(/^ready (\S+)$/m);
  owner.signal("SIGKILL");
  assert.deepEqual(await owner.exited, { code: null, signal: "SIGKILL" });
  const left = status().find((h) => h.name === name);
  assert.equal(left?.alive, true, "nothing stopped the host");
  assert.deepEqual(left?.owner, { pid: owner.pid, command: `test/fixtures/owns-a-host.ts ${name}`, running: false });

  const said: string[] = [];
  const { reclaimed, failed } = await reclaimOrphans((line) => said.push(line));
  assert.deepEqual(failed, []);
  assert.deepEqual(reclaimed.filter((h) => h.name === name), [{ name, ownerPid: owner.pid, command: `test/fixtures/owns-a-host.ts ${name}` }]);
  assert.ok(
    said.includes(`simhost: reclaiming host ${name} (${address}): its owner, pid ${owner.pid} (test/fixtures/owns-a-host.ts ${name}), is gone; stopping it`),
    said.join("\n"),
  );
  await assertGone(name, address);
});

test("reclaim leaves kept hosts, hosts whose owner runs and hosts without a record alone; a reused PID is not the owner", async () => {
  // Host folders with an owner record and nothing else: what reclaim reads, without booting.
  const self = parseProcStat(fs.readFileSync(`/proc/${process.pid}/stat`, "utf8"));
  const ended = spawn("sleep", ["60"]);
  const endedTicks = parseProcStat(fs.readFileSync(`/proc/${ended.pid}/stat`, "utf8")).startTicks;
  await new Promise((resolve) => {
    ended.on("exit", resolve);
    ended.kill("SIGKILL");
  });
  const records: Record<string, unknown> = {
    ended: { kind: "process", pid: ended.pid, startTicks: endedTicks, command: "sleep 60" },
    reused: { kind: "process", pid: process.pid, startTicks: self.startTicks - 1, command: "an earlier process with this PID" },
    running: { kind: "process", pid: process.pid, startTicks: self.startTicks, command: "this test" },
    kept: { kind: "kept" },
    unrecorded: undefined,
  };
  const dirOf = (key: string) => path.join(STATE_ROOT, `${PREFIX}-${key}`);
  try {
    for (const [key, record] of Object.entries(records)) {
      fs.mkdirSync(dirOf(key), { recursive: true });
      if (record) fs.writeFileSync(path.join(dirOf(key), "owner.json"), JSON.stringify(record));
    }
    const owners = Object.fromEntries(status().filter((h) => h.name.startsWith(PREFIX)).map((h) => [h.name.slice(PREFIX.length + 1), h.owner]));
    assert.deepEqual(owners, {
      ended: { pid: ended.pid, command: "sleep 60", running: false },
      reused: { pid: process.pid, command: "an earlier process with this PID", running: false },
      running: { pid: process.pid, command: "this test", running: true },
      kept: "kept",
      unrecorded: null,
    });

    const said: string[] = [];
    const { reclaimed } = await reclaimOrphans((line) => said.push(line));
    assert.deepEqual(reclaimed.filter((h) => h.name.startsWith(PREFIX)).map((h) => h.name), [`${PREFIX}-ended`, `${PREFIX}-reused`]);
    assert.deepEqual(said.filter((line) => line.includes(PREFIX)), [
      `simhost: reclaiming host ${PREFIX}-ended: its owner, pid ${ended.pid} (sleep 60), is gone; stopping it`,
      `simhost: reclaiming host ${PREFIX}-reused: its owner, pid ${process.pid} (an earlier process with this PID), is gone; stopping it`,
    ]);
    for (const [key, kept] of [["ended", false], ["reused", false], ["running", true], ["kept", true], ["unrecorded", true]] as const) {
      assert.equal(fs.existsSync(dirOf(key)), kept, `${key}: ${kept ? "left alone" : "reclaimed"}`);
    }
  } finally {
    for (const key of Object.keys(records)) fs.rmSync(dirOf(key), { recursive: true, force: true });
  }
});
