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
  let stepUnits = "";
  let killing: Promise<void> | undefined;
  const first = (await ws.stack("main")).up({
    onOutput: (s) => {
      output += s;
      // The restart is a host step: a transient systemd service, not part of the session.
      if (!killing && /waiting for GPU memory to be released/.test(output)) killing = sh("systemctl list-units --no-legend --plain 'dflash-step-*'").then((units) => ((stepUnits = units), hosts.dropSessions(host))).then((n) => void (killed = n));
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
  assert.match(stepUnits, /^dflash-step-sglang-k26-restart-\d+\.service\s+loaded active running dflash-sglang: restart of sglang-k26 for stack main$/m, "the restart ran as a transient unit");
  assert.match(output, /on the host, as dflash-step-sglang-k26-restart-\d+: if this connection drops/);

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

// Issue 18, sequence 3: only the restart mode shielded itself from a dropped session. A
// rollback whose session dropped died on its next line of output (SIGPIPE) after it had
// stopped the failed server and before it started the previous one: nothing served.
test("the session of a rollback drops: the rollback finishes on the host, and the previous configuration serves by itself", async () => {
  const previous = (await serving()).speculative_ddtree_budget;
  // The failed server's GPUs free slowly: the rollback is inside its GPU wait, whose progress lines
  // (every 5 s) are its output after the session drops.
  hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 }, gpuReleaseDelaySeconds: 12 }));
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b12t6-w2048")["dflash-sglang:speculative"]);
  let output = "";
  let killed = 0;
  let killing: Promise<void> | undefined;
  try {
    const error = await (await ws.stack("main")).up({
      onOutput: (s) => {
        output += s;
        if (!killing && /rolling back/.test(output)) killing = hosts.dropSessions(host).then((n) => void (killed = n));
      },
    }).then(
      () => null,
      (e: Error) => e.message,
    );
    await killing;
    assert.notEqual(error, null, "the new configuration died of OOM");
    assert.ok(killed > 0, `no SSH session was open during the rollback; up output:\n${output.slice(-3000)}`);
    // The rollback goes on on the host: the previous configuration comes back by itself.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const r = await hosts.ssh(host, `curl -s -m 2 http://${host.address}:${host.sglangPort}/server_info`);
      const budget = r.code === 0 && r.stdout.startsWith("{") ? JSON.parse(r.stdout).speculative_ddtree_budget : undefined;
      if (budget === previous) break;
      assert.ok(Date.now() < deadline, `the previous configuration (budget ${previous}) did not come back after the rollback's session dropped (serving: ${budget ?? "nothing"}; unit ${(await hosts.ssh(host, `systemctl is-active ${UNIT}.service`)).stdout.trim()})`);
      await new Promise((res) => setTimeout(res, 250));
    }
  } finally {
    hosts.fault(HOST, "{}");
    ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  }
});

// Issue 19, Done means: a dropped session during remove. The destroy's remove is a host step:
// with a request in flight (the drain takes a while), every session drops; the remove still
// drains, stops and removes the unit on the host, the request completes, and the next destroy
// finds nothing left to do. Runs last: it removes the stack's unit.
test("the session of a destroy's remove drops: the remove finishes on the host, the request in flight completes, the next destroy changes nothing", async () => {
  // The server's scheduler holds the request (the hang fault, matched to this server) until the
  // sessions were dropped: the remove's drain waits for it however slow the machine, and its
  // host step is still running when looked for. Let go, the request runs to its end.
  const budget = JSON.parse(await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget;
  hosts.fault(HOST, JSON.stringify({ hangGenerations: true, match: { speculative_ddtree_budget: budget } }));
  const inFlight = fetch(`http://${host.address}:${host.sglangPort}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: 1500, stream: true, ignore_eos: true }),
  }).then(async (res) => {
    let text = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
    return text.includes("data: [DONE]");
  });
  let output = "";
  let killed = 0;
  let destroying = true;
  const stack = await ws.stack("main");
  // The engine shows progress lines late: the host says when the remove runs (its host step).
  const killing = (async () => {
    while (destroying) {
      if (await sh("systemctl list-units --state=active --no-legend --plain 'dflash-step-sglang-k26-remove-*'")) {
        killed = await hosts.dropSessions(host);
        hosts.fault(HOST, "{}");
        return;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  await stack.destroy({ onOutput: (s) => (output += s) }).catch(() => undefined).finally(() => (destroying = false));
  await killing;
  hosts.fault(HOST, "{}");
  assert.ok(killed > 0, `no SSH session was open during the remove; destroy output:\n${output.slice(-3000)}`);
  assert.equal(await inFlight, true, "the request in flight when the session dropped completed");
  // The remove goes on on the host: the unit and its secret files go.
  const deadline = Date.now() + 60_000;
  while ((await hosts.ssh(host, `test -e /etc/systemd/system/${UNIT}.service || systemctl list-units --state=active --no-legend 'dflash-step-*' | grep -q .`)).code === 0) {
    assert.ok(Date.now() < deadline, "the remove did not finish on the host after its session dropped");
    await new Promise((res) => setTimeout(res, 250));
  }
  assert.equal(await sh(`systemctl is-active ${UNIT}.service; ls /etc/dflash-sglang 2>/dev/null; true`), "inactive");
  const again = await stack.destroy({ runProgram: true });
  assert.equal(again.summary.result, "succeeded");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service; ls /etc/dflash-sglang /etc/systemd/system/${UNIT}.service 2>/dev/null; true`), "inactive", "the second destroy left the host as the first one's remove did");
});
