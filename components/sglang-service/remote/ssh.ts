// SSH to a GPU host with the system's OpenSSH client: the host key is pinned (checked
// before anything runs), one multiplexed connection serves every poll of a step, and the
// private key is held by an ssh-agent of the connection's own, never in a file (key-agent.ts:
// why, and what a killed process leaves). Every command runs as root: as the SSH user, or
// through sudo (become.ts: the connection's `become`).
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { asSshUser, Become, sudoRefusal, sudoRefusedMessage } from "../become";
import { CONTROL_SOCKET, HOST_ALIAS, KeyAgent, openKeyAgent } from "./key-agent";
import { monotonicMs } from "../../../lib/monotonic";

export interface Connection {
  host: string;
  port: number;
  user: string;
  privateKey: string;
  hostKey: string;
  /** "sudo": `user` runs every command as root through `sudo -n` (become.ts). Unset: `user` is root. */
  become?: Become;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class Ssh {
  private constructor(
    readonly conn: Connection,
    private readonly agent: KeyAgent,
  ) {}

  /** The connection's agent holding its key, and the pinned host key beside it. */
  private static async prepare(conn: Connection): Promise<Ssh> {
    const agent = await openKeyAgent(conn.privateKey);
    fs.writeFileSync(path.join(agent.dir, "known_hosts"), `${HOST_ALIAS} ${conn.hostKey.trim()}\n`, { mode: 0o600 });
    return new Ssh(conn, agent);
  }

  /** What went wrong with a connection that did not get as far as running anything. */
  private static refused(conn: Connection, r: RunResult): Error {
    const where = `${conn.user}@${conn.host}:${conn.port}`;
    if (/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key for .* has changed/i.test(r.stderr)) {
      return new Error(`SSH to ${where} refused: the host's key does not match the pinned host.hostKey. Nothing was run on the host. If the host was really reinstalled, update host.hostKey from \`ssh-keyscan -p ${conn.port} ${conn.host}\`.\n${r.stderr.trim()}`);
    }
    return noConnection(r.stderr) ? new Unreachable(unreachableMessage(conn, r)) : new Error(unreachableMessage(conn, r));
  }

  /**
   * Opens a connection and proves the host is the pinned one. With `retryMs`, a connection
   * refused, reset or timed out (sshd restarting, a network hiccup) is tried again each second
   * until then, `onRetry` told once; a host key or a key the host refuses never is.
   */
  static async open(conn: Connection, opts: { retryMs?: number; onRetry?: (why: string) => void } = {}): Promise<Ssh> {
    const ssh = await Ssh.prepare(conn);
    // On the monotonic clock (issue 60): a step of the wall clock neither ends the retries at once nor holds them for hours.
    const until = monotonicMs() + (opts.retryMs ?? 0);
    let told = false;
    for (;;) {
      const r = await ssh.run("true", { timeoutMs: 30_000 }).catch((e: Error) => {
        ssh.close();
        throw e;
      });
      if (r.code === 0) return ssh;
      if (r.code === 255 && transientSshFailure(r.stderr) && monotonicMs() < until) {
        if (!told) opts.onRetry?.(r.stderr.trim());
        told = true;
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      ssh.close();
      throw Ssh.refused(conn, r);
    }
  }

  /**
   * One script on its own connection, for a single read: no multiplexing to set up and tear
   * down. The host key is checked as by open; ssh's own failures (exit 255) and sudo's refusal
   * throw the same way.
   */
  static async once(conn: Connection, script: string, timeoutMs = 30_000): Promise<RunResult> {
    const ssh = await Ssh.prepare(conn);
    try {
      const r = await ssh.run(script, { timeoutMs, multiplex: false });
      if (r.code === 255) throw Ssh.refused(conn, r);
      return r;
    } finally {
      ssh.agent.close();
    }
  }

  /** Options only: every spawn puts "--" before the destination, so no value can be read as an option. */
  private baseArgs(multiplex = true): string[] {
    const mux = multiplex
      ? ["-o", "ControlMaster=auto", "-o", `ControlPath=${path.join(this.agent.dir, CONTROL_SOCKET)}`, "-o", "ControlPersist=300"]
      : ["-o", "ControlMaster=no", "-o", "ControlPath=none"];
    return [
      "-i", this.agent.publicKeyFile,
      "-o", `IdentityAgent=${this.agent.socket}`,
      "-p", String(this.conn.port),
      "-o", "BatchMode=yes",
      "-o", "IdentitiesOnly=yes",
      "-o", "StrictHostKeyChecking=yes",
      "-o", `UserKnownHostsFile=${path.join(this.agent.dir, "known_hosts")}`,
      "-o", "GlobalKnownHostsFile=/dev/null",
      "-o", `HostKeyAlias=${HOST_ALIAS}`,
      "-o", "ConnectTimeout=10",
      "-o", "ServerAliveInterval=5",
      "-o", "ServerAliveCountMax=3",
      ...mux,
      "-o", "LogLevel=ERROR",
    ];
  }

  /**
   * Runs a POSIX sh script on the host, as root. `input` goes to its stdin: the way to pass
   * secrets, which must never be part of a command line (visible in `ps` on the host).
   * Never rejects on a non-zero exit (the caller decides), but does when sudo refuses to run
   * it: that is not the script's answer.
   */
  run(script: string, opts: { timeoutMs?: number; input?: string; multiplex?: boolean } = {}): Promise<RunResult> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const remote = asSshUser(this.conn.become, script, opts.input);
    return new Promise((resolve, reject) => {
      const child = spawn("ssh", [...this.baseArgs(opts.multiplex ?? true), "--", `${this.conn.user}@${this.conn.host}`, remote.command], { stdio: ["pipe", "pipe", "pipe"] });
      // ssh may exit before it reads its stdin (a refused host, an option error): the write
      // then fails with EPIPE, which the exit status already reports.
      child.stdin.on("error", () => undefined);
      child.stdin.end(remote.stdin);
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`command on ${this.conn.host} did not finish within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      child.on("error", (e) => {
        clearTimeout(timer);
        reject(new Error(`cannot run ssh: ${e.message} (install the OpenSSH client)`));
      });
      child.on("close", (code) => {
        clearTimeout(timer);
        const r = { code: code ?? 255, stdout, stderr };
        const sudo = this.conn.become === "sudo" ? sudoRefusal(r.code, r.stderr) : undefined;
        if (sudo !== undefined) reject(new NoRootAccess(sudoRefusedMessage(this.conn.user, `${this.conn.host}:${this.conn.port}`, sudo)));
        else resolve(r);
      });
    });
  }

  /**
   * Starts a script on its own connection whose stdin stays open until `stop` (or until this
   * process ends, which closes it): a hold on the host that lasts exactly as long as we do.
   * `ended` resolves with its exit status when it ends for any reason; `onOutput` gets what it prints.
   */
  hold(script: string, onOutput?: (text: string) => void): { ended: Promise<number>; stop: () => void } {
    const remote = asSshUser(this.conn.become, script);
    const child = spawn("ssh", [...this.baseArgs(false), "--", `${this.conn.user}@${this.conn.host}`, remote.command], { stdio: ["pipe", onOutput ? "pipe" : "ignore", "ignore"] });
    child.stdin!.on("error", () => undefined);
    // Through sudo the script goes first on the stdin that stays open (become.ts).
    if (remote.stdin) child.stdin!.write(remote.stdin);
    if (onOutput) child.stdout!.on("data", (d: Buffer) => onOutput(d.toString("utf8")));
    const ended = new Promise<number>((resolve) => {
      child.on("error", () => resolve(255));
      child.on("close", (code) => resolve(code ?? 255));
    });
    return {
      ended,
      stop: () => {
        child.stdin!.end();
        // Its end of input ends the script; the connection closes with it.
        setTimeout(() => child.kill(), 5000).unref();
      },
    };
  }

  /**
   * Starts a script on its own connection that we talk to while it runs: `input` first (as
   * `run` would pass it), then whatever `send` writes, until `end` (or this process ending)
   * closes its stdin. `onOutput` gets its stdout and stderr as they come; `ended` resolves
   * with all of it and the exit status (255: ssh's own failure, or the session dropped).
   */
  converse(script: string, input: string, onOutput: (text: string) => void): { send: (line: string) => void; end: () => void; ended: Promise<RunResult> } {
    const remote = asSshUser(this.conn.become, script, input);
    const child = spawn("ssh", [...this.baseArgs(false), "--", `${this.conn.user}@${this.conn.host}`, remote.command], { stdio: ["pipe", "pipe", "pipe"] });
    child.stdin.on("error", () => undefined);
    child.stdin.write(remote.stdin);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d;
      onOutput(d.toString("utf8"));
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d;
      onOutput(d.toString("utf8"));
    });
    const ended = new Promise<RunResult>((resolve) => {
      child.on("error", (e) => resolve({ code: 255, stdout, stderr: `${stderr}cannot run ssh: ${e.message}\n` }));
      child.on("close", (code) => resolve({ code: code ?? 255, stdout, stderr }));
    });
    return {
      send: (line) => {
        if (child.stdin.writable) child.stdin.write(`${line}\n`);
      },
      end: () => child.stdin.end(),
      ended,
    };
  }

  /** Like run, but a non-zero exit is an error that says what failed. */
  async check(script: string, what: string, opts: { timeoutMs?: number; input?: string } = {}): Promise<string> {
    const r = await this.run(script, opts);
    if (r.code !== 0) throw new Error(`${what} failed on ${this.conn.host} (exit ${r.code}): ${(r.stderr || r.stdout).trim()}`);
    return r.stdout;
  }

  /**
   * Forwards a local loopback port to `remoteHost:remotePort` as seen from the host (the
   * server usually listens on the host's own loopback), on a dedicated connection.
   */
  async forward(remoteHost: string, remotePort: number): Promise<{ localPort: number; close: () => void }> {
    const localPort = await freeLocalPort();
    const child = spawn("ssh", [...this.baseArgs(false), "-N", "-o", "ExitOnForwardFailure=yes", "-L", `127.0.0.1:${localPort}:${remoteHost}:${remotePort}`, "--", `${this.conn.user}@${this.conn.host}`], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const deadline = monotonicMs() + 15_000;
    while (!(await canConnect(localPort))) {
      if (child.exitCode !== null || monotonicMs() > deadline) {
        child.kill();
        throw new Error(`could not forward a local port to ${remoteHost}:${remotePort} on ${this.conn.host}: ${stderr.trim() || "timed out"}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return { localPort, close: () => child.kill() };
  }

  close(): void {
    spawn("ssh", ["-o", `ControlPath=${path.join(this.agent.dir, CONTROL_SOCKET)}`, "-O", "exit", HOST_ALIAS], { stdio: "ignore" }).on("close", () => this.agent.close());
  }
}

function freeLocalPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
  });
}

/** The SSH user cannot run the host steps as root (sudo refuses, or it is not root and host.become is unset): nothing ran. */
export class NoRootAccess extends Error {}

/** ssh got no connection through (refused, timed out, no route): the host is down or cut off, not another host nor a refused key. */
export class Unreachable extends Error {}

/** Pure: whether ssh's failure (exit 255) says no connection got through to the host at all. */
export function noConnection(stderr: string): boolean {
  return /Connection refused|Connection timed out|Operation timed out|No route to host|Network is unreachable/i.test(stderr);
}

/** Opens, runs fn, always closes. */
export async function withSsh<T>(conn: Connection, fn: (ssh: Ssh) => Promise<T>): Promise<T> {
  const ssh = await Ssh.open(conn);
  try {
    return await fn(ssh);
  } finally {
    ssh.close();
  }
}

/**
 * Pure: why ssh (exit 255) got nowhere, cause first, then the fix, then ssh's own words (issue
 * 63): a refused, timed-out or unroutable connection and a name that does not resolve each say
 * which setting to check; anything else names every setting a connection needs.
 */
export function unreachableMessage(conn: Pick<Connection, "host" | "port" | "user">, r: Pick<RunResult, "code" | "stderr">): string {
  const said = r.stderr.trim();
  const target = `${conn.host.includes(":") ? `[${conn.host}]` : conn.host}:${conn.port}`;
  const ssh = said ? ` (ssh: ${said.replace(/^ssh: /, "")})` : "";
  const cause = (what: string, fix: string) => `cannot reach ${target} over SSH: ${what}. ${fix}${ssh}`;
  if (/Connection refused/i.test(said)) return cause(`connection refused (nothing accepts connections on port ${conn.port} of ${conn.host})`, "Check host.address and host.port, and that sshd runs on the host.");
  if (/Could not resolve hostname|Name or service not known|Temporary failure in name resolution|nodename nor servname/i.test(said)) return cause(`the name ${conn.host} does not resolve`, "Check host.address.");
  if (/Connection timed out|Operation timed out/i.test(said)) return cause("the connection timed out (nothing answered)", "Check host.address and host.port, that the host is up, and that no firewall drops the port.");
  if (/No route to host|Network is unreachable/i.test(said)) return cause("no route to the host", "Check host.address, and that the host is up and on a network this machine reaches.");
  return `cannot reach ${conn.user}@${target} over SSH (exit ${r.code}): ${said || "no output"}. Check host.address, host.port, host.user and the private key.`;
}

/** Pure: whether ssh's own failure (exit 255) is one of getting through (refused, reset, timed out), not of who the host or we are. */
export function transientSshFailure(stderr: string): boolean {
  if (/Host key verification failed|REMOTE HOST IDENTIFICATION|Permission denied|Too many authentication failures/i.test(stderr)) return false;
  return /Connection refused|Connection reset|Connection closed|Connection timed out|timed out during banner exchange|kex_exchange_identification|Broken pipe|No route to host/i.test(stderr);
}
