// What SGLang does with GPU memory at start-up, as a pure function of what the GPUs
// show, so that its three failure wordings come from the same situations as on a real
// host (sgl-project/sglang python/sglang/srt/model_executor/model_runner.py and the
// memory pool set-up, model_runner_kv_cache_mixin.py / pool_configurator.py in newer
// trees):
// - init_torch_distributed: each rank compares the minimum free memory across ranks with
//   its own; less than 0.9x its own is "unbalanced". A RuntimeError while
//   SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is true (main's default), else a warning (the
//   release's default; see ./lines.ts). The rank with the most free memory raises first;
// - the weights are loaded next: more than a GPU has free is torch's own
//   `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`;
// - the KV cache gets what is left above (1 - mem_fraction_static) of the memory that
//   was available before the load; nothing left is
//   `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.`
import type { GpuUsage } from "../gpu";

export interface MemoryPlanInput {
  /** What nvidia-smi shows for each rank's GPU before the load. */
  ranks: GpuUsage[];
  weightsPerRankMiB: number;
  memFractionStatic: number;
  tpSize: number;
  /** SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK: the imbalance is an error, not a warning. */
  strictBalance: boolean;
}

export type MemoryPlan =
  | { kind: "ok"; perRankMiB: number; kvCacheMiB: number; warnings: string[] }
  /** `rank`: the one rank (index into `ranks`) that fails; every rank fails where it is absent. */
  | { kind: "fail"; stage: "balance" | "weights" | "kv-cache"; error: string; warnings: string[]; rank?: number };

const gib = (mib: number) => (mib / 1024).toFixed(2);

export function planMemory(p: MemoryPlanInput): MemoryPlan {
  const free = p.ranks.map((r) => r.totalMiB - r.usedMiB);
  // Every rank checks; the one with the most free memory is the first to see the gap.
  const local = Math.max(...free);
  const minFree = Math.min(...free);
  const warnings: string[] = [];
  if (p.tpSize > 1 && minFree < local * 0.9) {
    const detail = `The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=${gib(minFree)}, local_gpu_memory=${gib(local)}, local_gpu_memory * 0.9=${gib(local * 0.9)}`;
    if (p.strictBalance) return { kind: "fail", stage: "balance", error: `RuntimeError: ${detail}`, warnings };
    warnings.push(detail);
  }
  const shortRank = p.ranks.findIndex((_, i) => free[i] < p.weightsPerRankMiB);
  const short = p.ranks[shortRank];
  if (short) {
    const f = short.totalMiB - short.usedMiB;
    return {
      kind: "fail",
      stage: "weights",
      error: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ${gib(p.weightsPerRankMiB - f + 512)} GiB. GPU ${short.index} has a total capacity of ${gib(short.totalMiB)} GiB of which ${gib(Math.max(0, f))} GiB is free. Of the allocated memory ${gib(short.usedMiB)} GiB is allocated by other processes.`,
      warnings,
      rank: shortRank,
    };
  }
  const kvCacheMiB = minFree - p.weightsPerRankMiB - minFree * (1 - p.memFractionStatic);
  if (kvCacheMiB <= 0) {
    return { kind: "fail", stage: "kv-cache", error: `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=${p.memFractionStatic}`, warnings };
  }
  return { kind: "ok", perRankMiB: Math.floor(p.weightsPerRankMiB + kvCacheMiB), kvCacheMiB, warnings };
}
