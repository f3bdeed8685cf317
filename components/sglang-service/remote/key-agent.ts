// The stack's private key on the operator's machine: it is held by an ssh-agent this process
// starts for one connection, and never written to a file. A provider process can end without
// cleaning up (the engine ends it, or it is killed: close() never runs), so whatever a
// connection leaves must be harmless or go away by itself:
// - the key goes to the agent on ssh-add's stdin (`ssh-add -`), and ssh signs through the
//   agent's socket (`IdentityAgent`), finding the key by its public half (`-i id.pub`);
// - the agent runs in ssh-agent's command mode, whose agent exits (removing its socket) once
//   the command it started has ended; that command is `cat` on a pipe from this process, which
//   ends when this process does, however it ends (SIGKILL too). Within ssh-agent's own
//   parent check (10 s) no agent of a dead process is left; close() and the exit hook kill
//   it by PID at once;
// - what a killed process leaves is its connection folder (0700: the public key, known_hosts,
//   a dead socket, perhaps a multiplexing master that persists idle): the first connection of
//   the next process here removes it (sweepLeftovers), with the `dflash-ssh-*` folders of
//   earlier versions, which held the key itself in `id`.
// Tried and refused (OpenSSH 9.2): `-i /dev/fd/3` (a pipe, or an O_TMPFILE file that has no
// name) fails with "Identity file /dev/fd/3 not accessible: No such file or directory",
// because ssh closes every inherited descriptor above 2 at start; stdin carries the script.
// A temp file removed on every exit path cannot be removed on SIGKILL: that is the bug.
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** One connection's agent and its 0700 folder, where ssh.ts also puts known_hosts and the control socket. */
export interface KeyAgent {
  dir: string;
  /** The agent's socket, for ssh's `IdentityAgent`. */
  socket: string;
  /** The key's public half, for ssh's `-i` with `IdentitiesOnly=yes`. */
  publicKeyFile: string;
  /** Kills the agent by PID and removes the folder. */
  close(): void;
}

const PREFIX = "dflash-ssh-";
/** `dflash-ssh-<pid>.<start ticks>-XXXXXX`: the owner is in the name, so the folder is never without one. */
const OWNED = /^dflash-ssh-(\d+)\.(\d+)-[A-Za-z0-9]{6}$/;
/** `dflash-ssh-XXXXXX`: an earlier version's folder, with the private key in `id`. */
const EARLIER = /^dflash-ssh-[A-Za-z0-9]{6}$/;
/**
 * An earlier version's folder changed this recently may belong to a run of that version going on
 * now (an upgrade test runs one beside this version). A day: longer than any of its operations.
 */
const EARLIER_GRACE_MS = 24 * 3600 * 1000;
const AGENT_SOCKET = "agent";
const AGENT_PID_FILE = "agent.pid";
/** The multiplexing master's socket (ssh.ts). */
export const CONTROL_SOCKET = "cm";
export const HOST_ALIAS = "dflash-target";
/** ssh-agent's command: ends when this process closes its stdin or ends; it prints the agent's PID first. */
const WATCH_COMMAND = 'echo "$SSH_AGENT_PID"; exec cat >/dev/null';
const STEP_TIMEOUT_MS = 30_000;

const live = new Set<KeyAgent>();
let swept: Promise<void> | undefined;
let exitHooked = false;

/** Starts an agent holding `privateKey`, after removing what dead processes left (once per process). */
export async function openKeyAgent(privateKey: string): Promise<KeyAgent> {
  await (swept ??= sweepLeftovers(os.tmpdir()));
  const self = processIdentity(process.pid);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${PREFIX}${process.pid}.${self?.startTicks ?? 0}-`));
  fs.chmodSync(dir, 0o700);
  const socket = path.join(dir, AGENT_SOCKET);
  const watcher = spawn("ssh-agent", ["-a", socket, "sh", "-c", WATCH_COMMAND], { stdio: ["pipe", "pipe", "pipe"] });
  let agentPid: number | undefined;
  const agent: KeyAgent = {
    dir,
    socket,
    publicKeyFile: path.join(dir, "id.pub"),
    close: () => {
      if (!live.delete(agent)) return;
      // The agent is the watcher's child: while the watcher runs, its PID is not anyone else's.
      if (agentPid !== undefined && watcher.exitCode === null && watcher.signalCode === null) signalIfAlive(agentPid, "SIGTERM");
      watcher.stdin.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  live.add(agent);
  if (!exitHooked) process.once("exit", closeAll);
  exitHooked = true;
  try {
    agentPid = await firstLine(watcher);
    // As the multiplexing master does not, a connection never closed does not keep this
    // process from ending (the exit hook then ends its agent).
    watcher.unref();
    for (const stream of [watcher.stdin, watcher.stdout, watcher.stderr]) (stream as unknown as { unref(): void }).unref();
    fs.writeFileSync(path.join(dir, AGENT_PID_FILE), `${agentPid}\n`, { mode: 0o600 });
    const env = { ...process.env, SSH_AUTH_SOCK: socket, SSH_ASKPASS_REQUIRE: "never" };
    const key = privateKey.endsWith("\n") ? privateKey : `${privateKey}\n`;
    const added = await runTool("ssh-add", ["-q", "-"], env, key);
    if (added.code !== 0) throw new Error(`ssh-add refused the private key (exit ${added.code}): ${added.stderr.trim() || "no output"}. Is it an unencrypted OpenSSH or PEM private key?`);
    const listed = await runTool("ssh-add", ["-L"], env, "");
    if (listed.code !== 0) throw new Error(`ssh-add -L failed (exit ${listed.code}): ${listed.stderr.trim()}`);
    fs.writeFileSync(agent.publicKeyFile, listed.stdout, { mode: 0o600 });
    return agent;
  } catch (e) {
    agent.close();
    throw e;
  }
}

/** At exit, connections never closed: their multiplexing masters told to exit (they would persist idle), their agents ended. */
function closeAll(): void {
  for (const agent of [...live]) {
    const control = path.join(agent.dir, CONTROL_SOCKET);
    if (fs.existsSync(control)) spawnSync("ssh", ["-o", `ControlPath=${control}`, "-O", "exit", HOST_ALIAS], { stdio: "ignore", timeout: 5000 });
    agent.close();
  }
}

/** The agent's PID, which the watch command prints once the agent listens (ssh-agent binds before it forks). */
function firstLine(watcher: ReturnType<typeof spawn>): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    watcher.stderr!.on("data", (d) => (err += d));
    watcher.stdout!.on("data", (d) => {
      out += d;
      const line = /^(\d+)\n/.exec(out);
      if (line) resolve(Number(line[1]));
    });
    watcher.on("error", (e) => reject(new Error(`cannot run ssh-agent: ${e.message} (install the OpenSSH client)`)));
    watcher.on("close", (code) => reject(new Error(`ssh-agent exited (${code}) before it held the key: ${err.trim() || "no output"}`)));
  });
}

function runTool(cmd: string, args: string[], env: NodeJS.ProcessEnv, input: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
    const timer = setTimeout(() => child.kill("SIGKILL"), STEP_TIMEOUT_MS);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${cmd}: ${e.message} (install the OpenSSH client)`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 255, stdout, stderr });
    });
  });
}

/**
 * Removes the connection folders in `tmp` whose owner is gone: this version's (the owner's PID
 * and start time are in the name), after ending its agent and its multiplexing master if they
 * still run, and earlier versions' (`dflash-ssh-XXXXXX`, holding the private key as `id`) that
 * no running process names on its command line (their ssh clients and master all do) and that
 * were not modified for a day (EARLIER_GRACE_MS). Only
 * folders of this user; a folder it cannot judge (no /proc) stays.
 */
export async function sweepLeftovers(tmp: string): Promise<void> {
  let names: string[];
  try {
    names = fs.readdirSync(tmp).filter((n) => n.startsWith(PREFIX));
  } catch {
    return;
  }
  const uid = process.getuid?.();
  let commandLines: string[] | undefined;
  for (const name of names) {
    const dir = path.join(tmp, name);
    const st = fs.lstatSync(dir, { throwIfNoEntry: false });
    if (!st?.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
    const owned = OWNED.exec(name);
    if (owned) {
      if (!ownerIsGone(Number(owned[1]), Number(owned[2]))) continue;
      endLeftAgent(dir);
      await endLeftMaster(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    } else if (EARLIER.test(name)) {
      // An earlier version's run names its folder only while one of its ssh processes runs:
      // between two of them (and before its first) the folder looks unowned. Only one
      // unmodified for EARLIER_GRACE_MS is a killed run's.
      if (Date.now() - st.mtimeMs < EARLIER_GRACE_MS) continue;
      commandLines ??= runningCommandLines();
      if (commandLines === undefined || commandLines.some((line) => line.includes(dir))) continue;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}

/** A process by its PID and its start time (field 22 of /proc/PID/stat); null where /proc has no such process or there is no /proc. */
export function processIdentity(pid: number): { state: string; startTicks: number } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0], startTicks: Number(fields[19]) };
  } catch {
    return null;
  }
}

/** A zombie has ended; a process with another start time is someone else with the same PID. Without /proc: whether the PID exists. */
function ownerIsGone(pid: number, startTicks: number): boolean {
  if (!fs.existsSync("/proc/self/stat")) {
    try {
      process.kill(pid, 0);
      return false;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "ESRCH";
    }
  }
  const now = processIdentity(pid);
  return now === null || now.state === "Z" || now.startTicks !== startTicks;
}

/** The agent a killed owner left, if it still runs (its own parent check has not fired yet): only an ssh-agent bound to this folder's socket. */
function endLeftAgent(dir: string): void {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(dir, AGENT_PID_FILE), "utf8").trim());
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0) return;
  const argv = commandLineOf(pid);
  if (argv && path.basename(argv[0]) === "ssh-agent" && argv.includes(path.join(dir, AGENT_SOCKET))) signalIfAlive(pid, "SIGTERM");
}

/** A multiplexing master persists idle after its owner: told to exit, it closes its connection to the host. */
function endLeftMaster(dir: string): Promise<void> {
  const control = path.join(dir, CONTROL_SOCKET);
  if (!fs.existsSync(control)) return Promise.resolve();
  return new Promise((resolve) => {
    const child = spawn("ssh", ["-o", `ControlPath=${control}`, "-O", "exit", HOST_ALIAS], { stdio: "ignore" });
    const timer = setTimeout(() => child.kill("SIGKILL"), STEP_TIMEOUT_MS);
    child.on("error", () => resolve());
    child.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function commandLineOf(pid: number): string[] | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return undefined;
  }
}

/** Every running process's command line, its arguments joined by spaces; undefined without /proc. */
function runningCommandLines(): string[] | undefined {
  let pids: string[];
  try {
    pids = fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  } catch {
    return undefined;
  }
  return pids.map((p) => commandLineOf(Number(p))?.join(" ") ?? "");
}

function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
  }
}
