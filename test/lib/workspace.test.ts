// The engine in a session of its own (simWorkspace's engineInOwnSession, used by the sweep; lib/lock-owners.ts renderRecordingEngine):
// the rendered `pulumi` runs the engine as a session leader, outside the caller's process
// group (so a Ctrl-C at the terminal does not reach it), under the PID the Automation API
// spawned and signals. A stand-in engine reports what it is; its path needs quoting.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { renderRecordingEngine } from "../../lib/lock-owners";

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
    fs.writeFileSync(wrapper, renderRecordingEngine(engine, { ownSession: true }), { mode: 0o755 });
    const child = spawn(wrapper, ["up", "--stack", "b16t4 w2048"], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, DFLASH_LOCK_OWNERS_DIR: path.join(dir, "owners") } });
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

// Issue 26, item 4: a newcomer points a stack at a simulated host with the lines
// `npm run simhost -- stack-config NAME STACK` prints, run as printed by the real CLI.
test("the config lines for a simulated host, run by the real CLI, give the stack whole host and service sections", async () => {
  const { simHostConfigLines, workspaceEnv } = await import("../../lib/workspace");
  const { execFileSync } = await import("node:child_process");
  const YAML = await import("yaml");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "config-lines-"));
  try {
    const project = YAML.parse(fs.readFileSync(path.join(__dirname, "..", "..", "Pulumi.yaml"), "utf8"));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), YAML.stringify({ name: project.name, runtime: "nodejs", config: project.config }));
    fs.mkdirSync(path.join(dir, "state"));
    const host = { name: "h1", address: "127.0.0.10", port: 22, user: "root" as const, privateKeyPath: "/run/dflash-simhost/h1/id_ed25519", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey", sglangPort: 30000, gpus: 8, gpuMemoryMiB: 97887, stateDir: "/x", knownHostsLine: "", knownHostsPath: "/x" } as never;
    const lines = simHostConfigLines(host, "b16t4-w2048", project.config);
    const env = { ...process.env, ...workspaceEnv(dir) };
    execFileSync("bash", ["-c", `pulumi stack init b16t4-w2048 >/dev/null && ${lines.map((l) => l.replace(/^npx pulumi /, "pulumi ")).join(" && ")}`], { cwd: dir, env, stdio: ["ignore", "ignore", "inherit"] });
    const config = YAML.parse(fs.readFileSync(path.join(dir, "Pulumi.b16t4-w2048.yaml"), "utf8")).config;
    assert.deepEqual(config["dflash-sglang:host"], { address: "127.0.0.10", port: 22, user: "root", privateKeyPath: "/run/dflash-simhost/h1/id_ed25519", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey" });
    assert.deepEqual(config["dflash-sglang:service"], { ...project.config["dflash-sglang:service"].value, port: 30000, listenAddress: "127.0.0.10" }, "Pulumi.yaml's service section, with the host's port and address");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 23: a simulated host where root may not log in (`simhost start --sudo ...`).
test("stack-config --write for a host reached through sudo: the overlay says user deploy and become sudo, and the overlay accepts them", async () => {
  const { withSimHostOverlay } = await import("../../lib/workspace");
  const { overlayFor, parseOverlay } = await import("../../components/sglang-service/overlay");
  const host = { name: "h1", address: "127.0.0.10", port: 22, user: "deploy" as const, become: "sudo" as const, rootPort: 2201, privateKeyPath: "/run/dflash-simhost/h1/id_ed25519", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey", sglangPort: 30000, gpus: 8, gpuMemoryMiB: 97887, stateDir: "/x", knownHostsPath: "/x" };
  const overlay = overlayFor(parseOverlay(withSimHostOverlay(undefined, host, "b16t4-w2048"), ["b16t4-w2048"]), "b16t4-w2048");
  assert.deepEqual(overlay.host, { address: "127.0.0.10", port: 22, user: "deploy", become: "sudo", privateKeyPath: "/run/dflash-simhost/h1/id_ed25519", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey" });
});
