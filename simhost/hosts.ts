// Lifecycle of simulated GPU hosts: real Debian containers (systemd-nspawn --boot) with
// real systemd, journald and OpenSSH, each on its own loopback address 127.0.0.N, with
// the GPU and SGLang simulators from build/sim mounted in. See
// /work/shared/docs/test-hosts.md for why each step is done the way it is.
//
// State is global to the machine (loopback addresses are), under /run/dflash-simhost:
//   <name>/            one host: owner.json, host.json, nspawn.pid, console.log, client key,
//                      known_hosts, and the overlay (upper/, work/, root/ = merged tree)
//   addresses/<addr>/  one claimed address; its `owner` file names the host
//
// A host belongs to the process that started it (owner.json: its PID and start time), so
// that a host whose program was killed without a chance to stop it (SIGKILL) is found and
// stopped by the next program that looks (reclaimOrphans). A host started on purpose to
// outlive its command (`npm run simhost -- start`) is "kept": only `stop` removes it.
import { execFileSync, spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { parseFaults } from "./sim/faults";

/** The repository root (simhost/ lives directly under it). */
const REPO_ROOT = path.resolve(__dirname, "..");

/** The host's one host key: sshd is configured with it alone (10-simhost.conf). */
const HOST_KEY = "/etc/ssh/ssh_host_ed25519_key";

export const STATE_ROOT = "/run/dflash-simhost";
const ADDRESSES_DIR = path.join(STATE_ROOT, "addresses");
const SSH_PORT = 22;
/** On a host where root may not log in (StartOptions.sudoers): the one port where it may, for the harness's own access (ssh()). */
const ROOT_PORT = 2201;
/** The plain user of the rootfs (rootfs.sh), who logs in where root may not. */
const PLAIN_USER = "deploy";
const SGLANG_PORT = 30000;
const FIRST_HOST_OCTET = 10;
const LAST_HOST_OCTET = 250;
const CGROUP_HIERARCHIES = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"];
const STOP_DEADLINE_MS = 20_000;
const POLL_MS = 100;

export interface ModelSpec {
  /** Absolute path of the model directory inside the host. */
  path: string;
  /** Size the simulator pretends the weights have (drives load time and GPU memory). */
  sizeGiB: number;
}

export interface StartOptions {
  /** GPUs the simulated nvidia-smi reports. Defaults to 8. */
  gpus?: number;
  /** Memory per simulated GPU in MiB. Defaults to 97887 (an H200 as nvidia-smi reports it). */
  gpuMemoryMiB?: number;
  /** Passed through to /etc/dflash-sim/sglang.json for the SGLang simulator. Defaults to {}. */
  sglang?: Record<string, unknown>;
  /** Fake model trees. Defaults to DEFAULT_MODELS (Kimi-K2.6 target and its DFlash draft). */
  models?: ModelSpec[];
  /** How long the boot may take until systemd reports `running`. Defaults to 60 s. */
  bootTimeoutMs?: number;
  /** Compiled simulators to mount at /opt/dflash-sim. Defaults to <repo>/build/sim. */
  simDir?: string;
  /** Progress while waiting for the boot (phase, elapsed). Defaults to silence. */
  onProgress?: (message: string) => void;
  /**
   * Keep the host after this process ends: it is recorded as kept, with no owning process,
   * and only `stop` removes it (what `npm run simhost -- start` does). Defaults to false:
   * the host belongs to this process, and once the process is gone without stopping it,
   * `reclaimOrphans()` stops it.
   */
  keep?: boolean;
  /**
   * The boot never finishes: a unit that multi-user.target waits for never ends, so systemd
   * stays `starting` (sshd does start) and start() waits until its boot deadline. For tests of
   * what happens to a host stopped in the middle of its boot. Defaults to false.
   */
  holdBoot?: boolean;
  /**
   * Root may not log in over SSH (sshd `PermitRootLogin no`): the host is reached as the user
   * `deploy`, whose sudo rights are this text (/etc/sudoers.d/deploy, e.g.
   * "deploy ALL=(root) NOPASSWD: ALL"), and HostInfo says `become: "sudo"`. The harness's own
   * root access (ssh(): faults, checks) goes to ROOT_PORT, the only port where root may log in.
   * Defaults to none: root logs in.
   */
  sudoers?: string;
  /**
   * The host's own locale (/etc/locale.conf for systemd and its services, /etc/default/locale
   * for SSH sessions, through PAM), one the host image has generated: LOCALES. Defaults to none
   * (C). A host whose locale writes 1,5 for 1.5 (de_DE) or whose [a-z] has no i (tr_TR).
   */
  locale?: (typeof LOCALES)[number];
}

/** The locales the host image has generated (simhost/rootfs.sh host_locales), besides C and C.UTF-8. */
export const LOCALES = ["de_DE.UTF-8", "tr_TR.UTF-8"] as const;

/** What a start gets for the options it is not given. */
export const START_DEFAULTS = { gpus: 8, gpuMemoryMiB: 97887, bootTimeoutMs: 60_000 } as const;

export const DEFAULT_MODELS: ModelSpec[] = [
  { path: "/models/Kimi-K2.6", sizeGiB: 590 },
  { path: "/models/Kimi-K2.6-DFlash", sizeGiB: 6 },
];

export interface HostInfo {
  name: string;
  address: string;
  port: number;
  /** Who deploys: root, or `deploy` where root may not log in (then through sudo: `become`). */
  user: "root" | "deploy";
  become?: "sudo";
  /** Where root logs in for the harness (ssh()) when it may not on `port`; absent: `port`. */
  rootPort?: number;
  privateKeyPath: string;
  /** The host's ed25519 public key line, `ssh-ed25519 AAAA...`. */
  hostKey: string;
  sglangPort: number;
  gpus: number;
  gpuMemoryMiB: number;
  stateDir: string;
  /** `127.0.0.N ssh-ed25519 AAAA...`, for StrictHostKeyChecking=yes. */
  knownHostsPath: string;
}

/**
 * Who a host belongs to (`<state>/owner.json`). A process is named by its PID and its start
 * time in clock ticks after boot (field 22 of /proc/PID/stat): a later process that gets the
 * same PID started later, so it is never taken for the owner.
 */
export type HostOwner = { kind: "process"; pid: number; startTicks: number; command: string } | { kind: "kept" };

export interface HostStatus {
  name: string;
  address: string | null;
  /** The host's systemd-nspawn. */
  pid: number | null;
  alive: boolean;
  /**
   * The process the host belongs to and whether it still runs; "kept" for a host started
   * to outlive its command; null for a host without a record (still starting, or started
   * by a version of this project that kept none), which reclaimOrphans leaves alone.
   */
  owner: { pid: number; command: string; running: boolean } | "kept" | null;
}

export interface ReclaimOutcome {
  /** Hosts stopped because their owner is gone. */
  reclaimed: { name: string; ownerPid: number; command: string }[];
  /** Hosts whose owner is gone but that could not be stopped, with the reason. */
  failed: { name: string; error: string }[];
}

// ---------------------------------------------------------------------------------
// Pure parts: names, listeners, and the files a host gets before it boots.

/**
 * Pure: the simulator's build profile for the project's `sglangBuild` (Pulumi.yaml's text), so
 * that `simhost start` boots the SGLang build the stacks are written for; undefined where the
 * build is a flag map of another build (the simulator has the two builds only).
 */
export function projectBuildProfile(pulumiYaml: string): "upstream" | "ddtree-fork" | undefined {
  const build = (YAML.parse(pulumiYaml) as { config?: Record<string, unknown> } | null)?.config?.["dflash-sglang:sglangBuild"];
  const value = typeof build === "object" && build !== null && "value" in build ? (build as { value: unknown }).value : build;
  return value === "upstream" || value === "ddtree-fork" ? value : undefined;
}

/** Pure: a host name doubles as machine name, hostname and cgroup dir, so keep it plain. */
export function validateHostName(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(name)) {
    throw new Error(`invalid host name ${JSON.stringify(name)}: use 1-63 lower-case letters, digits and '-', starting with a letter or digit`);
  }
  if (name === path.basename(ADDRESSES_DIR)) throw new Error(`host name "${name}" is reserved`);
  return name;
}

export interface Listeners {
  /** 127.0.0.N addresses with something on port 22 or 30000. */
  busyAddresses: Set<string>;
  /** Ports 22/30000 taken on every address (0.0.0.0, [::], *): no host can be started. */
  wildcardPorts: number[];
}

/** Pure: reads `ss -ltnH` output for the ports every simulated host needs. */
export function parseListeners(ssOutput: string): Listeners {
  const wanted = new Set([SSH_PORT, SGLANG_PORT]);
  const busyAddresses = new Set<string>();
  const wildcardPorts = new Set<number>();
  for (const line of ssOutput.split("\n")) {
    const local = line.trim().split(/\s+/)[3];
    if (!local) continue;
    const colon = local.lastIndexOf(":");
    const host = local.slice(0, colon).replace(/%.*$/, "");
    const port = Number(local.slice(colon + 1));
    if (!wanted.has(port)) continue;
    if (host === "0.0.0.0" || host === "*" || host === "[::]") wildcardPorts.add(port);
    else busyAddresses.add(host);
  }
  return { busyAddresses, wildcardPorts: [...wildcardPorts].sort((a, b) => a - b) };
}

/** What start learns from the rootfs (the shell looks, the renderer decides). */
export interface RootfsFacts {
  /** e.g. "python3.11", from /usr/bin/python3's link. */
  python: string;
  /** Unit files shipped in /lib/systemd/system. */
  units: Set<string>;
  /** Units already linked in /etc/systemd/system/multi-user.target.wants. */
  multiUserWants: Set<string>;
}

export type HostEntry =
  | { kind: "dir"; path: string; mode: number }
  | { kind: "file"; path: string; mode: number; content: string }
  | { kind: "symlink"; path: string; target: string };

export interface HostTreeParams {
  name: string;
  address: string;
  machineId: string;
  clientPublicKey: string;
  gpus: number;
  gpuMemoryMiB: number;
  sglang: Record<string, unknown>;
  models: ModelSpec[];
  facts: RootfsFacts;
  holdBoot?: boolean;
  /** StartOptions.sudoers. */
  sudoers?: string;
  /** StartOptions.locale. */
  locale?: string;
}

/** The unit that keeps a host's boot from finishing (StartOptions.holdBoot). */
const HOLD_BOOT_UNIT = "simhost-hold-boot.service";

// Boot waits for nothing that cannot happen in a container on host networking, and no
// housekeeping job (apt, fstrim, e2scrub on the machine's own disk) runs mid-benchmark.
const UNITS_TO_MASK = [
  "systemd-networkd-wait-online.service",
  "e2scrub_reap.service",
  "e2scrub_all.timer",
  "fstrim.timer",
  "apt-daily.timer",
  "apt-daily-upgrade.timer",
  "dpkg-db-backup.timer",
];

/** Pure: JSON with sorted object keys, so the same config always gives the same bytes. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** Pure: the state letter and start time (clock ticks after boot) in a /proc/PID/stat line. */
export function parseProcStat(stat: string): { state: string; startTicks: number } {
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).trim().split(/\s+/);
  const startTicks = Number(fields[19]);
  if (!fields[0] || !Number.isInteger(startTicks)) throw new Error(`not a /proc/PID/stat line: ${JSON.stringify(stat.slice(0, 80))}`);
  return { state: fields[0], startTicks };
}

/**
 * Pure: whether a host's owner has ended, given what /proc says of the owner's PID now (null:
 * no such process). A zombie has ended; a process with another start time is someone else.
 */
export function ownerIsGone(owner: HostOwner, now: { state: string; startTicks: number } | null): boolean {
  switch (owner.kind) {
    case "kept":
      return false;
    case "process":
      return now === null || now.state === "Z" || now.startTicks !== owner.startTicks;
    default: {
      const never: never = owner;
      throw new Error(`unknown host owner ${JSON.stringify(never)}`);
    }
  }
}

function validateModel(model: ModelSpec): void {
  const p = model.path;
  if (typeof p !== "string" || !p.startsWith("/") || p.split("/").includes("..") || /[\0-\x1f]/.test(p)) {
    throw new Error(`model path ${JSON.stringify(p)} must be an absolute path without '..' or control characters`);
  }
  if (typeof model.sizeGiB !== "number" || !Number.isFinite(model.sizeGiB) || model.sizeGiB <= 0) {
    throw new Error(`model ${p}: sizeGiB must be a positive number, got ${JSON.stringify(model.sizeGiB)}`);
  }
}

/** Pure: every directory, file and unit link a host gets in its overlay before boot. */
export function renderHostTree(p: HostTreeParams): HostEntry[] {
  const file = (filePath: string, content: string, mode = 0o644): HostEntry => ({ kind: "file", path: filePath, mode, content });
  const sitePackages = `/usr/local/lib/${p.facts.python}/dist-packages`;
  const entries: HostEntry[] = [
    file("/etc/machine-id", `${p.machineId}\n`, 0o444),
    file("/etc/hostname", `${p.name}\n`),
    // The name resolves locally: a DNS lookup of its own name would stall programs.
    file("/etc/hosts", `127.0.0.1\tlocalhost\n${p.address}\t${p.name}\n`),
    { kind: "dir", path: "/root/.ssh", mode: 0o700 },
    file("/root/.ssh/authorized_keys", `${p.clientPublicKey.trim()}\n`, 0o600),
    file("/etc/ssh/sshd_config.d/10-simhost.conf", [`ListenAddress ${p.address}`, `HostKey ${HOST_KEY}`, ...(p.sudoers === undefined ? ["PermitRootLogin prohibit-password"] : [`ListenAddress ${p.address}:${ROOT_PORT}`, "PermitRootLogin no"]), "PasswordAuthentication no", "UseDNS no", ""].join("\n")),
    file("/usr/local/bin/nvidia-smi", '#!/bin/sh\nexec /usr/local/bin/node /opt/dflash-sim/nvidia-smi.js "$@"\n', 0o755),
    file(`${sitePackages}/sglang/__init__.py`, ""),
    // execv keeps the PID, so systemd's MainPID is the simulator itself.
    file(
      `${sitePackages}/sglang/launch_server.py`,
      'import os, sys\nos.execv("/usr/local/bin/node", ["node", "/opt/dflash-sim/sglang/launch_server.js"] + sys.argv[1:])\n',
    ),
    file("/etc/dflash-sim/gpus.json", `${stableJson({ count: p.gpus, memoryMiB: p.gpuMemoryMiB })}\n`),
    file("/etc/dflash-sim/sglang.json", `${stableJson(p.sglang)}\n`),
    file("/etc/dflash-sim/faults.json", "{}\n"),
    // The simulated GPUs' state, open to every user as /dev/nvidia* are on a GPU host: a
    // server that runs as another user than root (service.runAs) takes GPU memory too.
    file("/etc/tmpfiles.d/dflash-sim.conf", "d /run/gpu-sim 0777 root root -\nd /run/gpu-sim/procs 0777 root root -\nd /var/lib/dflash-sim/launches 0777 root root -\n"),
  ];
  if (p.locale !== undefined) {
    if (!(LOCALES as readonly string[]).includes(p.locale)) throw new Error(`locale ${JSON.stringify(p.locale)} is not one the host image has; use one of ${LOCALES.join(", ")}`);
    entries.push(file("/etc/locale.conf", `LANG=${p.locale}\n`), file("/etc/default/locale", `LANG=${p.locale}\n`));
  }
  if (p.sudoers !== undefined) {
    entries.push(
      // sshd reads the keys as the user: root-owned and readable (StrictModes accepts root's).
      { kind: "dir", path: `/home/${PLAIN_USER}/.ssh`, mode: 0o755 },
      file(`/home/${PLAIN_USER}/.ssh/authorized_keys`, `${p.clientPublicKey.trim()}\n`, 0o644),
      file(`/etc/sudoers.d/${PLAIN_USER}`, p.sudoers.endsWith("\n") ? p.sudoers : `${p.sudoers}\n`, 0o440),
      // Last of the drop-ins, and a Match block ends at the end of its file: root logs in on
      // ROOT_PORT only (the harness), never where the tool connects.
      file("/etc/ssh/sshd_config.d/99-simhost-root-port.conf", [`Match LocalPort ${ROOT_PORT}`, "\tPermitRootLogin prohibit-password", ""].join("\n")),
    );
  }
  for (const model of p.models) {
    validateModel(model);
    entries.push(file(path.posix.join(model.path, "config.json"), `${stableJson({ sim_size_gib: model.sizeGiB })}\n`));
  }
  if (!p.facts.multiUserWants.has("ssh.service")) {
    entries.push({ kind: "symlink", path: "/etc/systemd/system/multi-user.target.wants/ssh.service", target: "/lib/systemd/system/ssh.service" });
  }
  for (const unit of UNITS_TO_MASK) {
    if (p.facts.units.has(unit)) entries.push({ kind: "symlink", path: `/etc/systemd/system/${unit}`, target: "/dev/null" });
  }
  if (p.holdBoot) {
    // A oneshot has no start timeout by default: the job, and so the boot, stays unfinished.
    entries.push(
      file(
        `/etc/systemd/system/${HOLD_BOOT_UNIT}`,
        ["[Unit]", "Description=Holds the boot unfinished (simhost holdBoot)", "Before=multi-user.target", "", "[Service]", "Type=oneshot", "ExecStart=/bin/sleep infinity", ""].join("\n"),
      ),
      { kind: "symlink", path: `/etc/systemd/system/multi-user.target.wants/${HOLD_BOOT_UNIT}`, target: `/etc/systemd/system/${HOLD_BOOT_UNIT}` },
    );
  }
  return entries;
}

// ---------------------------------------------------------------------------------
// Shell: processes, mounts, cgroups.

const stateDirOf = (name: string) => path.join(STATE_ROOT, name);
const mergedDirOf = (name: string) => path.join(stateDirOf(name), "root");
const cgroupDirsOf = (name: string) => CGROUP_HIERARCHIES.map((h) => path.join(h, `nspawn-${name}`));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function run(file: string, args: string[]): string {
  return execFileSync(file, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function hasCommand(command: string): boolean {
  try {
    run("sh", ["-c", 'command -v "$1"', "sh", command]);
    return true;
  } catch {
    return false;
  }
}

/** The console is colored for a terminal; an error message is not one. */
function lastLines(file: string, count: number): string {
  try {
    const text = fs.readFileSync(file, "utf8").replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");
    return text.trimEnd().split("\n").slice(-count).join("\n");
  } catch {
    return "(no console output)";
  }
}

function writeFileAtomic(file: string, content: string, mode = 0o644): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, content, { mode });
  fs.renameSync(tmp, file);
}

function procStat(pid: number): { state: string; startTicks: number } | null {
  try {
    return parseProcStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return null;
  }
}

/** A zombie has exited; only its parent's wait is missing. */
function isAlive(pid: number): boolean {
  const state = procStat(pid)?.state;
  return state !== undefined && state !== "Z";
}

/** Signals a process that may have ended meanwhile (another stop of the same host). */
function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
  }
}

/** Only ever signal the systemd-nspawn we started for this host, never a reused PID. */
function isOurNspawn(pid: number, name: string): boolean {
  try {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return path.basename(argv[0]) === "systemd-nspawn" && argv.includes(`--machine=${name}`) && isAlive(pid);
  } catch {
    return false;
  }
}

function readPid(name: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(stateDirOf(name), "nspawn.pid"), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

const ownerFileOf = (name: string) => path.join(stateDirOf(name), "owner.json");

/** This process, as a host's owner. */
function thisProcess(): HostOwner {
  const self = procStat(process.pid);
  if (!self) throw new Error(`cannot read /proc/${process.pid}/stat: simulated hosts need Linux's /proc`);
  const command = process.argv
    .slice(1)
    .map((arg, i) => (i === 0 ? path.relative(REPO_ROOT, arg) || arg : arg))
    .join(" ");
  return { kind: "process", pid: process.pid, startTicks: self.startTicks, command: command.length > 200 ? `${command.slice(0, 199)}…` : command };
}

function readOwner(name: string): HostOwner | null {
  try {
    const owner = JSON.parse(fs.readFileSync(ownerFileOf(name), "utf8")) as HostOwner;
    if (owner.kind === "kept") return owner;
    if (owner.kind === "process" && Number.isInteger(owner.pid) && Number.isInteger(owner.startTicks)) return owner;
    return null;
  } catch {
    return null;
  }
}

function isMounted(dir: string): boolean {
  const lines = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n");
  return lines.some((line) => line.split(" ")[4] === dir);
}

function assertPreconditions(simDir: string): string {
  if (process.getuid?.() !== 0) throw new Error("simulated hosts need root (mounts, cgroups, systemd-nspawn): this needs root: run as root");
  if (!hasCommand("systemd-nspawn")) throw new Error("systemd-nspawn not found: apt-get install systemd-container");
  for (const entry of ["nvidia-smi.js", "sglang/launch_server.js"]) {
    if (!fs.existsSync(path.join(simDir, entry))) {
      throw new Error(`simulators not built: ${path.join(simDir, entry)} is missing; run npx tsc -p simhost/sim/tsconfig.json`);
    }
  }
  try {
    return execFileSync(path.join(REPO_ROOT, "simhost/rootfs.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
  } catch (e) {
    throw new Error(`could not build or find the host rootfs with simhost/rootfs.sh (see its output above): ${(e as Error).message}`);
  }
}

/** The state dir is the lock on the name: mkdir either creates it or the name is taken. */
function claimStateDir(name: string): string {
  const dir = stateDirOf(name);
  fs.mkdirSync(STATE_ROOT, { recursive: true });
  try {
    fs.mkdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    const pid = readPid(name);
    const how = pid !== null && isOurNspawn(pid, name) ? `is already running (systemd-nspawn pid ${pid})` : "has state left over (starting, or a crashed run)";
    throw new Error(`host ${name} ${how} in ${dir}: stop it first with npm run simhost -- stop ${name}`);
  }
  return dir;
}

function claimAddress(name: string): string {
  const { busyAddresses, wildcardPorts } = parseListeners(run("ss", ["-ltnH"]));
  if (wildcardPorts.length > 0) {
    throw new Error(`port ${wildcardPorts.join(" and ")} is taken on all addresses (ss -ltn); simulated hosts need ${SSH_PORT} and ${SGLANG_PORT} on their own 127.0.0.N`);
  }
  fs.mkdirSync(ADDRESSES_DIR, { recursive: true });
  for (let octet = FIRST_HOST_OCTET; octet <= LAST_HOST_OCTET; octet++) {
    const address = `127.0.0.${octet}`;
    if (busyAddresses.has(address)) continue;
    try {
      fs.mkdirSync(path.join(ADDRESSES_DIR, address));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw e;
    }
    fs.writeFileSync(path.join(ADDRESSES_DIR, address, "owner"), `${name}\n`);
    return address;
  }
  throw new Error(`no free loopback address in 127.0.0.${FIRST_HOST_OCTET}-${LAST_HOST_OCTET}: see ${ADDRESSES_DIR} and stop hosts with npm run simhost -- stop --all`);
}

function addressesOwnedBy(name: string): string[] {
  if (!fs.existsSync(ADDRESSES_DIR)) return [];
  return fs.readdirSync(ADDRESSES_DIR).filter((address) => {
    try {
      return fs.readFileSync(path.join(ADDRESSES_DIR, address, "owner"), "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

function mountOverlay(rootfs: string, stateDir: string): string {
  const [upper, work, merged] = ["upper", "work", "root"].map((d) => path.join(stateDir, d));
  for (const dir of [upper, work, merged]) fs.mkdirSync(dir);
  run("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${rootfs},upperdir=${upper},workdir=${work}`, merged]);
  return merged;
}

function inspectRootfs(rootfs: string): RootfsFacts {
  const python = path.basename(fs.readlinkSync(path.join(rootfs, "usr/bin/python3")));
  if (!/^python3\.\d+$/.test(python)) throw new Error(`unexpected python in the rootfs: /usr/bin/python3 -> ${python}`);
  const wantsDir = path.join(rootfs, "etc/systemd/system/multi-user.target.wants");
  return {
    python,
    units: new Set(fs.readdirSync(path.join(rootfs, "lib/systemd/system"))),
    multiUserWants: new Set(fs.existsSync(wantsDir) ? fs.readdirSync(wantsDir) : []),
  };
}

function makeClientKey(stateDir: string, name: string): { privateKeyPath: string; publicKey: string } {
  const privateKeyPath = path.join(stateDir, "id_ed25519");
  run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `simhost-${name}`, "-f", privateKeyPath]);
  return { privateKeyPath, publicKey: fs.readFileSync(`${privateKeyPath}.pub`, "utf8") };
}

function writeHostTree(merged: string, entries: HostEntry[]): void {
  for (const entry of entries) {
    const target = path.join(merged, entry.path);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    switch (entry.kind) {
      case "dir":
        fs.mkdirSync(target, { recursive: true });
        fs.chmodSync(target, entry.mode);
        break;
      case "file":
        fs.rmSync(target, { force: true });
        fs.writeFileSync(target, entry.content, { mode: entry.mode });
        fs.chmodSync(target, entry.mode);
        break;
      case "symlink":
        fs.rmSync(target, { force: true });
        fs.symlinkSync(entry.target, target);
        break;
      default: {
        const never: never = entry;
        throw new Error(`unhandled host entry ${JSON.stringify(never)}`);
      }
    }
  }
}

/**
 * A fresh ed25519 host key for this host; returns its public key line. Only that type:
 * `ssh-keygen -A` also made an RSA 3072 key, about 0.5 s of CPU per host start, for a key the
 * tools here never pin.
 */
function makeHostKeys(merged: string): string {
  const file = path.join(merged, HOST_KEY);
  fs.rmSync(file, { force: true });
  fs.rmSync(`${file}.pub`, { force: true });
  run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", file]);
  const [type, key] = fs.readFileSync(`${file}.pub`, "utf8").trim().split(/\s+/);
  return `${type} ${key}`;
}

/**
 * Starts systemd-nspawn detached (own session, stdin /dev/null, console to console.log),
 * first moving the launching shell into the host's own cgroups: hosts sharing one cgroup
 * confuse each other's systemd. Arguments travel as argv, never through shell text.
 */
function bootContainer(name: string, merged: string, simDir: string, stateDir: string): number {
  const script = [
    "set -e",
    'name=$1 merged=$2 node=$3 sim=$4; shift 4',
    'for cg in "$@"; do mkdir -p "$cg"; echo $$ > "$cg/cgroup.procs"; done',
    'exec systemd-nspawn --boot --directory="$merged" --machine="$name" --register=no --keep-unit --console=read-only ' +
      '--bind-ro="$node":/usr/local/bin/node --bind-ro="$sim":/opt/dflash-sim',
  ].join("\n");
  const console = fs.openSync(path.join(stateDir, "console.log"), "a");
  try {
    const child = spawn("bash", ["-c", script, "bash", name, merged, fs.realpathSync(process.execPath), simDir, ...cgroupDirsOf(name)], {
      detached: true,
      stdio: ["ignore", console, console],
    });
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start systemd-nspawn for ${name}`);
    fs.writeFileSync(path.join(stateDir, "nspawn.pid"), `${child.pid}\n`);
    return child.pid;
  } finally {
    fs.closeSync(console);
  }
}

export interface SshResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface SshOptions {
  /** Kills ssh after this long; the result then has code 124. Defaults to 30 s. */
  timeoutMs?: number;
  /** Written to the remote command's stdin. Defaults to nothing (stdin closed). */
  input?: string;
  /** Known-hosts file to verify the host against. Defaults to the host's own. */
  knownHostsPath?: string;
}

/** Runs `command` on the host as root with the system ssh, pinned to the host's key and identity. */
export function ssh(host: HostInfo, command: string, opts: SshOptions = {}): Promise<SshResult> {
  const args = [
    "-F", "none",
    "-o", "BatchMode=yes",
    "-o", "IdentitiesOnly=yes",
    "-o", "StrictHostKeyChecking=yes",
    "-o", `UserKnownHostsFile=${opts.knownHostsPath ?? host.knownHostsPath}`,
    "-o", "GlobalKnownHostsFile=/dev/null",
    "-o", "ConnectTimeout=5",
    "-o", "LogLevel=ERROR",
    "-i", host.privateKeyPath,
    "-p", String(host.rootPort ?? host.port),
    `root@${host.address}`,
    "--",
    command,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("ssh", args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs ?? 30_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (timedOut) resolve({ code: 124, stdout, stderr: `${stderr}ssh to ${host.name}: timed out after ${opts.timeoutMs ?? 30_000} ms\n` });
      else resolve({ code: code ?? 255, stdout, stderr });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.input ?? "");
  });
}

/**
 * Makes sshd also listen on `port` of the host's address ("another name of the same
 * machine"), and waits (at most 10 s) until it does.
 */
export async function addSshPort(host: HostInfo, port: number): Promise<void> {
  // sshd's own reload (-t, then SIGHUP), not `systemctl reload ssh`: with the host's locale
  // tr_TR taken up by systemd (a daemon-reload after /etc/locale.conf changed: the campaign's
  // locale kind), ssh.service's ExecReload (`kill -HUP $MAINPID`) failed, printing kill's usage
  // (seed 6060, seq. 88 and 96).
  const r = await ssh(host, `echo 'ListenAddress ${host.address}:${port}' > /etc/ssh/sshd_config.d/20-port-${port}.conf && LC_ALL=C /usr/sbin/sshd -t && LC_ALL=C /bin/kill -HUP "$(systemctl show -p MainPID --value ssh)" || { s=$?; journalctl -u ssh -n 12 --no-pager -o short-monotonic >&2; exit $s; }`);
  if (r.code !== 0) throw new Error(`cannot add SSH port ${port} on ${host.name}: ${r.stderr.trim()}`);
  const deadline = Date.now() + 10_000;
  while ((await ssh(host, `ss -ltn | grep -q '${host.address}:${port} '`)).code !== 0) {
    if (Date.now() > deadline) throw new Error(`sshd on ${host.name} does not listen on ${host.address}:${port} 10 s after its reload`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/**
 * A fault: kills (SIGKILL) every SSH session into the host but the one this runs in, as when
 * a network path or a bastion dies mid-command. Returns how many sessions were killed.
 */
export async function dropSessions(host: HostInfo): Promise<number> {
  const r = await ssh(host, "echo $$; ps -eo pid=,ppid=,args=");
  if (r.code !== 0) throw new Error(`cannot list the sessions on ${host.name}: ${r.stderr.trim()}`);
  const [self, ...lines] = r.stdout.trim().split("\n");
  const procs = lines.map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)).filter((m): m is RegExpExecArray => m !== null).map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[3] }));
  const own = procs.find((p) => p.pid === Number(self))?.ppid;
  const sessions = procs.filter((p) => /^sshd(-session)?: \S+@/.test(p.args) && p.pid !== own).map((p) => p.pid);
  if (sessions.length > 0) await ssh(host, `kill -KILL ${sessions.join(" ")}`);
  return sessions.length;
}

/**
 * A fault: the host cannot be reached over SSH for `seconds` (a network blip, sshd restarting),
 * while everything else on it runs on: sshd stops (a transient timer starts it again), and
 * every SSH session but this one is killed, as when the path to the host drops. Returns once
 * the outage has begun (sshd no longer accepts).
 */
export async function sshOutage(host: HostInfo, seconds: number): Promise<void> {
  const script = [
    // AccuracySec: a timer may fire up to its accuracy (1 min by default) late.
    `systemd-run --quiet --collect --unit=dflash-sim-ssh-back-$$ --on-active=${Math.max(1, Math.round(seconds))} --timer-property=AccuracySec=100ms systemctl start ssh.service`,
    "systemctl stop ssh.service",
    // This session's sshd is our shell's parent; the others are cut.
    'ps -eo pid=,args= | while read -r pid args; do case "$args" in "sshd: "*@*|"sshd-session: "*@*) [ "$pid" != "$PPID" ] && kill -KILL "$pid";; esac; done',
    "true",
  ].join("\n");
  const r = await ssh(host, script);
  if (r.code !== 0) throw new Error(`cannot start an SSH outage on ${host.name}: ${r.stderr.trim()}`);
}

/**
 * One poll loop with a deadline: sshd accepts, then systemd finishes booting to `running`.
 * `degradedIsBooted`: a boot that ends with a failed unit is a booted host too (after a
 * reboot, a unit installed on the host may fail to start; that is the host's state to judge,
 * not a failed boot of the simulation).
 */
async function waitUntilRunning(host: HostInfo, pid: number, timeoutMs: number, onProgress: (m: string) => void, degradedIsBooted = false): Promise<void> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const consoleLog = path.join(host.stateDir, "console.log");
  const tail = () => `last lines of ${consoleLog}:\n${lastLines(consoleLog, 15)}`;
  let lastSeen = "no answer yet";
  let phase = "";
  for (;;) {
    if (!isAlive(pid)) throw new Error(`host ${host.name}: systemd-nspawn exited during boot; ${tail()}`);
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      throw new Error(`host ${host.name} did not finish booting within ${timeoutMs / 1000} s (last: ${lastSeen}); ${tail()}`);
    }
    const result = await ssh(host, "systemctl is-system-running --wait", { timeoutMs: remaining });
    const state = result.stdout.trim();
    if (state === "running" || (state === "degraded" && degradedIsBooted)) return;
    if (state === "degraded") {
      // The host is removed after a failed start, so its journal goes into the error now.
      const failed = await ssh(
        host,
        'units=$(systemctl --failed --no-legend --plain | cut -d" " -f1); echo "$units"; ' +
          'for u in $units; do echo "--- journalctl -u $u"; journalctl --no-pager -n 5 -u "$u"; done',
        { timeoutMs: 10_000 },
      );
      throw new Error(`host ${host.name} booted degraded; failed units:\n${failed.stdout.trim() || failed.stderr.trim()}`);
    }
    lastSeen = state ? `systemd is ${state}` : `ssh: ${result.stderr.trim().split("\n").pop() || `exit ${result.code}`}`;
    const nextPhase = state ? "waiting for systemd" : "waiting for sshd";
    if (nextPhase !== phase) {
      phase = nextPhase;
      onProgress(`${host.name}: ${phase} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    }
    // Anything but a finished boot (refused connection, systemd "stopping", ...) is retried until the deadline.
    await sleep(POLL_MS);
  }
}

/** Boots a simulated host and returns how to reach it. On any failure, nothing is left behind. */
export async function start(name: string, opts: StartOptions = {}): Promise<HostInfo> {
  validateHostName(name);
  const simDir = path.resolve(opts.simDir ?? path.join(REPO_ROOT, "build/sim"));
  const rootfs = assertPreconditions(simDir);
  const stateDir = claimStateDir(name);
  try {
    // First, so that a start cut short by SIGKILL leaves a host its next reclaim recognizes.
    fs.writeFileSync(ownerFileOf(name), `${stableJson(opts.keep ? { kind: "kept" } : thisProcess())}\n`);
    const address = claimAddress(name);
    const merged = mountOverlay(rootfs, stateDir);
    const clientKey = makeClientKey(stateDir, name);
    const hostKey = makeHostKeys(merged);
    const gpus = opts.gpus ?? START_DEFAULTS.gpus;
    const gpuMemoryMiB = opts.gpuMemoryMiB ?? START_DEFAULTS.gpuMemoryMiB;
    writeHostTree(
      merged,
      renderHostTree({
        name,
        address,
        machineId: crypto.randomBytes(16).toString("hex"),
        clientPublicKey: clientKey.publicKey,
        gpus,
        gpuMemoryMiB,
        sglang: opts.sglang ?? {},
        models: opts.models ?? DEFAULT_MODELS,
        facts: inspectRootfs(rootfs),
        holdBoot: opts.holdBoot,
        sudoers: opts.sudoers,
        locale: opts.locale,
      }),
    );
    const knownHostsPath = path.join(stateDir, "known_hosts");
    fs.writeFileSync(knownHostsPath, `${address} ${hostKey}\n`);
    const host: HostInfo = {
      name,
      address,
      port: SSH_PORT,
      ...(opts.sudoers === undefined ? { user: "root" as const } : { user: PLAIN_USER, become: "sudo" as const, rootPort: ROOT_PORT }),
      privateKeyPath: clientKey.privateKeyPath,
      hostKey,
      sglangPort: SGLANG_PORT,
      gpus,
      gpuMemoryMiB,
      stateDir,
      knownHostsPath,
    };
    fs.writeFileSync(path.join(stateDir, "host.json"), `${JSON.stringify(host)}\n`);
    const pid = bootContainer(name, merged, simDir, stateDir);
    await waitUntilRunning(host, pid, opts.bootTimeoutMs ?? START_DEFAULTS.bootTimeoutMs, opts.onProgress ?? (() => undefined));
    return host;
  } catch (e) {
    try {
      await stop(name);
    } catch (cleanup) {
      (e as Error).message += `\n(cleanup after the failed start also failed: ${(cleanup as Error).message})`;
    }
    throw e;
  }
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(POLL_MS);
  }
  return true;
}

async function unmount(dir: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (isMounted(dir)) {
    try {
      run("umount", [dir]);
    } catch (e) {
      // Another stop of the same host (a reclaim in another process) may have unmounted it.
      if (!isMounted(dir)) return;
      const stderr = String((e as { stderr?: string }).stderr ?? "");
      if (!/busy/i.test(stderr) || Date.now() > deadline) throw new Error(`could not unmount ${dir}: ${stderr.trim() || (e as Error).message}`);
      await sleep(POLL_MS);
    }
  }
}

/** Every process in a cgroup and the cgroups below it. */
function cgroupProcesses(dir: string): number[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw e;
  }
  const own = fs.existsSync(path.join(dir, "cgroup.procs")) ? fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number) : [];
  return [...own, ...entries.filter((e) => e.isDirectory()).flatMap((e) => cgroupProcesses(path.join(dir, e.name)))];
}

/**
 * SIGKILLs what is left in the host's cgroups once its systemd-nspawn is gone (a container
 * init outlives a killed nspawn), and waits until they have exited. The cgroups are the host's
 * own (nspawn-NAME), so nothing else is in them.
 */
async function killLeftovers(name: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const left = [...new Set(cgroupDirsOf(name).flatMap(cgroupProcesses))].filter(isAlive);
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`host ${name}: processes ${left.join(", ")} survived SIGKILL`);
    for (const pid of left) signalIfAlive(pid, "SIGKILL");
    await sleep(POLL_MS);
  }
}

/** cgroup dirs go with rmdir only, children first; the container's systemd leaves its slices. */
async function removeCgroup(dir: string): Promise<void> {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  for (const entry of entries) {
    if (entry.isDirectory()) await removeCgroup(path.join(dir, entry.name));
  }
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      fs.rmdirSync(dir);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return;
      if (code !== "EBUSY" || Date.now() > deadline) {
        const procs = fs.existsSync(path.join(dir, "cgroup.procs")) ? fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").trim() : "";
        throw new Error(`could not remove cgroup ${dir} (${code}); processes still in it: ${procs || "none"}`);
      }
      await sleep(POLL_MS);
    }
  }
}

const stopsInProgress = new Map<string, Promise<void>>();

/**
 * Stops a host and removes everything it had: process, mount, cgroups, address, state.
 * Idempotent; a second stop of a host this process is stopping waits for the first, and a
 * stop in another process at the same time (a reclaim) is tolerated.
 */
export async function stop(name: string): Promise<void> {
  validateHostName(name);
  let stopping = stopsInProgress.get(name);
  if (!stopping) {
    const rebooting = rebootsInProgress.get(name);
    stopping = (rebooting ? rebooting.then(() => undefined, () => undefined) : Promise.resolve())
      .then(() => stopHost(name)).finally(() => stopsInProgress.delete(name));
    stopsInProgress.set(name, stopping);
  }
  return stopping;
}

async function stopHost(name: string): Promise<void> {
  const pid = readPid(name);
  if (pid !== null && isOurNspawn(pid, name)) {
    // The host is thrown away: its power is cut (every process of its cgroups killed at once),
    // not shut down in order. An orderly shutdown first drained each simulated SGLang server
    // (up to SGLang's 5 s watchdog period) and stopped every unit, for a disk deleted next.
    // reboot({ kind: "clean" }) is the orderly shutdown.
    await cutPower(name);
    if (!(await waitForExit(pid, STOP_DEADLINE_MS))) {
      if (isOurNspawn(pid, name)) signalIfAlive(pid, "SIGKILL");
      if (!(await waitForExit(pid, 5_000))) throw new Error(`host ${name}: systemd-nspawn pid ${pid} survived SIGKILL`);
    }
  }
  // systemd-nspawn killed before it could pass the stop on (a signal early in the boot, when
  // it has not yet set up its handlers, or the SIGKILL above) leaves the container's systemd
  // running, adopted by PID 1: whatever is still in the host's cgroups is stopped now.
  await killLeftovers(name);
  const merged = mergedDirOf(name);
  await unmount(merged);
  for (const dir of cgroupDirsOf(name)) await removeCgroup(dir);
  for (const address of addressesOwnedBy(name)) fs.rmSync(path.join(ADDRESSES_DIR, address), { recursive: true, force: true });
  // Never recurse into a tree that is still an overlay: the check above must have held.
  if (isMounted(merged)) throw new Error(`${merged} is still mounted; not removing ${stateDirOf(name)}`);
  fs.rmSync(stateDirOf(name), { recursive: true, force: true });
}

/** How a host reboots: its own orderly shutdown, or the power cut at once. */
export const REBOOT_KINDS = ["clean", "power-cut"] as const;
export type RebootKind = (typeof REBOOT_KINDS)[number];

export interface RebootOptions {
  /**
   * "clean": the host's own orderly shutdown (systemd stops every unit, in order, with their
   * stop timeouts; EXIT hooks run), then a boot. "power-cut": every process of the host is
   * SIGKILLed at once (no unit stops, no hook runs), then a boot.
   */
  kind: RebootKind;
  /** How long the boot may take until systemd reports `running`. Defaults to 60 s. */
  bootTimeoutMs?: number;
  /** How long a clean shutdown may take (the units' own stop timeouts bound it). Defaults to 180 s. */
  shutdownTimeoutMs?: number;
  /** Progress while shutting down and booting (phase, elapsed). Defaults to silence. */
  onProgress?: (message: string) => void;
}

const REBOOT_SHUTDOWN_DEADLINE_MS = 180_000;
/** Reboots under way in this process: a stop waits for them (a boot half-done is no host to stop). */
const rebootsInProgress = new Map<string, Promise<unknown>>();

/** The simulators' folder a running host's systemd-nspawn mounts (its own argv says), so that a reboot mounts the same. */
function mountedSimDir(pid: number): string {
  const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  const bind = argv.find((a) => a.startsWith("--bind-ro=") && a.endsWith(":/opt/dflash-sim"));
  if (!bind) throw new Error(`systemd-nspawn pid ${pid} mounts no simulators at /opt/dflash-sim`);
  return bind.slice("--bind-ro=".length, -":/opt/dflash-sim".length);
}

/**
 * A power cut: every process of the host SIGKILLed at once. cgroup.kill (unified hierarchy,
 * Linux 5.14+) kills the whole cgroup tree in one write, so no unit sees another die first;
 * without it, every process is signalled in one pass.
 */
async function cutPower(name: string): Promise<void> {
  const killFile = path.join(CGROUP_HIERARCHIES[1], `nspawn-${name}`, "cgroup.kill");
  if (fs.existsSync(killFile)) fs.writeFileSync(killFile, "1");
  await killLeftovers(name);
}

/**
 * Reboots a running host on its own address, host keys, client key and overlay: what is on
 * disk (/etc, /var/lib, ...) stays; /run is a fresh tmpfs, as every boot's; no process
 * survives, so the GPUs are free (the GPU simulator keeps its allocations in /run, as a driver
 * in memory); units enabled for the boot start by themselves. Returns once sshd answers and
 * systemd has finished booting, as start() does: `running`, or `degraded` where a unit failed
 * to start (what was installed on the host is not the simulation's to judge). See
 * RebootOptions for the two kinds.
 */
export async function reboot(name: string, opts: RebootOptions): Promise<HostInfo> {
  const host = hostInfo(name);
  if (stopsInProgress.has(name) || rebootsInProgress.has(name)) throw new Error(`host ${name} is being stopped or rebooted already`);
  const rebooting = rebootHost(name, host, opts);
  rebootsInProgress.set(name, rebooting);
  try {
    return await rebooting;
  } finally {
    rebootsInProgress.delete(name);
  }
}

async function rebootHost(name: string, host: HostInfo, opts: RebootOptions): Promise<HostInfo> {
  const pid = readPid(name)!;
  const simDir = mountedSimDir(pid);
  const onProgress = opts.onProgress ?? (() => undefined);
  const started = Date.now();
  fs.appendFileSync(path.join(host.stateDir, "console.log"), `\n--- simhost: reboot (${opts.kind}) ---\n`);
  switch (opts.kind) {
    case "clean": {
      // systemd-nspawn passes SIGTERM on to the container's systemd as its shutdown signal.
      onProgress(`${name}: shutting down`);
      signalIfAlive(pid, "SIGTERM");
      const timeoutMs = opts.shutdownTimeoutMs ?? REBOOT_SHUTDOWN_DEADLINE_MS;
      if (!(await waitForExit(pid, timeoutMs))) {
        throw new Error(`host ${name}: the clean shutdown did not finish within ${timeoutMs / 1000} s (systemd-nspawn pid ${pid} still runs); last lines of the console:\n${lastLines(path.join(host.stateDir, "console.log"), 15)}`);
      }
      break;
    }
    case "power-cut":
      onProgress(`${name}: power cut`);
      await cutPower(name);
      break;
    default: {
      const never: never = opts.kind;
      throw new Error(`unknown reboot kind ${JSON.stringify(never)}; valid: ${REBOOT_KINDS.join(", ")}`);
    }
  }
  await killLeftovers(name);
  // The old boot's cgroups go, so that the new systemd starts in empty ones (as start()).
  for (const dir of cgroupDirsOf(name)) await removeCgroup(dir);
  onProgress(`${name}: booting (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  const next = bootContainer(name, mergedDirOf(name), simDir, host.stateDir);
  await waitUntilRunning(host, next, opts.bootTimeoutMs ?? START_DEFAULTS.bootTimeoutMs, onProgress, true);
  return host;
}

function hostNames(): string[] {
  if (!fs.existsSync(STATE_ROOT)) return [];
  return fs
    .readdirSync(STATE_ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== path.basename(ADDRESSES_DIR))
    .map((e) => e.name)
    .sort();
}

/** Stops every host on the machine, then frees addresses whose owner no longer exists. */
export async function stopAll(): Promise<string[]> {
  const names = hostNames();
  for (const name of names) await stop(name);
  if (fs.existsSync(ADDRESSES_DIR)) {
    for (const address of fs.readdirSync(ADDRESSES_DIR)) {
      let owner: string;
      try {
        owner = fs.readFileSync(path.join(ADDRESSES_DIR, address, "owner"), "utf8").trim();
      } catch {
        continue;
      }
      if (!fs.existsSync(stateDirOf(owner))) fs.rmSync(path.join(ADDRESSES_DIR, address), { recursive: true, force: true });
    }
  }
  return names;
}

function addressOf(name: string): string | null {
  try {
    return (JSON.parse(fs.readFileSync(path.join(stateDirOf(name), "host.json"), "utf8")) as HostInfo).address;
  } catch {
    return addressesOwnedBy(name)[0] ?? null;
  }
}

export function status(): HostStatus[] {
  return hostNames().map((name) => {
    const pid = readPid(name);
    const owner = readOwner(name);
    return {
      name,
      address: addressOf(name),
      pid,
      alive: pid !== null && isOurNspawn(pid, name),
      owner: owner?.kind === "process" ? { pid: owner.pid, command: owner.command, running: !ownerIsGone(owner, procStat(owner.pid)) } : (owner?.kind ?? null),
    };
  });
}

/**
 * Stops every host whose owning process is gone (it was killed before it could stop its
 * hosts), saying on `report` (stderr by default) which host and which owner. Kept hosts,
 * hosts whose owner runs, and hosts without an owner record are left alone. A host that
 * cannot be stopped is reported and skipped; the others are still reclaimed.
 */
export async function reclaimOrphans(report: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Promise<ReclaimOutcome> {
  const outcome: ReclaimOutcome = { reclaimed: [], failed: [] };
  for (const name of hostNames()) {
    const owner = readOwner(name);
    if (owner?.kind !== "process" || !ownerIsGone(owner, procStat(owner.pid))) continue;
    const address = addressOf(name);
    report(`simhost: reclaiming host ${name}${address ? ` (${address})` : ""}: its owner, pid ${owner.pid} (${owner.command}), is gone; stopping it`);
    try {
      await stop(name);
      outcome.reclaimed.push({ name, ownerPid: owner.pid, command: owner.command });
    } catch (e) {
      const error = (e as Error).message;
      report(`simhost: could not reclaim host ${name}: ${error}; try npm run simhost -- stop ${name}`);
      outcome.failed.push({ name, error });
    }
  }
  return outcome;
}

/** The HostInfo of a running host, as start returned it. */
export function hostInfo(name: string): HostInfo {
  validateHostName(name);
  const pid = readPid(name);
  if (pid === null || !isOurNspawn(pid, name)) throw new Error(`host ${name} is not running: start it with npm run simhost -- start ${name}`);
  return JSON.parse(fs.readFileSync(path.join(stateDirOf(name), "host.json"), "utf8")) as HostInfo;
}

function parseJsonArgument(what: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON (${(e as Error).message}): ${text}`);
  }
}

function simConfigFile(name: string, file: string): string {
  hostInfo(name);
  return path.join(mergedDirOf(name), "etc/dflash-sim", file);
}

/** Replaces the host's faults (validated: unknown keys are an error); the simulators read them live. */
export function fault(name: string, json: string): void {
  const spec = parseJsonArgument("fault spec", json);
  parseFaults(spec);
  writeFileAtomic(simConfigFile(name, "faults.json"), `${stableJson(spec)}\n`);
}

/** Merges keys into the host's SGLang simulator config and returns the result. */
export function configure(name: string, json: string): Record<string, unknown> {
  const patch = parseJsonArgument("sglang config", json);
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
    throw new Error(`sglang config must be a JSON object, got ${json}`);
  }
  const file = simConfigFile(name, "sglang.json");
  const merged = { ...(JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>), ...patch };
  writeFileAtomic(file, `${stableJson(merged)}\n`);
  return merged;
}

/** Starts a host, runs fn with it, and always stops it. */
export async function withHost<T>(name: string, opts: StartOptions, fn: (host: HostInfo) => Promise<T>): Promise<T> {
  const host = await start(name, opts);
  try {
    return await fn(host);
  } finally {
    await stop(name);
  }
}
