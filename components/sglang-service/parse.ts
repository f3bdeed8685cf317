// Pure parsers of what hosts print: `systemctl show`, nvidia-smi CSV, Prometheus text,
// `ss -ltnp`, and the cause of a failed start in a journal.

/** `systemctl show -p A -p B UNIT` -> { A: "...", B: "..." }. */
export function parseSystemctlShow(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}

export interface UnitState {
  activeState: string;
  subState: string;
  mainPid: number;
  nRestarts: number;
  execMainStatus: number;
  /** Microseconds since epoch when the unit last entered "activating"/"active", 0 if never. */
  execMainStartTimestampMonotonic: number;
  loadState: string;
}

export function unitState(show: Record<string, string>): UnitState {
  const n = (k: string) => Number(show[k] ?? 0) || 0;
  return {
    activeState: show.ActiveState ?? "unknown",
    subState: show.SubState ?? "unknown",
    mainPid: n("MainPID"),
    nRestarts: n("NRestarts"),
    execMainStatus: n("ExecMainStatus"),
    execMainStartTimestampMonotonic: n("ExecMainStartTimestampMonotonic"),
    loadState: show.LoadState ?? "unknown",
  };
}

export interface GpuMemory {
  index: number;
  usedMiB: number;
  totalMiB: number;
}

/** `nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaSmiGpus(text: string): GpuMemory[] {
  const rows: GpuMemory[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const cells = line.split(",").map((c) => c.trim());
    const [index, used, total] = cells.map(Number);
    if (cells.length < 3 || cells.slice(0, 3).some((c) => c === "") || ![index, used, total].every(Number.isFinite)) {
      throw new Error(`unexpected nvidia-smi output line: ${JSON.stringify(line)}`);
    }
    rows.push({ index, usedMiB: used, totalMiB: total });
  }
  return rows;
}

/** GPUs among `gpus` still using more than `maxUsedMiB`. */
export function busyGpus(rows: GpuMemory[], gpus: number[], maxUsedMiB: number): GpuMemory[] {
  return rows.filter((r) => gpus.includes(r.index) && r.usedMiB > maxUsedMiB);
}

/** Prometheus text exposition -> metric name -> sum over its label sets. */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\d+)?$/.exec(line);
    if (!m) continue;
    const value = Number(m[3] === "+Inf" ? Infinity : m[3] === "-Inf" ? -Infinity : m[3]);
    if (Number.isNaN(value)) continue;
    out.set(m[1], (out.get(m[1]) ?? 0) + value);
  }
  return out;
}

/** `ss -ltnpH` lines -> PIDs listening on `port`. */
export function listenerPids(ssOutput: string, port: number): number[] {
  const pids = new Set<number>();
  for (const line of ssOutput.split("\n")) {
    const cols = line.trim().split(/\s+/);
    const local = cols[3] ?? "";
    if (!local.endsWith(`:${port}`)) continue;
    for (const m of line.matchAll(/pid=(\d+)/g)) pids.add(Number(m[1]));
  }
  return [...pids].sort((a, b) => a - b);
}

/** Splits output made of `@@section NAME` markers into named parts. */
export function splitSections(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let name = "";
  let acc: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^@@section (\S+)$/.exec(line);
    if (m) {
      if (name) out[name] = acc.join("\n");
      name = m[1];
      acc = [];
    } else {
      acc.push(line);
    }
  }
  if (name) out[name] = acc.join("\n");
  return out;
}

/** The most telling line of a failed start, in words a user acts on. */
export function failureCause(journal: string): string | undefined {
  // Accept both `journalctl -o cat` and the default short format ("Nov 29 08:31:11 host python3[123]: ...").
  const lines = journal.split("\n").map((l) => l.replace(/^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:]+(\[\d+\])?: /, "").trim()).filter(Boolean);
  const find = (re: RegExp) => {
    for (let i = lines.length - 1; i >= 0; i--) {
      const m = re.exec(lines[i]);
      if (m) return m;
    }
    return undefined;
  };
  const oom = find(/CUDA out of memory.*?GPU (\d+)/);
  if (oom) return `CUDA out of memory on GPU ${oom[1]} (${oom.input.replace(/^.*?CUDA out of memory\.\s*/, "")})`;
  const unrecognized = find(/error: unrecognized arguments: (.*)$/);
  if (unrecognized) return `the installed SGLang does not accept: ${unrecognized[1]}`;
  const argError = find(/launch_server\.py: error: (.*)$/);
  if (argError) return `SGLang rejected its arguments: ${argError[1]}`;
  const exc = find(/^([A-Za-z_.]*(Error|Exception)): (.*)$/);
  if (exc) return exc[0];
  const gpuWait = find(/GPU memory still in use after .*$/);
  if (gpuWait) return gpuWait[0];
  const gate = find(/^(\S+) not ready after (\d+)s/);
  if (gate) return `the unit's readiness gate gave up: ${gate[1]} not ready after ${gate[2]} s`;
  return undefined;
}
