// One model over two simulated hosts (node ranks 0 and 1), through the real engine:
// it comes up, reconfigures in the safe order, and rolls back as a group.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { failedUp } from "../../support/failedUp";

const NAMES = [`node0-${process.pid}`, `node1-${process.pid}`];
const UNIT = "sglang-k26";
let h0: hosts.HostInfo;
let h1: hosts.HostInfo;
let ws: SimWorkspace;

const spec = (stack: string) => readRepoStackConfig(stack)["dflash-sglang:speculative"];
const pidOn = async (h: hosts.HostInfo) => Number((await hosts.ssh(h, `systemctl show -p MainPID --value ${UNIT}.service`)).stdout.trim());
const unitOn = async (h: hosts.HostInfo) => (await hosts.ssh(h, `cat /etc/systemd/system/${UNIT}.service`)).stdout;
const serving = async () => (await fetch(`http://${h0.address}:${h0.sglangPort}/server_info`)).json() as Promise<Record<string, unknown>>;

before(async () => {
  [h0, h1] = await Promise.all(NAMES.map((n) => hosts.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } })));
  const node1 = simHostConfig(h1)["dflash-sglang:host"];
  const project = readRepoStackConfig("b8t4-w2048");
  ws = simWorkspace({
    pair: {
      ...project,
      ...simHostConfig(h0, UNIT),
      "dflash-sglang:nodes": [node1],
      "dflash-sglang:model": { path: "/models/Kimi-K2.6", drafterPath: "/models/Kimi-K2.6-DFlash", tpSize: 16, quantization: "compressed-tensors", trustRemoteCode: true },
      "dflash-sglang:safety": { stableSeconds: 1 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
});

after(async () => {
  await Promise.all(NAMES.map((n) => hosts.stop(n)));
  ws?.cleanup();
});

test("a 2-node deployment comes up: a unit per node with its rank, node 0 serves", async () => {
  const up = await (await ws.stack("pair")).up();
  assert.equal(up.summary.result, "succeeded");
  const info = await serving();
  assert.equal(info.nnodes, 2);
  assert.equal(info.node_rank, 0);
  assert.equal(info.tp_size, 16);
  assert.match(await unitOn(h0), /--node-rank 0 \\\n\s+--dist-init-addr 127\.0\.0\.\d+:5757/);
  assert.match(await unitOn(h1), /--node-rank 1 \\\n\s+--dist-init-addr 127\.0\.0\.\d+:5757/);
  assert.doesNotMatch(await unitOn(h1), /ExecStartPost/, "only node 0 serves HTTP");
  assert.equal((await hosts.ssh(h1, `systemctl is-active ${UNIT}.service`)).stdout.trim(), "active");
  assert.equal((await hosts.ssh(h1, "nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits | awk -F', ' '$2 > 0' | wc -l")).stdout.trim(), "8");
});

test("reconfiguring restarts both nodes and the new config serves", async () => {
  const pids = [await pidOn(h0), await pidOn(h1)];
  ws.setStackConfig("pair", "speculative", spec("b16t4-w2048"));
  const up = await (await ws.stack("pair")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  assert.notEqual(await pidOn(h0), pids[0]);
  assert.notEqual(await pidOn(h1), pids[1]);
  assert.match(await unitOn(h1), /--speculative-ddtree-budget 16/);
});

test("when one node fails, the whole group rolls back to the previous configuration", async () => {
  hosts.fault(NAMES[1], JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 4 } }));
  ws.setStackConfig("pair", "speculative", spec("b4t4-w2048"));
  let message = "";
  try {
    await (await ws.stack("pair")).up();
  } catch (e) {
    message = (e as Error).message;
  }
  hosts.fault(NAMES[1], "{}");
  assert.match(message, /node 1 \(127\.0\.0\.\d+\) .*failed .*CUDA out of memory on GPU 3/s);
  assert.match(message, /Rolled back: the previous configuration \(stack pair, unit [0-9a-f]{12}\) is back and serving on 127\.0\.0\.\d+, 127\.0\.0\.\d+/);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  assert.match(await unitOn(h1), /--speculative-ddtree-budget 16/);
  assert.equal((await hosts.ssh(h1, `systemctl is-active ${UNIT}.service`)).stdout.trim(), "active");
});

// Issue 12, scenario 9: drift is looked for on every node, and a unit stopped by hand is drift.
// Issue 18, sequence 4: node 1 frees its GPUs past timeouts.gpuReleaseSeconds. Node 0 started
// the new rank 0 while node 1 recovered the old rank 1 on its own: the ranks disagreed and the
// group was down. A group restarts as one: the readiness step puts every node back.
test("node 1 frees its GPUs past their deadline: the whole group goes back to the previous configuration, which serves", async () => {
  hosts.fault(NAMES[1], JSON.stringify({ gpuReleaseDelaySeconds: 8 }));
  ws.setStackConfig("pair", "speculative", spec("b12t6-w2048"));
  ws.setStackConfig("pair", "timeouts", { gpuReleaseSeconds: 3, readySeconds: 60, pollMs: 250 });
  let message = "";
  try {
    message = await failedUp(await ws.stack("pair"), "node 1's GPUs stayed busy past their deadline");
  } finally {
    hosts.fault(NAMES[1], "{}");
    ws.setStackConfig("pair", "timeouts", { gpuReleaseSeconds: 60, readySeconds: 60, pollMs: 250 });
  }
  assert.match(message, /node 1 \(127\.0\.0\.\d+\): FAILED: GPU memory on 127\.0\.0\.\d+ was not released within 3 s/);
  // Both nodes end on the previous configuration (node 1 starts its old rank once its GPUs are free).
  const deadline = Date.now() + 90_000;
  for (;;) {
    const budget = await serving().then((i) => i.speculative_ddtree_budget, () => undefined);
    const node1 = (await hosts.ssh(h1, `systemctl is-active ${UNIT}.service`)).stdout.trim();
    if (budget === 16 && node1 === "active" && /--speculative-ddtree-budget 16/.test(await unitOn(h1))) break;
    assert.ok(Date.now() < deadline, `the group did not come back on the previous configuration (node 0 serves budget ${budget ?? "nothing"}, node 1 ${node1}); up said:\n${message.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.match(await unitOn(h0), /--speculative-ddtree-budget 16/);
});

test("a unit edited by hand on node 1: refresh shows the drift, up puts the desired unit back on it", async () => {
  // The stack wants what the group runs now (the rollback above left the failed config in it).
  ws.setStackConfig("pair", "speculative", spec("b16t4-w2048"));
  const stack = await ws.stack("pair");
  assert.equal((await stack.up()).summary.result, "succeeded");
  const desired = await unitOn(h1);
  await hosts.ssh(h1, `sed -i 's/--speculative-ddtree-budget 16/--speculative-ddtree-budget 99/' /etc/systemd/system/${UNIT}.service && systemctl daemon-reload`);
  const refresh = await stack.refresh();
  assert.ok((refresh.summary.resourceChanges?.update ?? 0) >= 1, `refresh saw the edit on node 1: ${JSON.stringify(refresh.summary.resourceChanges)}`);
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await unitOn(h1), desired);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
});

// Node 1's rank ends with node 0's, and systemd starts it again (a group's Restart=always): it
// waits for a node 0 that serves nothing. The group's restart stops it at once (node 0's
// `@@prepared idle`, node 1's `go idle`) and starts no new rank before every old one has stopped
// (the second barrier), so the old rank 1 never joins the new rank 0 (which failed the up and
// rolled the group back before the barrier existed).
test("a unit stopped by hand: refresh shows it, up starts the configuration again", async () => {
  const stack = await ws.stack("pair");
  const restarts = async () => Number((await hosts.ssh(h1, `systemctl show -p NRestarts --value ${UNIT}.service`)).stdout.trim());
  const before = await restarts();
  assert.equal((await hosts.ssh(h0, `systemctl stop ${UNIT}.service`)).code, 0);
  const deadline = Date.now() + 60_000;
  while ((await restarts()) === before) {
    assert.ok(Date.now() < deadline, "systemd started node 1's rank again after it ended with node 0's");
    await new Promise((r) => setTimeout(r, 250));
  }
  const refresh = await stack.refresh();
  assert.ok((refresh.summary.resourceChanges?.update ?? 0) >= 1, `refresh saw the stopped unit: ${JSON.stringify(refresh.summary.resourceChanges)}`);
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.match(up.stdout, /node 0 serves nothing: the other nodes stop their ranks at once/);
  assert.equal((await hosts.ssh(h0, `systemctl is-active ${UNIT}.service`)).stdout.trim(), "active");
  assert.equal((await serving()).speculative_ddtree_budget, 16);
});

test("destroy removes the unit from every node", async () => {
  await (await ws.stack("pair")).destroy();
  for (const h of [h0, h1]) assert.equal((await hosts.ssh(h, `test -e /etc/systemd/system/${UNIT}.service`)).code, 1);
});
