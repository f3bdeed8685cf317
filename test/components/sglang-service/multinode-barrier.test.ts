// Issue 41, item 2: a group has a barrier. Each node's restart used to run on its own: node 1
// waited only up to its drain deadline for its old rank to end with node 0's, then stopped it.
// Node 0 stalled longer than that (here: its host lock held by a process that is not ours, and
// safety.lockWaitSeconds past node 1's deadline), so node 1 stopped its old rank, node 0's old
// rank aborted, and nothing served while `up` still waited on node 0's lock. Now no node stops
// anything before every node (node 0 too) has passed its own checks: a stall fails the group
// first, naming the node and what it stalled in, and the old group goes on serving.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";
import { until } from "../../support/localSim";

const NAMES = [`barrier0-${process.pid}`, `barrier1-${process.pid}`];
const UNIT = "sglang-k26";
/** A transient unit of ours on node 0 that holds its host lock (stopped by name: the test started it). */
const HOLDER = "dflash-test-lock-holder";
// Node 1's old deadline is drainSeconds + 15 s (render.ts DRAIN_EXIT_MARGIN_SECONDS): node 0
// waits for its lock longer than that.
const DRAIN_SECONDS = 1;
const LOCK_WAIT_SECONDS = 30;
let h0: hosts.HostInfo;
let h1: hosts.HostInfo;
let ws: SimWorkspace;

const node0 = hostShell(() => h0, UNIT);
const node1 = hostShell(() => h1, UNIT);
const spec = (stack: string) => readRepoStackConfig(stack)["dflash-sglang:speculative"];
/** The lines of up's error that say what failed and where (its full text also holds the engine's diff). */
const story = (message: string) => message.split("\n").filter((l) => /FAILED|stopped|lock|node \d/i.test(l)).join("\n");
const serving = async () => (await fetch(`http://${h0.address}:${h0.sglangPort}/server_info`)).json() as Promise<Record<string, unknown>>;

before(async () => {
  [h0, h1] = await Promise.all(NAMES.map((n) => hosts.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } })));
  ws = simWorkspace({
    pair: {
      ...readRepoStackConfig("b8t4-w2048"),
      ...simHostConfig(h0, UNIT),
      "dflash-sglang:nodes": [simHostConfig(h1)["dflash-sglang:host"]],
      "dflash-sglang:model": { path: "/models/Kimi-K2.6", drafterPath: "/models/Kimi-K2.6-DFlash", tpSize: 16, quantization: "compressed-tensors", trustRemoteCode: true },
      "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: LOCK_WAIT_SECONDS },
      "dflash-sglang:timeouts": { drainSeconds: DRAIN_SECONDS, readySeconds: 60, pollMs: 250 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  assert.equal((await (await ws.stack("pair")).up()).summary.result, "succeeded");
});

after(async () => {
  await Promise.all(NAMES.map((n) => hosts.stop(n)));
  ws?.cleanup();
});

test("node 0 stalls (its host lock held) past node 1's drain deadline: nothing stops on either node, the old group serves, up names node 0 and the stall", async () => {
  const before = { node0: await node0.mainPid(), node1: await node1.mainPid(), budget: (await serving()).speculative_ddtree_budget };
  assert.ok(before.node0 > 0 && before.node1 > 0, "the group serves before the test");
  // A root process that is not a deployment holds node 0's lock; its unit is active once it holds it.
  await node0.sh(`systemd-run --quiet --collect --unit=${HOLDER} flock /run/dflash-sglang/host.lock sleep 600`);
  await node0.sh(`for i in $(seq 100); do [ -n "$(grep -l FLOCK /proc/$(systemctl show -p MainPID --value ${HOLDER}.service)/fdinfo/* 2>/dev/null)" ] && break; sleep 0.1; done; systemctl is-active ${HOLDER}.service`);
  ws.setStackConfig("pair", "speculative", spec("b16t4-w2048"));
  let message = "";
  try {
    message = await failedUp(await ws.stack("pair"), "node 0's lock is held by another process for longer than safety.lockWaitSeconds");
  } finally {
    await node0.sh(`systemctl stop ${HOLDER}.service 2>/dev/null; true`);
    ws.setStackConfig("pair", "speculative", spec("b8t4-w2048"));
  }
  // Nothing was stopped on either node: the same processes run the old ranks and serve.
  assert.equal(await node1.mainPid(), before.node1, `node 1's old rank was stopped (or restarted) although node 0 never got past its lock; up said:\n${story(message)}`);
  assert.equal(await node0.mainPid(), before.node0, `node 0's old server was stopped; up said:\n${story(message)}`);
  assert.equal((await serving()).speculative_ddtree_budget, before.budget, "the old group still serves its configuration");
  assert.doesNotMatch(await node1.sh(`cat /etc/systemd/system/${UNIT}.service`), /--speculative-ddtree-budget 16/, "node 1 still has its old unit");
  // The failure names node 0 (its address, not node 1's) and what it stalled in: the lock, its holder.
  assert.match(message, new RegExp(`FAILED: the deployment lock of ${h0.address.replace(/\./g, "\\.")} is held by pid \\d+ of user root \\((/usr/bin/)?flock /run/dflash-sglang/host\\.lock sleep 600\\)`));
  assert.match(message, /nothing was stopped on any node of the group/i);
});

test("once the lock is free, the next up restarts the group onto the new configuration", async () => {
  ws.setStackConfig("pair", "speculative", spec("b16t4-w2048"));
  assert.equal((await (await ws.stack("pair")).up()).summary.result, "succeeded");
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  assert.match(await node1.sh(`cat /etc/systemd/system/${UNIT}.service`), /--speculative-ddtree-budget 16/);
});

// Campaign seed 4143, sequence 99: node 0 lost its power after the group's go. Its session
// dropped, the group's restart step failed, and readiness (which alone can roll a group back)
// never ran: node 1 ran the new rank while node 0 booted its old one, and the group was split.
// Now the restart step hands the dropped node to readiness, which waits for it
// (timeouts.rebootSeconds) and restarts the group as one.
test("node 0 loses power after the group's go: up waits for it to boot and restarts the group as one", async () => {
  ws.setStackConfig("pair", "speculative", spec("b8t4-w2048"));
  let cut: Promise<unknown> | undefined;
  let out = "";
  const r = await (await ws.stack("pair")).up({
    onOutput: (o) => {
      out += o;
      if (!cut && /every node of the group is ready to stop its old server; restarting the group/.test(out)) cut = hosts.reboot(h0.name, { kind: "power-cut" });
    },
  });
  assert.ok(cut, `the group's go never came:\n${out.slice(-3000)}`);
  await cut;
  assert.equal(r.summary.result, "succeeded");
  assert.match(out, new RegExp(`node 0 \\(${h0.address.replace(/\./g, "\\.")}\\) dropped out during the group's restart`));
  assert.equal((await serving()).speculative_ddtree_budget, 8, "the group serves the new configuration");
  for (const node of [node0, node1]) {
    assert.match(await node.sh(`cat /etc/systemd/system/${UNIT}.service`), /--speculative-ddtree-budget 8/);
    assert.equal((await node.sh(`systemctl is-active ${UNIT}.service`)).trim(), "active");
  }
});

// Campaign seed 4170, sequences 19 and 99: node 0 rebooted (a power cut, a clean reboot) while
// no restart of ours was running. Node 1's rank ended with it (its collectives aborted), and
// with Restart=no it stayed down: node 0's rank, started at boot, waited for a peer that never
// came, and nothing served until the next `up`. A group's ranks are now started again by
// systemd (render.ts, Restart=always) until the group is whole.
test("node 0 reboots with no up running: node 1's rank, ended with it, is started again and the group serves again by itself", async () => {
  const restartsBefore = Number(await node1.sh(`systemctl show -p NRestarts --value ${UNIT}.service`));
  await hosts.reboot(h0.name, { kind: "clean" });
  const info = await until(
    "the group to serve again after node 0's reboot",
    async () => {
      const i = await serving().catch(() => undefined);
      return i && (await node1.sh(`systemctl is-active ${UNIT}.service || true`)) === "active" ? i : undefined;
    },
    240_000,
  );
  assert.equal(info.speculative_ddtree_budget, 8, "the group serves the configuration it served before the reboot");
  assert.ok(Number(await node1.sh(`systemctl show -p NRestarts --value ${UNIT}.service`)) > restartsBefore, "node 1's rank was started again by systemd");
  assert.match(await node1.sh(`journalctl -u ${UNIT}.service --no-pager -o cat | grep -c 'lost node 0' || true`), /^[1-9]/, "node 1's rank had ended with node 0");
  assert.equal(await node1.sh(`ls /run/systemd/system/${UNIT}.service.d 2>/dev/null | wc -l`), "0", "no hold on node 1's restarts is left");
});

// Campaign seed 5011, sequence 95: a rollback reset node 1 while node 0 was away (a power cut
// in readiness), node 0 then booted on the new unit, and the group ran two configurations. A
// group rolls back whole or not at all: here node 0's new rank never finishes loading (held by
// the simulator until the test lets it go) and readiness gives up at timeouts.readySeconds,
// while node 1 cannot be reached over SSH for longer than timeouts.rebootSeconds (the outage
// begins once readiness is polling, so readiness itself could reach every node): nothing is
// rolled back.
test("readiness fails while node 1 cannot be reached: the group is not rolled back on node 0 alone; every node keeps the new unit, and the next up proves it", async () => {
  hosts.fault(NAMES[0], JSON.stringify({ hangDuringLoad: true, match: { speculative_ddtree_budget: 4 } }));
  ws.setStackConfig("pair", "timeouts", { drainSeconds: DRAIN_SECONDS, readySeconds: 20, pollMs: 250, rebootSeconds: 10 });
  ws.setStackConfig("pair", "speculative", spec("b4t4-w2048"));
  let outage: Promise<void> | undefined;
  let out = "";
  const message = await failedUp(await ws.stack("pair"), "node 0's new rank never loads and readiness must fail", {
    onOutput: (o) => {
      out += o;
      // Readiness polls node 0 (its progress line): node 1 stops answering from here on.
      if (!outage && /sglang-ready updating .*deadline 20 s/.test(out)) outage = hosts.sshOutage(h1, 75);
    },
  });
  assert.ok(outage, `readiness never polled:\n${out.slice(-3000)}`);
  await outage;
  assert.match(message, /was not serving the configuration within 20 s \(timeouts\.readySeconds\)/);
  assert.match(message, new RegExp(`NOT ROLLED BACK: .*node 1 \\(${h1.address.replace(/\./g, "\\.")}\\).* did not answer within 10 s \\(timeouts\\.rebootSeconds\\)`));
  assert.doesNotMatch(message, /Rolled back:|restoring the previous configuration/);
  assert.match(await node0.sh(`cat /etc/systemd/system/${UNIT}.service`), /--speculative-ddtree-budget 4/, "node 0 keeps the new unit");
  // The new rank may load now.
  hosts.fault(NAMES[0], "{}");
  await until("node 1 to answer over SSH again", async () => ((await hosts.ssh(h1, "true").catch(() => undefined))?.code === 0 ? true : undefined), 240_000);
  assert.match(await node1.sh(`cat /etc/systemd/system/${UNIT}.service`), /--speculative-ddtree-budget 4/, "node 1 keeps the new unit: one configuration on the group");
  // Every node answers, the new rank has loaded: the next up proves the group on it.
  assert.equal((await (await ws.stack("pair")).up()).summary.result, "succeeded");
  assert.equal((await serving()).speculative_ddtree_budget, 4);
});
