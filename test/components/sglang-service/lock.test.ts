// A lost SSH session (issue 12, scenario 3): the connection that runs a restart drops
// mid-rollout. The host's lock is held on the host by the transaction itself (flock in
// transaction.sh), not by the session, so it cannot be "lost" while the work goes on: the
// transaction ignores the hang-up and finishes (a host is never left stopped half-way),
// `up` fails, a second stack's `up` started meanwhile changes nothing and names the
// holder, and the next `up` of the first stack proves what the host runs without
// restarting it again.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";

const HOST = `lock-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh, mainPid } = hostShell(() => host, UNIT);
const serving = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`));
const config = (stack: string, lockWaitSeconds: number) => ({
  ...readRepoStackConfig(stack),
  ...simHostConfig(host, UNIT),
  "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds },
  "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 30 },
  "dflash-sglang:benchmark": { enabled: false },
});

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({ main: config("b8t4-w2048", 120), intruder: config("b4t4-w2048", 3) });
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("the session of a running restart drops: the host-side transaction finishes under its lock, another stack's up changes nothing, the next up proves it", async () => {
  // Slow GPU release: the restart is inside its GPU wait when the session drops.
  hosts.fault(HOST, JSON.stringify({ gpuReleaseDelaySeconds: 5 }));
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  let output = "";
  let killed = 0;
  let killing: Promise<void> | undefined;
  const first = (await ws.stack("main")).up({
    onOutput: (s) => {
      output += s;
      if (!killing && /waiting for GPU memory to be released/.test(output)) killing = hosts.dropSessions(host).then((n) => void (killed = n));
    },
  });
  const firstError = await first.then(
    () => null,
    (e: Error) => e.message,
  );
  await killing;
  assert.ok(killed > 0, `no SSH session was open during the restart; up output:\n${output.slice(-3000)}`);
  assert.notEqual(firstError, null, "up fails when its session drops");
  assert.match(output, /if this connection drops, the restart goes on here under the lock, and the next `pulumi up` proves what it left/, "up said what a dropped connection means before it dropped");

  // Right away, another stack wants the host: it must wait for (and name) the first stack,
  // and give up after its lockWaitSeconds without touching anything.
  const before = await sh(`sha256sum /etc/systemd/system/${UNIT}.service | cut -c1-64`);
  const second = await (await ws.stack("intruder")).up().then(
    () => null,
    (e: Error) => e.message,
  );
  assert.notEqual(second, null, "the other stack's up must not run while the first one's transaction holds the host");
  assert.match(second!, /is being reconfigured by stack "main"/);
  assert.match(second!, /Nothing was changed/);

  // The dropped transaction finished on its own: the first stack's new unit is what runs.
  for (let i = 0; (await hosts.ssh(host, `systemctl is-active --quiet ${UNIT}.service`)).code !== 0; i++) {
    assert.ok(i < 300, "the unit did not come back after the session dropped");
    await new Promise((r) => setTimeout(r, 100));
  }
  const installed = await sh(`sha256sum /etc/systemd/system/${UNIT}.service | cut -c1-64`);
  assert.match(await sh(`grep '^X-DFlash-Stack=' /etc/systemd/system/${UNIT}.service`), /=main$/, `the other stack's unit was installed (was ${before.slice(0, 12)}, now ${installed.slice(0, 12)})`);
  hosts.fault(HOST, "{}");

  // The next up of the first stack proves it, without another restart.
  const pid = await mainPid();
  const again = await (await ws.stack("main")).up();
  assert.equal(again.summary.result, "succeeded");
  assert.equal(await mainPid(), pid, "no second restart");
  assert.equal((await serving()).speculative_ddtree_budget, 16);
});
