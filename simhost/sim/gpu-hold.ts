// A simulated CUDA process that is not SGLang (a notebook, another team's job): holds MiB on
// each listed GPU until it is killed, as nvidia-smi then shows it. Usage inside a host:
//   node /opt/dflash-sim/gpu-hold.js GPU_LIST MIB     e.g. 0,1,2,3 80000
import { GpuStore } from "./gpu";

function main(argv: string[]): void {
  const [list, mibText] = argv;
  const gpus = (list ?? "").split(",").filter(Boolean).map(Number);
  const mib = Number(mibText);
  if (gpus.length === 0 || gpus.some((g) => !Number.isInteger(g) || g < 0) || !Number.isFinite(mib) || mib <= 0) {
    process.stderr.write("usage: gpu-hold GPU_LIST MIB (e.g. 0,1,2,3 80000)\n");
    process.exit(2);
  }
  const short = new GpuStore().allocate(process.pid, "python3", gpus, mib, 0);
  if (short) {
    process.stderr.write(`CUDA out of memory on GPU ${short.index} (${short.usedMiB} of ${short.totalMiB} MiB used)\n`);
    process.exit(1);
  }
  process.stdout.write(`holding ${mib} MiB on GPUs ${gpus.join(",")} (pid ${process.pid})\n`);
  setInterval(() => undefined, 1 << 30);
}

main(process.argv.slice(2));
