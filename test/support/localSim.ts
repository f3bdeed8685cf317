// The simulators as plain local processes (no host): a sandbox of config, fault and GPU
// files, and a launcher. For tests of the simulators and of clients that talk to them.
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ChildProcess, spawn } from "node:child_process";
import { REPO_ROOT } from "../../lib/pulumi-env";

export const SIM = path.join(REPO_ROOT, "simhost/sim");

export function sandbox(sglang: object, faults: object = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sglang-sim-"));
  for (const [name, gib] of [["model", 590], ["drafter", 6]] as const) {
    fs.mkdirSync(path.join(dir, name));
    fs.writeFileSync(path.join(dir, name, "config.json"), JSON.stringify({ sim_size_gib: gib }));
  }
  fs.writeFileSync(path.join(dir, "sglang.json"), JSON.stringify({ loadSeconds: 0.3, warmupSeconds: 0.3, shutdownSeconds: 0.1, ...sglang }));
  fs.writeFileSync(path.join(dir, "faults.json"), JSON.stringify(faults));
  const env = { ...process.env, GPU_SIM_DIR: path.join(dir, "gpu"), GPU_SIM_CONFIG: path.join(dir, "gpus.json"), DFLASH_SIM_FAULTS: path.join(dir, "faults.json"), DFLASH_SIM_SGLANG_CONFIG: path.join(dir, "sglang.json") };
  return { dir, env, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

export function launch(env: NodeJS.ProcessEnv, args: string[]): { child: ChildProcess; exited: Promise<{ code: number | null; stderr: string }> } {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(SIM, "sglang/launch_server.ts"), ...args], { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<{ code: number | null; stderr: string }>((r) => child.once("exit", (code) => r({ code, stderr })));
  return { child, exited };
}

export async function status(port: number, p: string): Promise<number | "refused"> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${p}`)).status;
  } catch {
    return "refused";
  }
}

export async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

