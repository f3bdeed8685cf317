// A scheduler's failure as the simulator reports it (simhost/sim/sglang/crash.ts), held to
// sgl-project/sglang python/sglang/srt/managers/scheduler.py run_scheduler_process (every TP rank
// logs its own traceback, then SIGQUITs the main process) and srt/managers/tokenizer_manager.py
// SignalHandler.running_phase_sigquit_handler (the SIGQUIT line, then
// kill_process_tree(include_parent=True): the main process's SIGKILL of itself).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { freePort, launch, sandbox } from "../../support/localSim";
import { NCCL_ABORT, SIGQUIT_LINE, graphCaptureFailed, ncclWarning, oneRank, schedulerCrashLines } from "../../../simhost/sim/sglang/crash";

const args = (dir: string, port: number, tp = 8) => ["--model-path", path.join(dir, "model"), "--tp-size", String(tp), "--port", String(port), "--host", "127.0.0.1"];
const at = new Date(Date.UTC(2026, 11, 6, 10, 0, 0, 123));

test("one rank's failure: its traceback first, then the others' NCCL aborts, the SIGQUIT line, one torch warning per other rank", () => {
  const lines = schedulerCrashLines({ stage: "weights", failing: 3, exception: () => "torch.OutOfMemoryError: CUDA out of memory.", localRanks: 8, firstRank: 0, at });
  assert.equal(lines.length, 1 + 7 + 1 + 7);
  assert.deepEqual(lines.slice(0, 8).map((l) => l.rank), [3, 0, 1, 2, 4, 5, 6, 7]);
  assert.match(lines[0].text, /^Scheduler hit an exception: Traceback \(most recent call last\):\n {2}File "\/usr\/local\/lib\/python3\.12\/dist-packages\/sglang\/srt\/managers\/scheduler\.py", line \d+, in run_scheduler_process\n/);
  assert.equal(lines[0].text.split("\n").at(-1), "torch.OutOfMemoryError: CUDA out of memory.");
  for (const l of lines.slice(1, 8)) assert.equal(l.text.split("\n").at(-1), NCCL_ABORT);
  assert.deepEqual(lines[8], { level: "ERROR", text: SIGQUIT_LINE });
  assert.equal(SIGQUIT_LINE, "SIGQUIT received. signum=None, frame=None. It usually means one child failed.");
  assert.deepEqual(lines.slice(9).map((l) => [l.level, l.bare, l.text]), [0, 1, 2, 4, 5, 6, 7].map((r) => ["PRINT", true, ncclWarning(r, at)]));
  assert.equal(ncclWarning(1, at), "[rank1]:[W1206 10:00:00.123000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.");
  // Realistic length: 10 to 14 frames, two lines each.
  const frames = (lines[0].text.match(/^ {2}File "/gm) ?? []).length;
  assert.ok(frames >= 10 && frames <= 14, `${frames} frames`);
  assert.deepEqual([oneRank(8), oneRank(4), oneRank(3), oneRank(1)], [3, 3, 2, 0], "rank 3, or the last rank when there are 3 or fewer");
});

test("a failure every rank meets: every rank's traceback from rank 0 (global ranks on node 1), then the SIGQUIT line", () => {
  const lines = schedulerCrashLines({ stage: "kv-cache", failing: "all", exception: (r) => `RuntimeError: rank ${r}`, localRanks: 4, firstRank: 4, at });
  assert.deepEqual(lines.map((l) => l.rank), [4, 5, 6, 7, undefined]);
  assert.deepEqual(lines.slice(0, 4).map((l) => l.text.split("\n").at(-1)), [0, 1, 2, 3].map((r) => `RuntimeError: rank ${r}`));
  assert.equal(lines[4].text, SIGQUIT_LINE);
  for (const stage of ["balance", "weights", "kv-cache", "cuda-graph", "load-error", "serving"] as const) {
    const frames = (schedulerCrashLines({ stage, failing: "all", exception: () => "E: x", localRanks: 1, firstRank: 0, at })[0].text.match(/^ {2}File "/gm) ?? []).length;
    assert.ok(frames >= 8 && frames <= 14, `${stage}: ${frames} frames`);
  }
});

// srt/model_executor/cuda_graph_runner.py: `Capture cuda graph failed: {e}` + CUDA_GRAPH_CAPTURE_FAILED_MSG.
test("the graph capture text wraps torch's OOM for the rank's GPU, then SGLang's advice", () => {
  const text = graphCaptureFailed(5, 95.59, "2.00");
  assert.match(text.split("\n")[0], /^Exception: Capture cuda graph failed: CUDA out of memory\. Tried to allocate 2\.00 GiB\. GPU 5 has a total capacity of 95\.59 GiB of which 1\.20 GiB is free\. /);
  assert.deepEqual(text.split("\n").slice(1), [
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
  ]);
});

test("TP 8, one GPU out of memory while loading: every rank's traceback, the SIGQUIT line after them, then the process SIGKILLs itself", async () => {
  const sb = sandbox({}, { crashDuringLoad: "oom" });
  try {
    const r = await launch(sb.env, args(sb.dir, await freePort())).exited;
    assert.deepEqual([r.code, r.signal], [null, "SIGKILL"], "not exit 1: kill_process_tree(include_parent=True)");
    const lines = r.stderr.trimEnd().split("\n");
    const hits = lines.filter((l) => / Scheduler hit an exception: Traceback \(most recent call last\):$/.test(l));
    assert.deepEqual(hits.map((l) => /TP(\d)\]/.exec(l)?.[1]), ["3", "0", "1", "2", "4", "5", "6", "7"]);
    const cause = lines.findIndex((l) => l.startsWith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 3 has a total capacity of "));
    assert.ok(cause > 0 && lines.length - cause > 40, `the cause is ${lines.length - cause} lines before the end`);
    assert.equal(lines.filter((l) => l === NCCL_ABORT).length, 7);
    const quit = lines.findIndex((l) => l.endsWith(`] ${SIGQUIT_LINE}`));
    assert.ok(quit > lines.lastIndexOf(NCCL_ABORT), "after every traceback");
    assert.deepEqual(lines.slice(quit + 1).map((l) => /^\[rank(\d)\]:\[W\d{4} [\d:.]+ ProcessGroupNCCL\.cpp:1250\] Warning: WARNING: process group has NOT been destroyed/.exec(l)?.[1]), ["0", "1", "2", "4", "5", "6", "7"]);
  } finally {
    sb.cleanup();
  }
});

test("a CUDA error after becoming ready: rank 0's traceback, the others' aborted broadcasts, SIGQUIT, SIGKILL", async () => {
  const sb = sandbox({}, { crashAfterReadySeconds: 0.2 });
  try {
    const server = launch(sb.env, args(sb.dir, await freePort()));
    const r = await server.exited;
    assert.match(server.log(), /The server is fired up and ready to roll!/);
    assert.equal(r.signal, "SIGKILL");
    const lines = r.stderr.trimEnd().split("\n");
    assert.match(lines[0], /^\[[\d-]+ [\d:]+ TP0\] Scheduler hit an exception: Traceback/);
    assert.ok(lines.includes("RuntimeError: CUDA error: an illegal memory access was encountered"));
    assert.ok(lines.indexOf("RuntimeError: CUDA error: an illegal memory access was encountered") < lines.findIndex((l) => /TP1\] Scheduler hit an exception/.test(l)));
    assert.match(r.stderr, /in broadcast_pyobj\n.*\n(.*\n)*torch\.distributed\.DistBackendError: NCCL error in: /);
    assert.match(lines.at(-8) ?? "", /SIGQUIT received\. signum=None, frame=None\. It usually means one child failed\.$/);
    assert.deepEqual(lines.slice(-7).map((l) => /^\[rank(\d)\]:\[W/.exec(l)?.[1]), ["1", "2", "3", "4", "5", "6", "7"]);
  } finally {
    sb.cleanup();
  }
});

// Argument and __post_init__ errors in the main process, before any scheduler: unchanged.
test("errors before any scheduler starts still exit 2 (argparse) or 1 (__post_init__)", async () => {
  const sb = sandbox({});
  try {
    assert.equal((await launch(sb.env, [...args(sb.dir, 1), "--bogus"]).exited).code, 2);
    assert.equal((await launch(sb.env, [...args(sb.dir, 1), "--speculative-algorithm", "NOPE"]).exited).code, 1);
  } finally {
    sb.cleanup();
  }
});

// The surface's out-of-memory region (simhost/sim/sglang/surface.ts) is a graph capture that does
// not fit on any rank: srt/model_executor/cuda_graph_runner.py's text, each rank naming its GPU.
test("the surface's graph capture OOM: every rank's `Capture cuda graph failed` with its GPU's total capacity, then SIGKILL", async () => {
  const sb = sandbox({ profile: "ddtree-fork", surface: { oom: { treeNodes: 8 } } });
  try {
    const ddtree = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", path.join(sb.dir, "drafter"), "--speculative-ddtree-budget", "16"];
    const r = await launch(sb.env, [...args(sb.dir, await freePort()), ...ddtree]).exited;
    assert.equal(r.signal, "SIGKILL");
    for (let gpu = 0; gpu < 8; gpu++) assert.match(r.stderr, new RegExp(`^Exception: Capture cuda graph failed: CUDA out of memory\\. Tried to allocate 4\\.00 GiB\\. GPU ${gpu} has a total capacity of `, "m"));
    assert.match(r.stderr, /SIGQUIT received\./);
  } finally {
    sb.cleanup();
  }
});
