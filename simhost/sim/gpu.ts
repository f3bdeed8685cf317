// GPU simulator: per-process allocations kept as files on the simulated host, so
// every process (the SGLang simulator, nvidia-smi) sees the same devices. They live in
// /run (a tmpfs, empty after every boot) because a driver keeps them in memory: a reboot,
// clean or a power cut, frees every GPU, as on a real host.
//
// What users hit on real hosts and what this models: the memory of a process that
// exits is released by the driver only some time later. A process that allocates in
// that window fails with CUDA out-of-memory.
import * as fs from "node:fs";
import * as path from "node:path";

export interface GpuConfig {
  /** Number of GPUs. */
  count: number;
  /** Memory per GPU in MiB. */
  memoryMiB: number;
  /** Product name shown by nvidia-smi. */
  name: string;
}

export const DEFAULT_GPU_CONFIG: GpuConfig = { count: 8, memoryMiB: 97887, name: "NVIDIA RTX PRO 6000 Blackwell (simulated)" };

export interface Allocation {
  pid: number;
  /** /proc/<pid>/stat start time, so a reused PID is not mistaken for the owner. */
  startTicks: number;
  processName: string;
  /** MiB per GPU index. */
  perGpuMiB: Record<number, number>;
  /** When the owner was seen gone (ms since epoch); memory is freed releaseDelay later. */
  exitedAt?: number;
}

export interface GpuUsage {
  index: number;
  usedMiB: number;
  totalMiB: number;
}

/** Pure: memory in use per GPU at `now`, given allocations and the release delay. */
export function usageAt(config: GpuConfig, allocations: Allocation[], now: number, releaseDelayMs: number): GpuUsage[] {
  const used = new Array<number>(config.count).fill(0);
  for (const a of allocations) {
    if (a.exitedAt !== undefined && now >= a.exitedAt + releaseDelayMs) continue;
    for (const [idx, mib] of Object.entries(a.perGpuMiB)) {
      const i = Number(idx);
      if (i >= 0 && i < config.count) used[i] += mib;
    }
  }
  return used.map((u, index) => ({ index, usedMiB: Math.min(u, config.memoryMiB), totalMiB: config.memoryMiB }));
}

/** Pure: the first GPU among `gpus` that cannot fit `mib` more, or undefined when all fit. */
export function firstShortGpu(usage: GpuUsage[], gpus: number[], mib: number): GpuUsage | undefined {
  return gpus.map((g) => usage[g]).find((u) => u === undefined || u.totalMiB - u.usedMiB < mib);
}

export function processStartTicks(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 22 (starttime), counted after the parenthesised command name.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(rest[19]);
  } catch {
    return undefined;
  }
}

export function isAlive(a: Allocation): boolean {
  return processStartTicks(a.pid) === a.startTicks;
}

/** File-backed GPU state of one simulated host. */
export class GpuStore {
  constructor(
    readonly dir: string = process.env.GPU_SIM_DIR ?? "/run/gpu-sim",
    readonly configFile: string = process.env.GPU_SIM_CONFIG ?? "/etc/dflash-sim/gpus.json",
  ) {}

  config(): GpuConfig {
    try {
      return { ...DEFAULT_GPU_CONFIG, ...JSON.parse(fs.readFileSync(this.configFile, "utf8")) };
    } catch {
      return DEFAULT_GPU_CONFIG;
    }
  }

  private procsDir(): string {
    return path.join(this.dir, "procs");
  }

  /** Reads every allocation, stamping `exitedAt` on owners seen gone for the first time. */
  allocations(now = Date.now()): Allocation[] {
    let names: string[] = [];
    try {
      names = fs.readdirSync(this.procsDir()).filter((n) => n.endsWith(".json"));
    } catch {
      return [];
    }
    const out: Allocation[] = [];
    for (const n of names) {
      const file = path.join(this.procsDir(), n);
      let a: Allocation;
      try {
        a = JSON.parse(fs.readFileSync(file, "utf8"));
      } catch {
        continue;
      }
      if (a.exitedAt === undefined && !isAlive(a)) {
        a.exitedAt = now;
        writeAtomic(file, JSON.stringify(a));
      }
      out.push(a);
    }
    return out;
  }

  usage(releaseDelayMs: number, now = Date.now()): GpuUsage[] {
    const allocations = this.allocations(now);
    for (const a of allocations) {
      if (a.exitedAt !== undefined && now >= a.exitedAt + releaseDelayMs) {
        fs.rmSync(path.join(this.procsDir(), `${a.pid}.json`), { force: true });
      }
    }
    return usageAt(this.config(), allocations, now, releaseDelayMs);
  }

  /** Live processes and what they hold, for --query-compute-apps. */
  computeApps(): { pid: number; name: string; usedMiB: number; gpu: number }[] {
    const rows: { pid: number; name: string; usedMiB: number; gpu: number }[] = [];
    for (const a of this.allocations()) {
      if (a.exitedAt !== undefined) continue;
      for (const [gpu, mib] of Object.entries(a.perGpuMiB)) rows.push({ pid: a.pid, name: a.processName, usedMiB: mib, gpu: Number(gpu) });
    }
    return rows.sort((x, y) => x.gpu - y.gpu || x.pid - y.pid);
  }

  /**
   * Allocates for `pid` what `plan` decides from the current usage, or returns the
   * plan's failure. A directory lock keeps two starting processes from both taking the
   * last memory.
   */
  reserve<F>(pid: number, processName: string, releaseDelayMs: number, plan: (usage: GpuUsage[]) => { perGpuMiB: Record<number, number> } | { failure: F }): F | undefined {
    fs.mkdirSync(this.procsDir(), { recursive: true });
    return withLock(path.join(this.dir, "lock"), () => {
      const decided = plan(this.usage(releaseDelayMs));
      if ("failure" in decided) return decided.failure;
      const a: Allocation = { pid, startTicks: processStartTicks(pid) ?? 0, processName, perGpuMiB: decided.perGpuMiB };
      writeAtomic(path.join(this.procsDir(), `${pid}.json`), JSON.stringify(a));
      return undefined;
    });
  }

  /** Allocates `mib` on each of `gpus` for `pid`, or returns the GPU that is short. */
  allocate(pid: number, processName: string, gpus: number[], mib: number, releaseDelayMs: number): GpuUsage | undefined {
    return this.reserve(pid, processName, releaseDelayMs, (usage) => {
      const failure = firstShortGpu(usage, gpus, mib);
      return failure ? { failure } : { perGpuMiB: Object.fromEntries(gpus.map((g) => [g, mib])) };
    });
  }

  /** Marks the allocation of `pid` as exited now (its memory frees after the delay). */
  markExited(pid: number, now = Date.now()): void {
    const file = path.join(this.procsDir(), `${pid}.json`);
    try {
      const a: Allocation = JSON.parse(fs.readFileSync(file, "utf8"));
      if (a.exitedAt === undefined) writeAtomic(file, JSON.stringify({ ...a, exitedAt: now }));
    } catch {
      // nothing allocated
    }
  }
}

export function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

function withLock<T>(lockDir: string, fn: () => T): T {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      // A lock older than the deadline was left by a crashed holder.
      try {
        if (Date.now() - fs.statSync(lockDir).mtimeMs > 10_000) fs.rmdirSync(lockDir);
      } catch {
        // raced with its owner: try again
      }
      if (Date.now() > deadline) throw new Error(`GPU simulator lock ${lockDir} held for over 10 s`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmdirSync(lockDir);
  }
}

/**
 * The GPUs a process sees, as nvidia-smi numbers them: CUDA_VISIBLE_DEVICES's indices in its
 * order, up to the first that is not a GPU of the host (CUDA stops there), or every GPU when
 * unset. (CUDA also takes GPU UUIDs; the simulated GPUs have none.)
 */
export function visibleGpus(env: string | undefined, count: number): number[] {
  if (env === undefined) return Array.from({ length: count }, (_, i) => i);
  const out: number[] = [];
  for (const part of env.split(",")) {
    const n = Number(part.trim());
    if (!/^[0-9]+$/.test(part.trim()) || n >= count || out.includes(n)) break;
    out.push(n);
  }
  return out;
}
