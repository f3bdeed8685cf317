// How a scheduler's failure reaches the journal, as text (pure; ./launch_server.ts writes it and
// then SIGKILLs itself). Paths in sgl-project/sglang, python/sglang/:
// - srt/managers/scheduler.py, run_scheduler_process: each TP rank is its own scheduler process;
//   one that hits an exception logs at ERROR `Scheduler hit an exception: ` followed by the
//   traceback (one multi-line record: the `[date time TPn]` prefix on its first line only), then
//   sends SIGQUIT to the main process.
// - srt/managers/tokenizer_manager.py, SignalHandler.running_phase_sigquit_handler (read at
//   v0.5.20's tag; assumed for the other lines, not verified for v0.5.19): the main process logs
//   `SIGQUIT received. signum=None, frame=None. It usually means one child failed.` at ERROR and
//   calls kill_process_tree(include_parent=True): it ends by SIGKILL of itself.
// - A failure every rank meets (its memory check, the KV cache, the CUDA graph capture, a load
//   error) is raised by every rank of the node, rank 0 first. A failure of one rank (a torch OOM
//   on one GPU, an illegal memory access) leaves the others in a collective that NCCL aborts:
//   each prints its own traceback ending in torch.distributed.DistBackendError, and when its
//   process goes, torch's C++ warning that the process group was not destroyed.
// The frames are of the real call paths; their line numbers are illustrative.
import type { LogLevel } from "./logging";

/** One line of the crash's output: a logger record (a rank's or the main process's) or a bare print. */
export interface CrashLine {
  level: LogLevel | "PRINT";
  text: string;
  /** The global TP rank whose scheduler logs it (its `TPn` prefix); none for the main process. */
  rank?: number;
  /** Printed as is, without the logger's `[date time]` prefix. */
  bare?: boolean;
}

/** Where in the scheduler a failure is raised. */
export type CrashStage = "balance" | "weights" | "kv-cache" | "cuda-graph" | "load-error" | "serving";

type Frame = [file: string, line: number, fn: string, code: string];

const SITE = "/usr/local/lib/python3.12/dist-packages";

/** The scheduler's construction, down to its ModelRunner (every load-time failure passes here). */
const INIT: Frame[] = [
  ["sglang/srt/managers/scheduler.py", 3012, "run_scheduler_process", "scheduler = Scheduler("],
  ["sglang/srt/managers/scheduler.py", 389, "__init__", "self.init_model_worker()"],
  ["sglang/srt/managers/scheduler.py", 578, "init_model_worker", "self.init_tp_model_worker()"],
  ["sglang/srt/managers/scheduler.py", 541, "init_tp_model_worker", "self.tp_worker = TpModelWorker("],
  ["sglang/srt/managers/tp_worker.py", 247, "__init__", "self._init_model_runner()"],
  ["sglang/srt/managers/tp_worker.py", 330, "_init_model_runner", "self._model_runner = ModelRunner("],
];
const INITIALIZE: Frame = ["sglang/srt/model_executor/model_runner.py", 402, "__init__", "self.initialize(pre_model_load_memory)"];
const LOAD_MODEL: Frame[] = [
  INITIALIZE,
  ["sglang/srt/model_executor/model_runner.py", 488, "initialize", "self.load_model()"],
  ["sglang/srt/model_executor/model_runner.py", 1010, "load_model", "self.model = get_model("],
  ["sglang/srt/model_loader/__init__.py", 28, "get_model", "return loader.load_model("],
];
/** The serving loop of a ready scheduler. */
const EVENT_LOOP: Frame[] = [
  ["sglang/srt/managers/scheduler.py", 3035, "run_scheduler_process", "scheduler.event_loop_overlap()"],
  ["torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"],
];

const FRAMES: Record<CrashStage, Frame[]> = {
  balance: [
    ...INIT,
    ["sglang/srt/model_executor/model_runner.py", 398, "__init__", "pre_model_load_memory = self.init_torch_distributed()"],
    ["sglang/srt/model_executor/model_runner.py", 871, "init_torch_distributed", "raise RuntimeError("],
  ],
  weights: [
    ...INIT,
    ...LOAD_MODEL,
    ["sglang/srt/model_loader/loader.py", 640, "load_model", "model = _initialize_model("],
    ["sglang/srt/model_loader/loader.py", 262, "_initialize_model", "return model_class("],
    ["sglang/srt/models/deepseek_v2.py", 2630, "__init__", "self.model = DeepseekV2Model("],
    ["torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)"],
  ],
  "kv-cache": [
    ...INIT,
    INITIALIZE,
    ["sglang/srt/model_executor/model_runner.py", 530, "initialize", "self.init_memory_pool("],
    ["sglang/srt/model_executor/model_runner_kv_cache_mixin.py", 221, "init_memory_pool", "self.max_total_num_tokens = self.profile_max_num_token(total_gpu_memory)"],
    ["sglang/srt/model_executor/model_runner_kv_cache_mixin.py", 118, "profile_max_num_token", "raise RuntimeError("],
  ],
  "cuda-graph": [
    ...INIT,
    INITIALIZE,
    ["sglang/srt/model_executor/model_runner.py", 561, "initialize", "self.init_device_graphs()"],
    ["sglang/srt/model_executor/model_runner.py", 2154, "init_device_graphs", "self.graph_runner = graph_runners[self.device](self)"],
    ["sglang/srt/model_executor/cuda_graph_runner.py", 421, "__init__", 'raise Exception('],
  ],
  "load-error": [
    ...INIT,
    ...LOAD_MODEL,
    ["sglang/srt/model_loader/loader.py", 660, "load_model", "self.load_weights_and_postprocess("],
    ["sglang/srt/model_loader/loader.py", 688, "load_weights_and_postprocess", "model.load_weights(weights)"],
    ["sglang/srt/models/deepseek_v2.py", 3114, "load_weights", "weight_loader(param, loaded_weight)"],
  ],
  serving: [
    ...EVENT_LOOP,
    ["sglang/srt/managers/scheduler.py", 1121, "event_loop_overlap", "batch_result = self.run_batch(batch)"],
    ["sglang/srt/managers/scheduler.py", 2290, "run_batch", "batch_result = self.model_worker.forward_batch_generation("],
    ["sglang/srt/managers/tp_worker.py", 431, "forward_batch_generation", "logits_output, can_run_cuda_graph = self.model_runner.forward("],
    ["sglang/srt/model_executor/model_runner.py", 2405, "forward", "output = self._forward_raw("],
    ["sglang/srt/model_executor/model_runner.py", 2462, "_forward_raw", "ret = self.graph_runner.replay("],
    ["sglang/srt/model_executor/cuda_graph_runner.py", 903, "replay", "self.replay_prepare(forward_batch, pp_proxy_tensors)"],
    ["sglang/srt/model_executor/cuda_graph_runner.py", 862, "replay_prepare", "self.seq_lens[:raw_bs].copy_(forward_batch.seq_lens)"],
  ],
};

/** Where the other ranks wait when one rank fails: a collective of the load, or of the serving loop. */
const COLLECTIVE: Record<"load" | "serving", Frame[]> = {
  load: [
    ...INIT,
    ...LOAD_MODEL.slice(0, 2),
    ["sglang/srt/model_executor/model_runner.py", 1045, "load_model", "after_avail_memory = get_available_gpu_memory("],
    ["sglang/srt/utils/common.py", 512, "get_available_gpu_memory", "torch.distributed.all_reduce("],
    ["torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"],
    ["torch/distributed/distributed_c10d.py", 2806, "all_reduce", "work = group.allreduce([tensor], opts)"],
  ],
  serving: [
    ...EVENT_LOOP,
    ["sglang/srt/managers/scheduler.py", 1108, "event_loop_overlap", "recv_reqs = self.recv_requests()"],
    ["sglang/srt/managers/scheduler.py", 1303, "recv_requests", "recv_reqs = broadcast_pyobj("],
    ["sglang/srt/utils/common.py", 1187, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"],
    ["torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"],
    ["torch/distributed/distributed_c10d.py", 2727, "broadcast", "work = group.broadcast([tensor], opts)"],
  ],
};

/** torch's exception for a collective whose peer went away. */
export const NCCL_ABORT = "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5";

/** The main process's line when a scheduler's SIGQUIT arrives. */
export const SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed.";

/** A Python traceback: the header, two lines a frame, then the exception (which may run over several lines). */
export function traceback(frames: Frame[], exception: string): string {
  return ["Traceback (most recent call last):", ...frames.flatMap(([file, line, fn, code]) => [`  File "${SITE}/${file}", line ${line}, in ${fn}`, `    ${code}`]), exception].join("\n");
}

/** The traceback of a stage's failure, as a scheduler prints it. */
export function stageTraceback(stage: CrashStage, exception: string): string {
  return traceback(FRAMES[stage], exception);
}

/** torch's C++ warning (glog format: W, month and day, time with microseconds) when a rank's process group is torn down undestroyed. */
export function ncclWarning(rank: number, at: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  const stamp = `${p(at.getUTCMonth() + 1)}${p(at.getUTCDate())} ${p(at.getUTCHours())}:${p(at.getUTCMinutes())}:${p(at.getUTCSeconds())}.${p(at.getUTCMilliseconds() * 1000, 6)}`;
  return `[rank${rank}]:[W${stamp} ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.`;
}

export interface SchedulerCrash {
  stage: CrashStage;
  /** The exception each failing rank ends its traceback with, by local rank (its GPU, for torch's OOM text). */
  exception: (localRank: number) => string;
  /** Every local rank fails ("all"), or this local rank alone. */
  failing: "all" | number;
  /** TP ranks on this node. */
  localRanks: number;
  /** The global TP rank of local rank 0 (node rank x local ranks). */
  firstRank: number;
  /** When torch's warnings are stamped. */
  at: Date;
}

/**
 * Pure: everything the node writes from the failure to its SIGKILL, in order: the failing ranks'
 * tracebacks (the one rank first, or every rank from 0), for a single-rank failure the others'
 * NCCL aborts, the main process's SIGQUIT line, then for a single-rank failure one torch warning
 * per other rank.
 */
export function schedulerCrashLines(c: SchedulerCrash): CrashLine[] {
  const ranks = Array.from({ length: c.localRanks }, (_, r) => r);
  const hit = (r: number, exception: string): CrashLine => ({ level: "ERROR", rank: c.firstRank + r, text: `Scheduler hit an exception: ${exception}` });
  if (c.failing === "all") {
    return [...ranks.map((r) => hit(r, stageTraceback(c.stage, c.exception(r)))), { level: "ERROR", text: SIGQUIT_LINE }];
  }
  const failing = c.failing;
  const others = ranks.filter((r) => r !== failing);
  const waiting = COLLECTIVE[c.stage === "serving" ? "serving" : "load"];
  return [
    hit(failing, stageTraceback(c.stage, c.exception(failing))),
    ...others.map((r) => hit(r, traceback(waiting, NCCL_ABORT))),
    { level: "ERROR", text: SIGQUIT_LINE },
    ...others.map((r): CrashLine => ({ level: "PRINT", bare: true, text: ncclWarning(c.firstRank + r, c.at) })),
  ];
}

/** The local rank that meets a single-GPU fault: rank 3, or the last one on a node of fewer ranks. */
export function oneRank(localRanks: number): number {
  return Math.min(3, localRanks - 1);
}

/**
 * srt/model_executor/cuda_graph_runner.py: the capture's error, torch's own out-of-memory text
 * for the rank's device (`gpu`: torch's ordinal, the local rank), then SGLang's advice
 * (CUDA_GRAPH_CAPTURE_FAILED_MSG, its 2025-2026 wording).
 */
export function graphCaptureFailed(gpu: number, totalGiB: number, tried: string): string {
  const free = 1.2;
  const inUse = totalGiB - free;
  const torchOom =
    `CUDA out of memory. Tried to allocate ${tried} GiB. GPU ${gpu} has a total capacity of ${totalGiB.toFixed(2)} GiB of which ${free.toFixed(2)} GiB is free. ` +
    `Including non-PyTorch memory, this process has ${inUse.toFixed(2)} GiB memory in use. Of the allocated memory ${(inUse - 1.5).toFixed(2)} GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated. ` +
    "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
  return [
    `Exception: Capture cuda graph failed: ${torchOom}`,
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
  ].join("\n");
}
