// Simulated hosts: the pure parts (listeners, names, the files a host gets), then two
// real hosts at once (systemd-nspawn, systemd, OpenSSH) reached over ssh on their own
// loopback addresses, and nothing left after stop. The second part needs root and the
// compiled simulators (npx tsc -p simhost/sim/tsconfig.json).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import {
  STATE_ROOT,
  configure,
  fault,
  ownerIsGone,
  parseListeners,
  parseProcStat,
  renderHostTree,
  start,
  status,
  stop,
  ssh,
  validateHostName,
  type HostEntry,
  type HostInfo,
} from "../../simhost/hosts";

describe("pure parts", () => {
  test("addresses with port 22 or 30000 taken are skipped; a wildcard listener blocks every host", () => {
    const ss = [
      "LISTEN 0 128 0.0.0.0:2024 0.0.0.0:*",
      "LISTEN 0 128 127.0.0.10:30000 0.0.0.0:*",
      "LISTEN 0 128 127.0.0.11:22 0.0.0.0:*",
      "LISTEN 0 128 127.0.0.12:8080 0.0.0.0:*",
    ].join("\n");
    assert.deepEqual([...parseListeners(ss).busyAddresses].sort(), ["127.0.0.10", "127.0.0.11"]);
    assert.deepEqual(parseListeners(ss).wildcardPorts, []);
    assert.deepEqual(parseListeners("LISTEN 0 128 [::]:22 [::]:*\nLISTEN 0 128 0.0.0.0:30000 0.0.0.0:*").wildcardPorts, [22, 30000]);
  });

  test("/proc/PID/stat: the state and the start time, whatever the command name holds", () => {
    const fields = "S 1 4121 4121 0 -1 4194560 1520 0 0 0 12 3 0 0 20 0 11 0 987654 1146644480 46150";
    assert.deepEqual(parseProcStat(`4121 (node) ${fields}`), { state: "S", startTicks: 987654 });
    assert.deepEqual(parseProcStat(`4121 (a) (b) c) ${fields.replace(/^S/, "Z")}`), { state: "Z", startTicks: 987654 });
    assert.throws(() => parseProcStat("4121 (node) S 1"), /not a \/proc\/PID\/stat line/);
  });

  test("a host's owner is gone when its PID ended, is a zombie, or now names a process started at another time; kept hosts have none", () => {
    const owner = { kind: "process", pid: 4121, startTicks: 987654, command: "scripts/sweep.ts" } as const;
    assert.equal(ownerIsGone(owner, { state: "S", startTicks: 987654 }), false);
    assert.equal(ownerIsGone(owner, null), true);
    assert.equal(ownerIsGone(owner, { state: "Z", startTicks: 987654 }), true);
    assert.equal(ownerIsGone(owner, { state: "R", startTicks: 1200000 }), true, "the PID was reused");
    assert.equal(ownerIsGone({ kind: "kept" }, null), false);
  });

  test("host names that cannot be a machine name, hostname and cgroup dir are refused", () => {
    assert.equal(validateHostName("gpu-host-1"), "gpu-host-1");
    for (const bad of ["", "Gpu", "a_b", "-a", "a/b", "addresses", "x".repeat(64)]) assert.throws(() => validateHostName(bad), /host name/);
  });

  const params: Parameters<typeof renderHostTree>[0] = {
    name: "h1",
    address: "127.0.0.42",
    machineId: "0".repeat(32),
    clientPublicKey: "ssh-ed25519 AAAAkey simhost-h1\n",
    gpus: 4,
    gpuMemoryMiB: 1000,
    sglang: { b: 1, a: 2 },
    models: [{ path: "/models/m", sizeGiB: 3 }],
    facts: { python: "python3.13", units: new Set(["fstrim.timer"]), multiUserWants: new Set() },
  };

  test("the host tree: sshd on the host's own address, the rootfs's python, masks only for shipped units", () => {
    const entries = renderHostTree(params);
    const byPath = new Map(entries.map((e): [string, HostEntry] => [e.path, e]));
    const content = (p: string) => {
      const e = byPath.get(p);
      assert.ok(e && e.kind === "file", `${p} is rendered`);
      return e.content;
    };
    assert.equal(content("/etc/ssh/sshd_config.d/10-simhost.conf"), "ListenAddress 127.0.0.42\nHostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n");
    assert.match(content("/usr/local/lib/python3.13/dist-packages/sglang/launch_server.py"), /os\.execv\("\/usr\/local\/bin\/node"/);
    assert.equal(content("/etc/dflash-sim/gpus.json"), '{"count":4,"memoryMiB":1000}\n');
    assert.equal(content("/etc/dflash-sim/sglang.json"), '{"a":2,"b":1}\n');
    assert.equal(content("/models/m/config.json"), '{"sim_size_gib":3}\n');
    assert.deepEqual(byPath.get("/root/.ssh"), { kind: "dir", path: "/root/.ssh", mode: 0o700 });
    assert.deepEqual(
      entries.filter((e) => e.kind === "symlink").map((e) => e.path),
      ["/etc/systemd/system/multi-user.target.wants/ssh.service", "/etc/systemd/system/fstrim.timer"],
    );
  });

  // Issue 23: the host the tool reaches as deploy, through sudo. Booted in sudo.test.ts.
  test("a host where root may not log in: deploy's key and sudoers file; root only on the harness's port", () => {
    const entries = renderHostTree({ ...params, sudoers: "deploy ALL=(root) NOPASSWD: /usr/bin/bash -s" });
    const byPath = new Map(entries.map((e): [string, HostEntry] => [e.path, e]));
    assert.deepEqual(byPath.get("/etc/ssh/sshd_config.d/10-simhost.conf"), {
      kind: "file",
      path: "/etc/ssh/sshd_config.d/10-simhost.conf",
      mode: 0o644,
      content: "ListenAddress 127.0.0.42\nHostKey /etc/ssh/ssh_host_ed25519_key\nListenAddress 127.0.0.42:2201\nPermitRootLogin no\nPasswordAuthentication no\nUseDNS no\n",
    });
    // Last of the drop-ins: a Match block lasts to the end of its file.
    assert.equal(entries.filter((e) => e.path.startsWith("/etc/ssh/sshd_config.d/")).map((e) => e.path).sort().pop(), "/etc/ssh/sshd_config.d/99-simhost-root-port.conf");
    assert.deepEqual(byPath.get("/etc/ssh/sshd_config.d/99-simhost-root-port.conf"), { kind: "file", path: "/etc/ssh/sshd_config.d/99-simhost-root-port.conf", mode: 0o644, content: "Match LocalPort 2201\n\tPermitRootLogin prohibit-password\n" });
    // sshd reads authorized_keys as the user: root-owned, readable by all.
    assert.deepEqual(byPath.get("/home/deploy/.ssh/authorized_keys"), { kind: "file", path: "/home/deploy/.ssh/authorized_keys", mode: 0o644, content: "ssh-ed25519 AAAAkey simhost-h1\n" });
    assert.deepEqual(byPath.get("/etc/sudoers.d/deploy"), { kind: "file", path: "/etc/sudoers.d/deploy", mode: 0o440, content: "deploy ALL=(root) NOPASSWD: /usr/bin/bash -s\n" });
    assert.ok(!renderHostTree(params).some((e) => e.path.startsWith("/home/deploy") || e.path.startsWith("/etc/sudoers.d")), "a root host gives deploy nothing");
  });

  test("model paths outside an absolute, '..'-free path are refused", () => {
    assert.throws(() => renderHostTree({ ...params, models: [{ path: "/models/../etc", sizeGiB: 1 }] }), /must be an absolute path without '\.\.'/);
    assert.throws(() => renderHostTree({ ...params, models: [{ path: "models/m", sizeGiB: 1 }] }), /must be an absolute path/);
  });
});

describe("two hosts at once", () => {
  const names = [`hosts-${process.pid}-a`, `hosts-${process.pid}-b`];
  let hosts: HostInfo[] = [];

  before(async () => {
    // Stop whatever did start if the other one failed.
    const started = await Promise.allSettled(names.map((name) => start(name)));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) {
      await Promise.all(names.map((name) => stop(name)));
      throw failed.reason;
    }
    hosts = started.map((r) => (r as PromiseFulfilledResult<HostInfo>).value);
  });

  after(async () => {
    for (const name of names) await stop(name);
  });

  test("both hosts boot to a running systemd, each with its own address and name", async () => {
    assert.notEqual(hosts[0].address, hosts[1].address);
    for (const host of hosts) {
      assert.match(host.address, /^127\.0\.0\.\d+$/);
      const result = await ssh(host, "systemctl is-system-running; hostname");
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(result.stdout.trim().split("\n"), ["running", host.name]);
    }
  });

  test("nvidia-smi inside a host reports 8 GPUs", async () => {
    const result = await ssh(hosts[0], "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits");
    assert.equal(result.code, 0, result.stderr);
    const lines = result.stdout.trim().split("\n");
    assert.equal(lines.length, 8, result.stdout);
    assert.deepEqual(lines.map((line) => line.split(",").map((f) => f.trim())[0]), ["0", "1", "2", "3", "4", "5", "6", "7"]);
    for (const line of lines) assert.equal(line.split(",")[2].trim(), "97887", line);
  });

  test("ssh refuses a host that presents a different host key", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "simhost-known-"));
    try {
      const wrong = path.join(dir, "known_hosts");
      fs.writeFileSync(wrong, `${hosts[0].address} ${hosts[1].hostKey}\n`);
      const result = await ssh(hosts[0], "true", { knownHostsPath: wrong });
      assert.equal(result.code, 255);
      assert.match(result.stderr, /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("fault and configure change the simulator's files inside the host; unknown faults are refused", async () => {
    const [host] = hosts;
    fault(host.name, '{"gpuReleaseDelaySeconds":5}');
    configure(host.name, '{"b":2}');
    configure(host.name, '{"a":1}');
    const result = await ssh(host, "cat /etc/dflash-sim/faults.json /etc/dflash-sim/sglang.json");
    assert.equal(result.stdout, '{"gpuReleaseDelaySeconds":5}\n{"a":1,"b":2}\n');
    assert.throws(() => fault(host.name, '{"gpuReleaseDelay":5}'), /unknown fault "gpuReleaseDelay"/);
  });

  test("smoke: a unit running the simulated SGLang under real systemd serves, holds GPUs, and stops", async () => {
    const host = hosts[1];
    configure(host.name, '{"loadSeconds":1,"warmupSeconds":0.2}');
    const unit = [
      "[Service]",
      `ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /models/Kimi-K2.6 --tp-size 8 --host ${host.address} --port ${host.sglangPort}`,
      "",
    ].join("\n");
    const write = await ssh(host, "cat > /etc/systemd/system/smoke.service && systemctl daemon-reload && systemctl start smoke.service", { input: unit });
    assert.equal(write.code, 0, write.stderr);
    const deadline = Date.now() + 30_000;
    let health = 0;
    while (health !== 200 && Date.now() < deadline) {
      health = await fetch(`http://${host.address}:${host.sglangPort}/health`).then((r) => r.status, () => 0);
      if (health !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(health, 200, "the simulated server became ready");
    const mainPid = (await ssh(host, "systemctl show -p MainPID --value smoke.service")).stdout.trim();
    const apps = (await ssh(host, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits")).stdout.trim().split("\n");
    assert.equal(apps.length, 8, "one allocation per TP rank");
    assert.ok(apps.every((a) => a.startsWith(`${mainPid}, `)), `allocations belong to the unit's main pid ${mainPid}: ${apps}`);
    // nvidia-smi names the used_memory column used_gpu_memory.
    assert.equal((await ssh(host, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv")).stdout.split("\n")[0], "pid, used_gpu_memory [MiB]");
    const journal = (await ssh(host, "journalctl -u smoke.service --no-pager -o cat")).stdout;
    assert.match(journal, /The server is fired up and ready to roll!/);
    // SGLang main (v0.5.20 on) ends its SIGTERM drain by killing its children and handing the
    // exit to uvicorn (tokenizer_manager.py sigterm_watchdog): exit 0, a plain unit "inactive".
    // (v0.5.19 SIGKILLed itself: "failed", status=9/KILL; test/simhost/sim/lines.test.ts.)
    assert.equal((await ssh(host, "systemctl stop smoke.service; systemctl is-active smoke.service")).stdout.trim(), "inactive");
    const stopped = (await ssh(host, "journalctl -u smoke.service --no-pager -o cat")).stdout;
    assert.match(stopped, /INFO: {5}Finished server process \[\d+\]/);
    assert.doesNotMatch(stopped, /status=9\/KILL/);
    await ssh(host, "systemctl reset-failed smoke.service || true");
    assert.equal((await ssh(host, "nvidia-smi --query-compute-apps=pid --format=csv,noheader")).stdout.trim(), "", "no process holds GPU memory after stop");
  });

  test("a name that is already running is refused", async () => {
    await assert.rejects(start(hosts[1].name), new RegExp(`host ${hosts[1].name} is already running`));
    assert.equal((await ssh(hosts[1], "systemctl is-system-running")).stdout.trim(), "running");
  });

  test("stop leaves no process, mount, cgroup, address or state behind", async () => {
    const pids = hosts.map((host) => Number(fs.readFileSync(path.join(host.stateDir, "nspawn.pid"), "utf8")));
    await Promise.all(hosts.map((host) => stop(host.name)));
    const mounts = execFileSync("findmnt", ["-rn", "-o", "TARGET"], { encoding: "utf8" });
    for (const [i, host] of hosts.entries()) {
      const withMachineName = fs.readdirSync("/proc").filter((pid) => {
        try {
          return /^\d+$/.test(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(`--machine=${host.name}`);
        } catch {
          return false;
        }
      });
      assert.deepEqual(withMachineName, [], `processes of ${host.name}`);
      const stat = fs.existsSync(`/proc/${pids[i]}/stat`) ? fs.readFileSync(`/proc/${pids[i]}/stat`, "utf8") : "";
      assert.ok(stat === "" || / Z /.test(stat), `systemd-nspawn ${pids[i]} still runs: ${stat}`);
      assert.ok(!mounts.includes(host.stateDir), `overlay of ${host.name} still mounted`);
      for (const hierarchy of ["systemd", "unified"]) {
        assert.equal(fs.existsSync(`/sys/fs/cgroup/${hierarchy}/nspawn-${host.name}`), false, `cgroup ${hierarchy} of ${host.name}`);
      }
      // Its address is free, or (other test files start hosts meanwhile) another host's now.
      let owner = "";
      try {
        owner = fs.readFileSync(path.join(STATE_ROOT, "addresses", host.address, "owner"), "utf8").trim();
      } catch {
        // not claimed, or being claimed by another host
      }
      assert.notEqual(owner, host.name, `address ${host.address} still claimed by ${host.name}`);
      assert.equal(fs.existsSync(host.stateDir), false);
      assert.ok(!status().some((s) => s.name === host.name));
    }
    const refused = await ssh(hosts[0], "true", { timeoutMs: 10_000 });
    assert.equal(refused.code, 255, "nothing listens on the stopped host's address");
  });
});

test("a systemd-nspawn killed before it passes the stop on leaves its container running; stop ends the container too", { timeout: 120_000 }, async () => {
  const name = `hosts-${process.pid}-orphan`;
  const procsIn = (dir: string): number[] => {
    if (!fs.existsSync(dir)) return [];
    const own = fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
    const below = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory());
    return [...own, ...below.flatMap((e) => procsIn(path.join(dir, e.name)))];
  };
  const alive = (pid: number) => {
    try {
      return !/^\d+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      return false;
    }
  };
  try {
    const host = await start(name);
    const nspawn = Number(fs.readFileSync(path.join(host.stateDir, "nspawn.pid"), "utf8"));
    // What a SIGTERM that comes before nspawn has its signal handlers does, made certain.
    process.kill(nspawn, "SIGKILL");
    while (alive(nspawn)) await new Promise((resolve) => setTimeout(resolve, 50));
    const left = procsIn(`/sys/fs/cgroup/systemd/nspawn-${name}`).filter(alive);
    assert.ok(left.length > 0, "the container outlived its systemd-nspawn");
    assert.equal((await ssh(host, "systemctl is-system-running")).stdout.trim(), "running", "and still serves");

    await stop(name);
    assert.deepEqual(left.filter(alive), [], "processes of the container still run");
    for (const hierarchy of ["systemd", "unified"]) {
      assert.equal(fs.existsSync(`/sys/fs/cgroup/${hierarchy}/nspawn-${name}`), false, `cgroup ${hierarchy} of ${name}`);
    }
    assert.equal(fs.existsSync(host.stateDir), false);
    assert.equal((await ssh(host, "true", { timeoutMs: 10_000 })).code, 255, "nothing listens on the stopped host's address");
  } finally {
    await stop(name);
  }
});
