import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawn } from "node:child_process";
import { GpuStore, usageAt, DEFAULT_GPU_CONFIG, visibleGpus } from "../../../simhost/sim/gpu";

test("memory of an exited process is counted until the release delay has passed", () => {
  const a = { pid: 1, startTicks: 1, processName: "python3", perGpuMiB: { 0: 1000, 1: 1000 }, exitedAt: 10_000 };
  assert.equal(usageAt(DEFAULT_GPU_CONFIG, [a], 10_000 + 4_999, 5_000)[0].usedMiB, 1000);
  assert.equal(usageAt(DEFAULT_GPU_CONFIG, [a], 10_000 + 5_000, 5_000)[0].usedMiB, 0);
  assert.equal(usageAt(DEFAULT_GPU_CONFIG, [{ ...a, exitedAt: undefined }], 1e12, 0)[1].usedMiB, 1000, "live owner keeps it");
});

test("allocation fails on the first GPU that is short, and succeeds once memory is released", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpu-sim-"));
  try {
    const store = new GpuStore(dir, path.join(dir, "none.json"));
    const child = spawn("sleep", ["30"]);
    const pid = child.pid!;
    const big = Math.floor(DEFAULT_GPU_CONFIG.memoryMiB * 0.9);
    assert.equal(store.allocate(pid, "python3", [0, 1, 2, 3], big, 60_000), undefined);
    const short = store.allocate(process.pid, "python3", [2, 3], big, 60_000);
    assert.equal(short?.index, 2);
    assert.deepEqual(store.computeApps().map((a) => a.gpu), [0, 1, 2, 3]);

    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    // Owner gone but the 60 s release delay holds the memory.
    assert.equal(store.usage(60_000)[0].usedMiB, big);
    assert.equal(store.computeApps().length, 0, "dead processes are not listed");
    // Without a delay it is free at once.
    assert.equal(store.usage(0)[0].usedMiB, 0);
    assert.equal(store.allocate(process.pid, "python3", [2, 3], big, 0), undefined);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// CUDA_VISIBLE_DEVICES, as CUDA reads it: the listed GPUs in order, up to the first that is not one.
test("visibleGpus: every GPU when unset; the listed ones in order; stops at the first that is not a GPU of the host", () => {
  assert.deepEqual(visibleGpus(undefined, 4), [0, 1, 2, 3]);
  assert.deepEqual(visibleGpus("4,5,6,7", 8), [4, 5, 6, 7]);
  assert.deepEqual(visibleGpus("2, 0", 8), [2, 0]);
  assert.deepEqual(visibleGpus("1,9,2", 8), [1]);
  assert.deepEqual(visibleGpus("", 8), []);
  assert.deepEqual(visibleGpus("GPU-1234", 8), []);
});
