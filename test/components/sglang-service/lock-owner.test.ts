// Issue 41, item 6: the host lock belongs to root. It was a 0644 file in a 0755 folder, so any
// local user could flock it: `nobody` holding it refused every `up` as "another deployment",
// and taken while readiness waited on a hung load it held up the rollback (the hung server
// stayed, nothing served, no "HOST DOWN" line). Now the folder is 0700 and its files 0600
// (created so; an older version's rights put right), and a lock held by a process that is
// not ours is named with its pid, user and command.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";

const HOST = `lockowner-${process.pid}`;
const UNIT = "sglang-k26";
const RUN = "/run/dflash-sglang";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host, UNIT);
const budget = async () => JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget as number;
const speculative = (stack: string) => readRepoStackConfig(stack)["dflash-sglang:speculative"];
/**
 * `nobody` tries to hold the lock for 300 s in a transient unit of ours (stopped by name: the
 * test started it); "held" if it got it. Awaited, not slept on: until its flock(1) (the unit's
 * main process) holds a lock, or the unit has ended (refused), at most 30 s.
 */
const nobodyTakesLock = async (unit: string) => {
  const u = `${unit}.service`;
  await sh(
    `systemd-run --quiet --collect --unit=${unit} --uid=nobody flock -n ${RUN}/host.lock sleep 300; ` +
      `for _ in $(seq 300); do systemctl is-active -q ${u} || break; grep -qs '^lock:.*FLOCK' /proc/"$(systemctl show -p MainPID --value ${u})"/fdinfo/* && break; sleep 0.1; done`,
  );
  return (await sh(`systemctl is-active ${u} || true`)) === "active" ? "held" : "refused";
};
const stopUnit = (unit: string) => sh(`systemctl stop ${unit}.service 2>/dev/null; true`);

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({
    main: {
      ...readRepoStackConfig("b8t4-w2048"),
      ...simHostConfig(host, UNIT),
      "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: 5 },
      "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("the lock's folder is root's alone (0700, files 0600): nobody cannot take the lock, and up goes on", async () => {
  assert.equal(await sh(`stat -c '%U %a' ${RUN}`), "root 700");
  assert.equal(await sh(`find ${RUN} -maxdepth 1 -type f ! -perm 0600 | sort`), "", "every file in the folder is 0600");
  assert.equal(await nobodyTakesLock("dflash-test-nobody-1"), "refused", "a local user other than root must not be able to take the host lock");
  ws.setStackConfig("main", "speculative", speculative("b16t4-w2048"));
  try {
    assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
  } finally {
    await stopUnit("dflash-test-nobody-1");
  }
  assert.equal(await budget(), 16);
});

test("taken while readiness waits on a hung load: nobody cannot hold up the rollback, which brings the previous configuration back", async () => {
  hosts.fault(HOST, JSON.stringify({ hangDuringLoad: true, match: { speculative_ddtree_budget: 12 } }));
  ws.setStackConfig("main", "speculative", speculative("b12t6-w2048"));
  ws.setStackConfig("main", "timeouts", { readySeconds: 8, pollMs: 250 });
  let taking: Promise<string> | undefined;
  let message = "";
  try {
    message = await failedUp(await ws.stack("main"), "the new configuration's load hangs", {
      onOutput: (s) => {
        if (!taking && /loading weights/.test(s)) taking = nobodyTakesLock("dflash-test-nobody-2");
      },
    });
  } finally {
    hosts.fault(HOST, "{}");
    ws.setStackConfig("main", "speculative", speculative("b16t4-w2048"));
    ws.setStackConfig("main", "timeouts", { readySeconds: 30, pollMs: 250 });
  }
  assert.ok(taking, "the load was never seen");
  const taken = await taking;
  await stopUnit("dflash-test-nobody-2");
  assert.equal(taken, "refused", "nobody got the host lock during readiness");
  assert.match(message, /was not serving the configuration within 8 s/);
  assert.match(message, /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving/);
  assert.equal(await budget(), 16, "the previous configuration serves");
});

test("a host with an older version's rights (0755 folder, 0644 files) is put right; a lock nobody took before is named with its owner", async () => {
  await sh(`chmod 0755 ${RUN} && chmod 0644 ${RUN}/host.lock`);
  assert.equal(await nobodyTakesLock("dflash-test-nobody-3"), "held", "the older rights let nobody take the lock (the upgrade's starting point)");
  ws.setStackConfig("main", "speculative", speculative("b8t4-w2048"));
  try {
    const message = await failedUp(await ws.stack("main"), "nobody holds the lock");
    assert.match(message, /FAILED: the deployment lock of 127\.0\.0\.\d+ is held by pid \d+ of user nobody \(\/usr\/bin\/flock -n \/run\/dflash-sglang\/host\.lock sleep 300\), which is not a dflash-sglang deployment; waited 5 s/);
    assert.doesNotMatch(message, /another deployment/);
    assert.equal(await sh(`stat -c '%a' ${RUN} ${RUN}/host.lock`), "700\n600", "the refused up already put the rights right");
  } finally {
    await stopUnit("dflash-test-nobody-3");
  }
  assert.equal(await nobodyTakesLock("dflash-test-nobody-4"), "refused");
  await stopUnit("dflash-test-nobody-4");
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
  assert.equal(await budget(), 8);
});
