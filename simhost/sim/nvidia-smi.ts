// Simulated nvidia-smi: the query forms tools use, plus the plain table. Column headers
// are nvidia-smi's own, which are not always the query names: `used_memory` is
// printed as `used_gpu_memory [MiB]`.
import { GpuStore } from "./gpu";
import { readFaults } from "./faults";

const QUERY_GPU_FIELDS: Record<string, (u: { index: number; usedMiB: number; totalMiB: number }, name: string) => string | number> = {
  index: (u) => u.index,
  name: (_u, name) => name,
  "memory.used": (u) => u.usedMiB,
  "memory.total": (u) => u.totalMiB,
  "memory.free": (u) => u.totalMiB - u.usedMiB,
};

const QUERY_APP_FIELDS: Record<string, (a: { pid: number; name: string; usedMiB: number; gpu: number }) => string | number> = {
  pid: (a) => a.pid,
  process_name: (a) => a.name,
  used_memory: (a) => a.usedMiB,
  gpu_index: (a) => a.gpu,
};

function fail(msg: string): never {
  process.stdout.write(`${msg}\n`);
  process.exit(2);
}

/** A wedged driver (fault hangNvidiaSmi): no output, no exit, until the fault is cleared. */
async function whileHung(): Promise<void> {
  while (readFaults().hangNvidiaSmi) await new Promise((r) => setTimeout(r, 200));
}

function main(argv: string[]): void {
  const store = new GpuStore();
  const config = store.config();
  const usage = store.usage(readFaults().gpuReleaseDelaySeconds * 1000);
  const opt = (name: string) => argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
  const format = opt("--format") ?? "csv";
  const noheader = format.includes("noheader");
  const nounits = format.includes("nounits");
  const unit = (field: string) => (nounits ? "" : field.startsWith("memory") || field === "used_memory" ? " MiB" : "");
  const HEADER_NAMES: Record<string, string> = { used_memory: "used_gpu_memory" };
  const header = (fields: string[]) => fields.map((f) => `${HEADER_NAMES[f] ?? f}${nounits || !unit(f) ? "" : " [MiB]"}`).join(", ");

  const gpuQuery = opt("--query-gpu");
  if (gpuQuery) {
    const fields = gpuQuery.split(",").map((f) => f.trim());
    for (const f of fields) if (!QUERY_GPU_FIELDS[f]) fail(`Field "${f}" is not a valid field to query.`);
    if (!noheader) console.log(header(fields));
    for (const u of usage) console.log(fields.map((f) => `${QUERY_GPU_FIELDS[f](u, config.name)}${unit(f)}`).join(", "));
    return;
  }
  const appQuery = opt("--query-compute-apps");
  if (appQuery) {
    const fields = appQuery.split(",").map((f) => f.trim());
    for (const f of fields) if (!QUERY_APP_FIELDS[f]) fail(`Field "${f}" is not a valid field to query.`);
    if (!noheader) console.log(header(fields));
    for (const a of store.computeApps()) console.log(fields.map((f) => `${QUERY_APP_FIELDS[f](a)}${unit(f)}`).join(", "));
    return;
  }
  if (argv.length > 0) fail(`Invalid combination of input arguments: ${argv.join(" ")}. Please run 'nvidia-smi -h' for help.`);
  const line = "+-----------------------------------------------------------------------------------------+";
  console.log(new Date().toString());
  console.log(line);
  console.log("| NVIDIA-SMI 580.65.06 (simulated)     Driver Version: 580.65.06      CUDA Version: 13.0     |");
  console.log(line);
  for (const u of usage) {
    const mem = `${u.usedMiB}MiB / ${u.totalMiB}MiB`;
    console.log(`| ${String(u.index).padEnd(3)} ${config.name.slice(0, 40).padEnd(40)} | ${mem.padStart(22)} |              |`);
  }
  console.log(line);
  console.log("| Processes:                                                                              |");
  const apps = store.computeApps();
  if (apps.length === 0) console.log("|  No running processes found                                                             |");
  for (const a of apps) console.log(`|  ${String(a.gpu).padEnd(4)} ${String(a.pid).padStart(8)}  C   ${a.name.padEnd(40)} ${`${a.usedMiB}MiB`.padStart(12)}     |`);
  console.log(line);
}

void whileHung().then(() => main(process.argv.slice(2)));
