// Issue 41, item 4: state that must outlive a reboot is on disk. The "removed at" mark of a
// unit lived in /run, which a reboot clears: after a first install of stack A, stack B's `up`
// on the same unit, B's destroy and a reboot, A's `up` read the host as A's first install
// ("no unit") and changed nothing ({"same":9}) while the unit was inactive. The mark is now in
// /var/lib/dflash-sglang-removed, and readers take an older version's mark in /run too.
//
// The reboot is the simulated host's own (hosts.reboot), both kinds: its orderly shutdown,
// and a power cut (every process SIGKILLed at once). Either way /run is a fresh tmpfs, so
// /run/dflash-sglang goes, and what is on disk stays.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";

const HOST = `reboot-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host, UNIT);
const config = (stack: string) => ({
  ...readRepoStackConfig(stack),
  ...simHostConfig(host, UNIT),
  "dflash-sglang:safety": { stableSeconds: 1 },
  "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
  "dflash-sglang:benchmark": { enabled: false },
});
/** A reboot of the host while nothing of ours runs (checked); /run/dflash-sglang is gone after it (checked). */
const reboot = async (kind: hosts.RebootKind) => {
  assert.equal(await sh(`systemctl is-active ${UNIT}.service || true`), "inactive");
  assert.equal(await sh("test -d /run/dflash-sglang && echo present"), "present", "the steps before left their /run state");
  await hosts.reboot(HOST, { kind });
  assert.equal(await sh("test -d /run/dflash-sglang && echo present || echo gone"), "gone", "a boot starts with an empty /run");
};

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({ a: config("b8t4-w2048"), b: config("b16t4-w2048") });
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

for (const kind of hosts.REBOOT_KINDS) {
  test(`up of A (a first install, the first time), B up on the same unit, destroy B, a reboot (${kind}), up of A: A's unit is back and serving`, async () => {
    const a = await ws.stack("a");
    const b = await ws.stack("b");
    assert.equal((await a.up()).summary.result, "succeeded");
    assert.equal((await b.up()).summary.result, "succeeded");
    await b.destroy();
    await reboot(kind);
    const up = await a.up();
    assert.equal(up.summary.result, "succeeded");
    assert.notDeepEqual(Object.keys(up.summary.resourceChanges ?? {}), ["same"], `up of A changed nothing: ${JSON.stringify(up.summary.resourceChanges)}`);
    assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active");
    assert.equal(JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget, 8, "A's configuration serves");
  });
}

test("an older version's mark in /run (a host not rebooted since it ran) is still read", async () => {
  const a = await ws.stack("a");
  const b = await ws.stack("b");
  assert.equal((await b.up()).summary.result, "succeeded");
  await b.destroy();
  // As an older version left it: the mark in /run only.
  await sh(`mkdir -p /run/dflash-sglang/removed && mv /var/lib/dflash-sglang-removed/${UNIT} /run/dflash-sglang/removed/${UNIT}`);
  const up = await a.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active");
});
