// Replacement order (issue 12, scenario 4): a change of where the unit lives (its name, or
// the address/port `up` reaches the host by) must end with the new configuration serving
// and the old unit gone. The earlier version created the new resource before deleting the
// old one: on a renamed unit the new server waited for GPUs the old one still held and
// `up` failed; on another name of the same machine the old resource's delete stopped the
// unit the new one had just proven. Both tests fail on f93069e. The last three fail on
// e18f70e, where a failing configuration after such a move left the host down: a renamed
// unit (or the same machine reached by another sshd port) had no known-good record left to
// roll back to (HOST DOWN), and after a failed change of service.port the rollback probed
// the new port and said "ROLLBACK FAILED, HOST DOWN" while the previous configuration served.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";

const HOST = `replace-${process.pid}`;
const FIRST = "sglang-k26";
const SECOND = "sglang-k26b";
const THIRD = "sglang-k26.c";
/** A second sshd port on the host's own address: "another name of the same machine". */
const ALIAS_PORT = 2222;
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host);
const mainPid = async (unit: string) => (await hosts.ssh(host, `systemctl show -p MainPID --value ${unit}.service`)).stdout.trim();
const isActive = async (unit: string) => (await hosts.ssh(host, `systemctl is-active ${unit}.service`)).stdout.trim();
const exists = async (p: string) => (await hosts.ssh(host, `test -e ${p}`)).code === 0;
const serving = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`));
const ROLLED_BACK = /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving/;
/** THIRD as a regular expression. */
const THIRD_RE = THIRD.replace(".", "\\.");

/**
 * An `up` whose new configuration (speculative budget `budget`) crashes while loading: its
 * error message and its output. The fault is cleared afterwards.
 */
async function failingUp(budget: number): Promise<{ message: string; output: string }> {
  hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: budget } }));
  let output = "";
  try {
    await (await ws.stack("main")).up({ onOutput: (s) => (output += s) });
    return { message: "", output };
  } catch (e) {
    return { message: (e as Error).message, output };
  } finally {
    hosts.fault(HOST, "{}");
  }
}

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
  const pid = await mainPid(FIRST);
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await isActive(FIRST), "active", "the unit is serving after up");
  // Only the way to the machine changed: the old resource's delete leaves the unit running,
  // and the restart finds it already running this unit (an engine killed between the two
  // used to leave the unit stopped with nothing started: fault campaign, seed 3001).
  assert.equal(await mainPid(FIRST), pid, "the server was neither stopped nor restarted");
  assert.match(up.stdout, new RegExp(`${FIRST} on ${host.address.replace(/\./g, "\\.")} is now reached by another address or port: left running|now reached by another address or port, and left it running`));
  assert.equal((await serving()).speculative_ddtree_budget, 8);
  assert.equal(await exists(`/etc/systemd/system/${FIRST}.service`), true);
  // And the stack is at rest: nothing more to do.
  const again = await (await ws.stack("main")).up();
  assert.deepEqual(Object.keys(again.summary.resourceChanges ?? {}), ["same"]);
});

// Issue 18, sequence 2, a rename together with a flag the host lacks: replayed with every invariant of the fault campaign by test/campaign/cases/issue-18-seq2-rename-and-unknown-flag.json
// (test/campaign/cases.test.ts), so it is not also a scenario here.

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

test("a renamed unit whose new configuration fails: the previous configuration comes back, under the new name", async () => {
  // The new configuration crashes while loading; the unit is renamed at the same time.
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, THIRD)["dflash-sglang:service"] as object) });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b4t4-w2048")["dflash-sglang:speculative"]);
  const { message, output } = await failingUp(4);
  assert.match(message, /CUDA out of memory/);
  assert.match(message, ROLLED_BACK);
  assert.match(output, new RegExp(`kept the previous configuration \\(stack main, unit [0-9a-f]{12}\\) as the known-good of ${THIRD_RE}, the unit's new name`));
  assert.equal(await isActive(THIRD), "active");
  assert.equal((await serving()).speculative_ddtree_budget, 16, "the previous configuration serves, under the new name");
  assert.match(await sh(`systemctl cat ${THIRD}.service`), new RegExp(`^SyslogIdentifier=${THIRD_RE}$`, "m"));
  for (const p of [`/etc/systemd/system/${SECOND}.service`, `/var/lib/dflash-sglang/${SECOND}`]) {
    assert.equal(await exists(p), false, `${p} is left on the host`);
  }

  // With the fault gone, the next up goes on to the new configuration.
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal((await serving()).speculative_ddtree_budget, 4);
  assert.equal(up.outputs.unitName.value, THIRD);
});

test("a new port whose configuration fails: the previous configuration is proven back on its own port", async () => {
  const before = (simHostConfig(host, THIRD)["dflash-sglang:service"] as { port: number }).port;
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, THIRD)["dflash-sglang:service"] as object), port: before + 1 });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b8t4-w2048")["dflash-sglang:speculative"]);
  const { message } = await failingUp(8);
  assert.match(message, /CUDA out of memory/);
  assert.match(message, ROLLED_BACK);
  assert.equal((await serving()).speculative_ddtree_budget, 4, `the previous configuration serves on port ${before}`);
});

test("the same machine by another sshd port, with a configuration that fails: the known-good record stays, and the host comes back", async () => {
  ws.setStackConfig("main", "host", simHostConfig(host, THIRD)["dflash-sglang:host"]);
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, THIRD)["dflash-sglang:service"] as object) });
  const { message, output } = await failingUp(8);
  assert.match(output, new RegExp(`kept the previous configuration \\(stack main, unit [0-9a-f]{12}\\) as the known-good of ${THIRD_RE}, now reached by another address or port`));
  assert.match(message, ROLLED_BACK);
  assert.equal((await serving()).speculative_ddtree_budget, 4);
});
