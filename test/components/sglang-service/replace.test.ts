// Replacement order (issue 12, scenario 4): a change of where the unit lives (its name, or
// the address/port `up` reaches the host by) must end with the new configuration serving
// and the old unit gone. The earlier version created the new resource before deleting the
// old one: on a renamed unit the new server waited for GPUs the old one still held and
// `up` failed; on another name of the same machine the old resource's delete stopped the
// unit the new one had just proven. Both tests fail on f93069e.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";

const HOST = `replace-${process.pid}`;
const FIRST = "sglang-k26";
const SECOND = "sglang-k26b";
/** A second sshd port on the host's own address: "another name of the same machine". */
const ALIAS_PORT = 2222;
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host);
const isActive = async (unit: string) => (await hosts.ssh(host, `systemctl is-active ${unit}.service`)).stdout.trim();
const exists = async (p: string) => (await hosts.ssh(host, `test -e ${p}`)).code === 0;
const serving = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`));

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({ main: { ...readRepoStackConfig("b8t4-w2048"), ...simHostConfig(host, FIRST), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 20 }, "dflash-sglang:benchmark": { enabled: false } } });
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
  assert.equal(await isActive(FIRST), "active");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("another name of the same machine (a second sshd port): up ends with the unit serving, not stopped by the old resource's delete", async () => {
  await hosts.addSshPort(host, ALIAS_PORT);
  const hostConfig = simHostConfig(host, FIRST)["dflash-sglang:host"] as Record<string, unknown>;
  ws.setStackConfig("main", "host", { ...hostConfig, port: ALIAS_PORT });
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await isActive(FIRST), "active", "the unit is serving after up");
  assert.equal((await serving()).speculative_ddtree_budget, 8);
  assert.equal(await exists(`/etc/systemd/system/${FIRST}.service`), true);
  // And the stack is at rest: nothing more to do.
  const again = await (await ws.stack("main")).up();
  assert.deepEqual(Object.keys(again.summary.resourceChanges ?? {}), ["same"]);
});

test("a renamed unit: up stops and removes the old unit first, then the new one serves", async () => {
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, SECOND)["dflash-sglang:service"] as object) });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await isActive(SECOND), "active");
  assert.equal((await serving()).speculative_ddtree_budget, 16, "the new unit serves the new configuration");
  assert.notEqual(await isActive(FIRST), "active");
  for (const p of [`/etc/systemd/system/${FIRST}.service`, `/etc/dflash-sglang/${FIRST}`, `/var/lib/dflash-sglang/${FIRST}`]) {
    assert.equal(await exists(p), false, `${p} is left on the host`);
  }
  assert.equal(up.outputs.unitName.value, SECOND);
});
