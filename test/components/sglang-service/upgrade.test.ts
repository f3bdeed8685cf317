// Upgrading this tool on a live host: a stack deployed by an earlier version goes through
// this version's `up` without a restart and without losing its unit, then reconfigures as
// usual. Both versions are real: the earlier one runs from a git worktree of its revision.
// Two earlier versions: f93069e (restart and readiness in one dynamic `sglang-rollout`)
// and 91f319b (the @pulumi/command shape whose commands' deletes did the teardown).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { Checkout, checkoutRevision } from "../../../lib/checkout";
import { hostShell } from "../../support/hostShell";

const UNIT = "sglang-k26";

for (const PREVIOUS of ["f93069e", "91f319b"]) describe(`upgrading from ${PREVIOUS}`, () => {
  const HOST = `upgrade-${PREVIOUS}-${process.pid}`;
  let host: hosts.HostInfo;
  let previous: Checkout;
  let ws: SimWorkspace;

  const config = (stack: string) => ({ ...readRepoStackConfig(stack), ...simHostConfig(host, UNIT), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": { enabled: false } });

  const { sh, mainPid } = hostShell(() => host, UNIT);

  before(async () => {
    host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
    previous = checkoutRevision(PREVIOUS);
    ws = simWorkspace({ main: config("b8t4-w2048") }, { projectRoot: previous.root });
    const up = await (await ws.stack("main")).up();
    assert.equal(up.summary.result, "succeeded");
    const types: string[] = (await (await ws.stack("main")).exportStack()).deployment.resources.map((r: { urn: string }) => r.urn.split("::").slice(-2).join("::"));
    if (PREVIOUS === "f93069e") assert.ok(types.includes("dflash:sglang:Service$pulumi-nodejs:dynamic:Resource::sglang-rollout"), `the previous version deployed its rollout resource: ${types.join(", ")}`);
  });

  after(async () => {
    await hosts.stop(HOST);
    ws?.cleanup();
    previous?.remove();
  });

  test("this version's up on a stack of the previous one: no restart, the unit stays, earlier resources adopted or retired", async () => {
    const pid = await mainPid();
    const unit = await sh(`cat /etc/systemd/system/${UNIT}.service`);
    // Same workspace and state, this checkout's program.
    const now = simWorkspace({}, { dir: ws.dir });
    let output = "";
    const up = await (await now.stack("main")).up({ onOutput: (s) => (output += s) });
    assert.equal(up.summary.result, "succeeded");
    assert.match(output, /already runs this unit with these secrets \(pid \d+\); nothing to restart/);
    assert.equal(await mainPid(), pid, "upgrading the tool did not restart the server");
    assert.equal(await sh(`cat /etc/systemd/system/${UNIT}.service`), unit, "the unit is still installed, unchanged");
    assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active");
    // The previous version's known-good record (last-good.*), which is what serves, became
    // generation 1 (adopted), proven again now: known-good and current (host/generations.sh).
    const state = `/var/lib/dflash-sglang/${UNIT}`;
    assert.match(await sh(`cat ${state}/generations/1/generation.json`), /"adoptedFrom":"last-good"/);
    assert.equal(await sh(`readlink ${state}/known-good; readlink ${state}/current; ls ${state}/generations`), "generations/1\ngenerations/1\n1");
    assert.equal(await sh(`cmp ${state}/known-good/unit.service /etc/systemd/system/${UNIT}.service && echo same`), "same");
    assert.equal(await sh(`ls ${state} | grep -c '^last-good' || true`), "0", "the old record's files are gone");
    const names: string[] = (await (await now.stack("main")).exportStack()).deployment.resources.map((r: { urn: string }) => r.urn.split("::").slice(-2).join("::"));
    assert.ok(names.includes("dflash:sglang:Service$command:remote:Command::sglang-restart"), names.join(", "));
    assert.ok(names.includes("dflash:sglang:Service$pulumi-nodejs:dynamic:Resource::sglang-ready"), names.join(", "));
    assert.ok(!names.some((n) => n.endsWith("::sglang-rollout")), "the rollout was adopted as sglang-ready, not left behind");
    assert.ok(names.includes("dflash:sglang:Service$pulumi-nodejs:dynamic:Resource::sglang-host"), names.join(", "));
  });

  test("after the upgrade, a reconfiguration works as usual", async () => {
    const now = simWorkspace({}, { dir: ws.dir });
    now.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
    const up = await (await now.stack("main")).up();
    assert.equal(up.summary.result, "succeeded");
    assert.equal(JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget, 16);
  });
});
