// Rotating a secret is a reconfiguration (issue 12, scenario 1): change only `apiKey` (or
// `hfToken`) with `config set --secret`, and `up` restarts the server, which then serves
// with the new value only. The earlier version saw the same unit, restarted nothing, and
// its probes (already sending the new key) got 401 from the old process until the deadline.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";

const HOST = `secrets-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

async function sh(cmd: string): Promise<string> {
  const r = await hosts.ssh(host, cmd);
  assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
  return r.stdout.trim();
}
const mainPid = async () => Number(await sh(`systemctl show -p MainPID --value ${UNIT}.service`));
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
