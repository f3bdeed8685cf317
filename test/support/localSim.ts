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
  fs.writeFileSync(path.join(dir, "sglang.json"), JSON.stringify({ loadSeconds: 0.3, warmupSeconds: 0.3, ...sglang }));
  fs.writeFileSync(path.join(dir, "faults.json"), JSON.stringify(faults));
  const env = { ...process.env, GPU_SIM_DIR: path.join(dir, "gpu"), GPU_SIM_CONFIG: path.join(dir, "gpus.json"), DFLASH_SIM_FAULTS: path.join(dir, "faults.json"), DFLASH_SIM_SGLANG_CONFIG: path.join(dir, "sglang.json"), DFLASH_SIM_LAUNCHES: path.join(dir, "launches") };
  return { dir, env, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** Starts the simulated server; `log()` is what it has written to stdout so far (the journal). */
export function launch(env: NodeJS.ProcessEnv, args: string[]): { child: ChildProcess; exited: Promise<Exit>; log: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(SIM, "sglang/launch_server.ts"), ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdout!.on("data", (d) => (stdout += d));
  const exited = new Promise<Exit>((r) => child.once("exit", (code, signal) => r({ code, signal, stderr })));
  return { child, exited, log: () => stdout };
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


/**
 * Starts the simulator in a fresh sandbox with `args(dir, port)`, waits until /health
 * says 200, runs `fn`, then kills the server and removes the sandbox.
 */
export async function withServingSim(sglang: object, args: (dir: string, port: number) => string[], fn: (s: { port: number; dir: string; log: () => string }) => Promise<void>): Promise<void> {
  const sb = sandbox(sglang);
  const port = await freePort();
  const server = launch(sb.env, args(sb.dir, port));
  try {
    await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    await fn({ port, dir: sb.dir, log: server.log });
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
}

/** meta_info of SGLang's native /generate, as far as the simulator's tests read it. */
export interface GenerateMeta {
  id: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  finish_reason: null | { type: "length"; length: number } | { type: "stop"; matched: number };
  e2e_latency: number;
  spec_verify_ct?: number;
  spec_accept_length?: number;
}

export interface GenerateEvent {
  text?: string;
  meta_info?: GenerateMeta;
  index?: number;
  error?: { message: string };
}

/**
 * One request to the simulator's native /generate. Streaming: every `data:` event parsed
 * (`events`, with the ms since the request at which each arrived in `atMs`; `done` for the
 * closing [DONE]), `ttftMs` to the first event. Not streaming: the body as `events[0]`.
 * `status` is the HTTP status either way.
 */
export async function generate(port: number, body: object): Promise<{ status: number; ttftMs: number; events: GenerateEvent[]; atMs: number[]; done: boolean }> {
  const started = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/generate`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!(body as { stream?: boolean }).stream) {
    const ms = performance.now() - started;
    return { status: res.status, ttftMs: ms, events: [(await res.json()) as GenerateEvent], atMs: [ms], done: false };
  }
  const events: GenerateEvent[] = [];
  const atMs: number[] = [];
  let done = false;
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += Buffer.from(chunk).toString("utf8");
    for (let sep = buffer.indexOf("\n\n"); sep >= 0; sep = buffer.indexOf("\n\n")) {
      const data = buffer.slice(0, sep).replace(/^data: /, "");
      buffer = buffer.slice(sep + 2);
      if (data === "[DONE]") done = true;
      else {
        events.push(JSON.parse(data) as GenerateEvent);
        atMs.push(performance.now() - started);
      }
    }
  }
  return { status: res.status, ttftMs: atMs[0] ?? NaN, events, atMs, done };
}
