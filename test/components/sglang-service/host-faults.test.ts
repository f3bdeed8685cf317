// Issue 41, items 1, 3 and 7, end to end (real engine, SSH, systemd): faults outside the
// campaign's model.
//   1. A wedged driver: `nvidia-smi` (or SGLang's `--help`) never answers. `up` hung in
//      preflight forever, holding the engine's stack lock. Every host command now has a bound
//      (timeouts.commandSeconds, timeouts.helpSeconds): `up` fails, naming the command, and the
//      old server goes on serving.
//   3. `pulumi` killed while readiness waited, then the new server died: the stack's own
//      rollout note made the dead unit read as "being proven", so the next `up` did not
//      restart it and failed; only a third `up` recovered. The next `up` now converges.
//   7. CUDA_VISIBLE_DEVICES=4,5,6,7 with another process on GPUs 0-3: the waits watched GPUs
//      0-3 and the first install ended in HOST DOWN. The waits watch the GPUs the server uses.
// Each `up` runs under the test's own deadline (the sum of the stack's bounds plus the engine's
// time): on the code before this change the first two tests never end, and fail at it.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { projectConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";
import { killUpWhen } from "../../support/killUpWhen";

const HOST = `hostfaults-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const TIMEOUTS = { readySeconds: 30, pollMs: 250, commandSeconds: 3, helpSeconds: 5 };
const spec = (stack: string) => readRepoStackConfig(stack)["dflash-sglang:speculative"];
const config = (stack: string, extra: Record<string, unknown> = {}) => ({
  ...readRepoStackConfig(stack),
  ...simHostConfig(host, UNIT),
  "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: 30 },
  "dflash-sglang:timeouts": TIMEOUTS,
  "dflash-sglang:benchmark": { enabled: false },
  ...extra,
});
/** An `up` of these stacks ends within its bounds; this is the engine's own time on top, generous for a loaded machine. */
const UP_DEADLINE_MS = 240_000;

const { sh, mainPid } = hostShell(() => host, UNIT);
const budget = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget;

/** A model small enough for 4 of the 8 GPUs (the 590 GiB one needs all 8). */
const SMALL_MODEL = { path: "/models/Small-MoE", sizeGiB: 120 };

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 }, models: [...hosts.DEFAULT_MODELS, SMALL_MODEL] });
  const service = simHostConfig(host, "sglang-visible")["dflash-sglang:service"] as object;
  ws = simWorkspace({
    main: config("b8t4-w2048"),
    // Its own unit on GPUs 4-7 (CUDA_VISIBLE_DEVICES), model on 4 GPUs.
    visible: config("b8t4-w2048", {
      "dflash-sglang:model": { ...(projectConfig().model as object), path: SMALL_MODEL.path, tpSize: 4 },
      "dflash-sglang:service": { ...service, environment: { CUDA_VISIBLE_DEVICES: "4,5,6,7" } },
    }),
  });
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

for (const c of [
  { fault: { hangNvidiaSmi: true }, what: "nvidia-smi", said: /nvidia-smi did not answer within 3 s \(timeouts\.commandSeconds\) and was killed: the GPU driver looks wedged/ },
  { fault: { hangHelp: true }, what: "`python -m sglang.launch_server --help`", said: /sglang\.launch_server --help` did not answer within 5 s \(timeouts\.helpSeconds\) and was killed/ },
]) {
  test(`a hung ${c.what} fails \`up\` in preflight, naming it; nothing is stopped and the old server serves`, { timeout: UP_DEADLINE_MS }, async () => {
    const before = await mainPid();
    hosts.fault(HOST, JSON.stringify(c.fault));
    try {
      ws.setStackConfig("main", "speculative", spec("b16t4-w2048"));
      const message = await failedUp(await ws.stack("main"), `${c.what} hangs`);
      assert.match(message, c.said);
      assert.match(message, /Preflight failed for .* nothing was stopped or changed, the current server is untouched/);
    } finally {
      hosts.fault(HOST, "{}");
      ws.setStackConfig("main", "speculative", spec("b8t4-w2048"));
    }
    assert.equal(await mainPid(), before, "the old server was not restarted");
    assert.equal(await budget(), 8);
    // With the driver back, the same change goes through.
    ws.setStackConfig("main", "speculative", spec("b16t4-w2048"));
    assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
    assert.equal(await budget(), 16);
    ws.setStackConfig("main", "speculative", spec("b8t4-w2048"));
    assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
  });
}


test("pulumi killed while readiness waits, then the new server dies: the next `up` restarts it and converges", { timeout: UP_DEADLINE_MS }, async () => {
  // The new configuration's load is held until the engine is killed.
  hosts.fault(HOST, JSON.stringify({ hangDuringLoad: true, match: { speculative_ddtree_budget: 16 } }));
  ws.setStackConfig("main", "speculative", spec("b16t4-w2048"));
  await killUpWhen(ws, "main", /loading weights/);
  // The killed engine's readiness step had taken the restart up (its `prove`); now the server dies.
  await sh(`systemctl kill --signal=SIGKILL ${UNIT}.service; until [ "$(systemctl is-active ${UNIT}.service)" != activating ] && [ "$(systemctl is-active ${UNIT}.service)" != active ]; do sleep 0.2; done`);
  hosts.fault(HOST, "{}");
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active");
  assert.equal(await budget(), 16);
  ws.setStackConfig("main", "speculative", spec("b8t4-w2048"));
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
});

test("CUDA_VISIBLE_DEVICES=4,5,6,7 with another process on GPUs 0-3: the first install waits for GPUs 4-7 only, and serves", { timeout: UP_DEADLINE_MS }, async () => {
  const stackName = "visible";
  // Main's server holds GPUs 0-7; it goes, and another team's process takes GPUs 0-3.
  await (await ws.stack("main")).destroy();
  const hold = await sh(`(setsid node /opt/dflash-sim/gpu-hold.js 0,1,2,3 80000 >/tmp/gpu-hold.log 2>&1 & echo $!)`);
  try {
    await sh(`until grep -q holding /tmp/gpu-hold.log; do sleep 0.1; done`);
    const stack = await ws.stack(stackName);
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    assert.equal(await sh("systemctl is-active sglang-visible.service"), "active");
    // What nvidia-smi shows: the other process on 0-3, the server on 4-7.
    const apps = await sh("nvidia-smi --query-compute-apps=pid,gpu_index --format=csv,noheader");
    const server = await sh("systemctl show -p MainPID --value sglang-visible.service");
    assert.deepEqual(apps.split("\n").filter((l) => l.startsWith(`${server},`)).map((l) => Number(l.split(",")[1])).sort(), [4, 5, 6, 7]);
    await stack.destroy();
  } finally {
    await sh(`kill ${Number(hold)} 2>/dev/null || true`);
  }
});
