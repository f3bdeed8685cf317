// The secret files through a stack's life (issue 12, scenarios 1, 2 and 7):
// - rotating a secret is a reconfiguration: change only `apiKey` (or `hfToken`) with
//   `config set --secret`, and `up` restarts the server, which then serves with the new
//   value only (the earlier version restarted nothing, and its probes, already sending the
//   new key, got 401 from the old process until the deadline);
// - a second stack's `up` while the first is mid-rollout changes nothing the first uses
//   (the earlier version's staging wrote the secret files outside the host's lock);
// - destroy drains, stops and leaves nothing of the stack on the host.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";

const HOST = `secrets-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh, mainPid } = hostShell(() => host, UNIT);
const status = (key: string) => sh(`curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' http://${host.address}:${host.sglangPort}/v1/models`);

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({ main: { ...readRepoStackConfig("b8t4-w2048"), ...simHostConfig(host, UNIT), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 }, "dflash-sglang:benchmark": { enabled: false } } });
  const stack = await ws.stack("main");
  await stack.setConfig("dflash-sglang:apiKey", { value: `sk-first-${process.pid}`, secret: true });
  await stack.setConfig("dflash-sglang:hfToken", { value: `hf_first${process.pid}`, secret: true });
  assert.equal((await stack.up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("a new API key alone: up restarts the server, which accepts the new key and refuses the old one", async () => {
  const stack = await ws.stack("main");
  const pid = await mainPid();
  const [first, second] = [`sk-first-${process.pid}`, `sk-second-${process.pid}`];
  assert.equal(await status(first), "200");
  await stack.setConfig("dflash-sglang:apiKey", { value: second, secret: true });
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.notEqual(await mainPid(), pid, "the server was restarted");
  assert.equal(await status(second), "200");
  assert.equal(await status(first), "401");
});

test("a new HF token alone: up restarts the server with it in its environment", async () => {
  const stack = await ws.stack("main");
  const pid = await mainPid();
  const token = `hf_second${process.pid}`;
  await stack.setConfig("dflash-sglang:hfToken", { value: token, secret: true });
  assert.equal((await stack.up()).summary.result, "succeeded");
  assert.notEqual(await mainPid(), pid, "the server was restarted");
  assert.equal(await sh(`tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value ${UNIT}.service)/environ | grep '^HF_TOKEN='`), `HF_TOKEN=${token}`);
});

test("the same secrets again: nothing restarts", async () => {
  const pid = await mainPid();
  const up = await (await ws.stack("main")).up();
  assert.deepEqual(Object.keys(up.summary.resourceChanges ?? {}), ["same"]);
  assert.equal(await mainPid(), pid);
});

test("a second stack's up while the first is mid-rollout changes nothing the first installs or probes with", async () => {
  const first = await ws.stack("main");
  const keyA = `sk-a-${process.pid}`;
  const keyB = `sk-b-${process.pid}`;
  await first.setConfig("dflash-sglang:apiKey", { value: keyA, secret: true });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  for (const [k, v] of Object.entries({ ...readRepoStackConfig("b4t4-w2048"), ...simHostConfig(host, UNIT), "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: 2 }, "dflash-sglang:benchmark": { enabled: false } })) {
    ws.setStackConfig("intruder", k.replace("dflash-sglang:", ""), v);
  }
  const second = await ws.stack("intruder");
  await second.setConfig("dflash-sglang:apiKey", { value: keyB, secret: true });
  // The first stack's new server (budget 16) holds its load until the second up was refused:
  // no race between a load time and how fast the second engine reaches the host.
  hosts.fault(HOST, JSON.stringify({ hangDuringLoad: true, match: { speculative_ddtree_budget: 16 } }));
  ws.setStackConfig("main", "timeouts", { readySeconds: 180, pollMs: 250 });
  try {
    let loading!: () => void;
    const isLoading = new Promise<void>((r) => (loading = r));
    const a = first.up({ onOutput: (s) => /loading weights/.test(s) && loading() });
    await isLoading;
    await assert.rejects(second.up(), /is being reconfigured by stack "main"/);
    hosts.fault(HOST, "{}");
    assert.equal((await a).summary.result, "succeeded", "the first stack's rollout was not disturbed");
  } finally {
    hosts.fault(HOST, "{}");
    ws.setStackConfig("main", "timeouts", { readySeconds: 30, pollMs: 250 });
  }
  assert.equal(await status(keyA), "200");
  assert.equal(await status(keyB), "401");
  assert.equal(JSON.parse(await sh(`curl -s -H 'Authorization: Bearer ${keyA}' http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget, 16);
  await second.destroy();
});

// Issue 18, sequence 1: the API key removed, or rotated, in the same change as a budget whose
// new configuration dies of CUDA OOM. The rollback started the previous unit, whose --config
// named the secret file the new configuration had deleted (ROLLBACK FAILED, host down), or
// brought it back with the new key. The known-good record now keeps the secrets it ran with.
// The key removed is also the regression case test/campaign/cases/issue-18-seq1-key-removed-and-crash.json,
// replayed with every invariant of the campaign; only the rotation is a scenario here.
const CHANGES: readonly ("removed" | "rotated")[] = ["rotated"];
for (const change of CHANGES) {
  test(`the API key ${change} with a new budget whose server dies of CUDA OOM: the previous configuration comes back with its own key, and no copy of a secret is left`, async () => {
    const stack = await ws.stack("main");
    const keyA = `sk-a-${process.pid}`;
    const keyC = `sk-c-${process.pid}`;
    if (change === "removed") await stack.removeConfig("dflash-sglang:apiKey");
    else await stack.setConfig("dflash-sglang:apiKey", { value: keyC, secret: true });
    ws.setStackConfig("main", "speculative", readRepoStackConfig("b12t6-w2048")["dflash-sglang:speculative"]);
    hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 } }));
    let message = "";
    try {
      message = await failedUp(stack, "the new configuration was to die of OOM");
    } finally {
      hosts.fault(HOST, "{}");
      await stack.setConfig("dflash-sglang:apiKey", { value: keyA, secret: true });
      ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
    }
    assert.match(message, /CUDA out of memory/);
    assert.match(message, /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving/);
    assert.doesNotMatch(message, /ROLLBACK FAILED|HOST DOWN/);
    assert.equal(await status(keyA), "200", "the previous configuration serves with its own key");
    assert.equal(await status(keyC), "401");
    assert.equal(JSON.parse(await sh(`curl -s -H 'Authorization: Bearer ${keyA}' http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget, 16);
    assert.equal(await sh(`ls /etc/dflash-sglang/ | grep -c 'dflash-new' || true`), "0", "no copy of a secret left beside the live ones");
  });
}

test("destroy drains what is in flight, stops the server and leaves nothing of the stack on the host; a second destroy changes nothing", async () => {
  const stack = await ws.stack("main");
  // ~180 tok/s: a 1500-token stream is still running when the drain starts.
  const res = await fetch(`http://${host.address}:${host.sglangPort}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer sk-a-${process.pid}` },
    body: JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: 1500, stream: true, ignore_eos: true }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  text += new TextDecoder().decode((await reader.read()).value); // its first tokens: it is in flight
  const stream = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text.includes("[DONE]");
      text += new TextDecoder().decode(value);
    }
  })().catch(() => false);
  let output = "";
  await stack.destroy({ onOutput: (s) => (output += s) });
  assert.equal(await stream, true, `the request in flight finished; it got: ${text.slice(-300)}`);
  assert.match(output, /sglang-k26 drained, stopped and removed from 127\.0\.0\.\d+/);
  const left = await sh(`ls -d /etc/systemd/system/${UNIT}.service /var/lib/dflash-sglang /usr/local/lib/dflash-sglang /etc/dflash-sglang/${UNIT}.* 2>/dev/null || true`);
  assert.equal(left, "", "nothing of the stack is left");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service || true`), "inactive");
  const again = await stack.destroy();
  assert.deepEqual(Object.keys(again.summary.resourceChanges ?? {}).filter((k) => k !== "same"), [], "a second destroy is a no-op");
});
