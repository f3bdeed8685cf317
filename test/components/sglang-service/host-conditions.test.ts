// Issue 60: hosts as teams have them. A read-only /usr/local (an image-based or hardened host):
// a change failed while installing the unit's helpers after the old server was stopped, and the
// rollback failed the same way (HOST DOWN); preflight now checks every folder a restart writes.
// Hosts whose own locale is not C. On a host whose locale writes 0,2 for 0.2
// (de_DE), the restart's result line was invalid JSON (`"drainSeconds":0,2`): a healthy change
// failed, never proven, and so did every later `up`. On a Turkish host ([a-z] has no i),
// preflight read SGLang's flags from `--help` cut short (`--speculat`) and refused every
// configuration. Every host script now sets its own locale (hostScript.ts HOST_LOCALE); these
// run the real engine, SSH and systemd against simulated hosts with those locales.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { streamChat } from "../../support/streamChat";

const UNIT = "sglang-k26";
const LOCALES = { de: "de_DE.UTF-8", tr: "tr_TR.UTF-8" } as const;
const running: { host: hosts.HostInfo; ws: SimWorkspace }[] = [];

const config = (host: hosts.HostInfo, stack: string) => ({
  ...readRepoStackConfig(stack),
  ...simHostConfig(host, UNIT),
  "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: 120 },
  "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
  "dflash-sglang:benchmark": { enabled: false },
});

/** A host of `locale` serving b8t4-w2048, and its workspace. */
async function hostWith(key: keyof typeof LOCALES): Promise<{ host: hosts.HostInfo; ws: SimWorkspace }> {
  const host = await hosts.start(`locale-${key}-${process.pid}`, { locale: LOCALES[key], sglang: { profile: "ddtree-fork", loadSeconds: 1, warmupSeconds: 0.3 } });
  const ws = simWorkspace({ main: config(host, "b8t4-w2048") });
  running.push({ host, ws });
  return { host, ws };
}

let de: { host: hosts.HostInfo; ws: SimWorkspace };
let tr: { host: hosts.HostInfo; ws: SimWorkspace };

before(async () => {
  [de, tr] = await Promise.all([hostWith("de"), hostWith("tr")]);
});

after(async () => {
  await Promise.all(running.map((r) => hosts.stop(r.host.name)));
  for (const r of running) r.ws.cleanup();
});

test("the hosts' own sessions do have those locales (what the tool meets)", async () => {
  const say = async (h: hosts.HostInfo, cmd: string) => (await hosts.ssh(h, cmd)).stdout.trim();
  assert.equal(await say(de.host, "printf '%.1f' 1"), "1,0");
  assert.equal(await say(tr.host, "echo speculative | grep -oE '[a-z]+'"), "speculat\nve");
});

test("de_DE: a change with requests in flight is proven and its timings read (0,2 would have been invalid JSON)", async () => {
  const stack = await de.ws.stack("main");
  assert.equal((await stack.up()).summary.result, "succeeded");
  de.ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  const streams = [1, 2].map(() => streamChat(`http://${de.host.address}:${de.host.sglangPort}`, 2000));
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.deepEqual(await Promise.all(streams), [true, true]);
  const t = up.outputs.restartTimings.value;
  for (const k of ["drainSeconds", "stopSeconds", "gpuReleaseSeconds"]) assert.equal(typeof t[k], "number", JSON.stringify(t));
  assert.ok(t.drainSeconds > 0, `the drain had requests to wait for: ${JSON.stringify(t)}`);
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_budget, 16);
});

test("tr_TR: preflight reads SGLang's flags whole, and the configuration deploys", async () => {
  const stack = await tr.ws.stack("main");
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded", up.stdout);
  assert.doesNotMatch(up.stdout, /--speculat\b|has no DDTree/);
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_budget, 8);
});

test("a read-only /usr/local: preflight refuses the change before anything stops, naming the folder; the server keeps serving", async () => {
  // de's host serves b16t4-w2048 (the test above); its /usr/local becomes read-only.
  const sh = async (cmd: string) => {
    const r = await hosts.ssh(de.host, cmd);
    assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
    return r.stdout.trim();
  };
  const pid = await sh(`systemctl show -p MainPID --value ${UNIT}.service`);
  await sh("mount --bind /usr/local /usr/local && mount -o remount,bind,ro /usr/local");
  try {
    de.ws.setStackConfig("main", "speculative", readRepoStackConfig("b8t4-w2048")["dflash-sglang:speculative"]);
    const error = await (await de.ws.stack("main")).up().then(
      () => "",
      (e: Error) => e.message,
    );
    assert.match(error, /Preflight failed for sglang-k26 \(stack main\) on \S+; nothing was stopped or changed/);
    assert.match(error, /\/usr\/local\/lib\/dflash-sglang \(the unit's helper scripts\) cannot be written: \/usr\/local\/lib\/dflash-sglang is on a read-only file system \(mounted at \/usr\/local\)/);
    assert.doesNotMatch(error, /HOST DOWN|Rolled back/);
    assert.equal(await sh(`systemctl show -p MainPID --value ${UNIT}.service`), pid, "the server was never stopped");
    assert.equal(JSON.parse(await sh(`curl -s http://${de.host.address}:${de.host.sglangPort}/server_info`)).speculative_ddtree_budget, 16);
  } finally {
    await sh("umount /usr/local");
  }
  // Writable again: the same change goes through.
  assert.equal((await (await de.ws.stack("main")).up()).summary.result, "succeeded");
});
