// Issue 38, item 3: `service.runAs` other than root with an API key. The secret files are
// root's (0600 in a 0700 folder), so a server running as `sglang` could not open its --config
// and the readiness gate could not read its headers: the unit failed at every start. systemd
// now hands both over as credentials (LoadCredential=), readable by that user only. A
// preflight names a user the host lacks before anything stops.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";

const HOST = `runas-${process.pid}`;
const UNIT = "sglang-k26";
const KEY_A = `sk-runas-a-${process.pid}`;
const KEY_B = `sk-runas-b-${process.pid}`;
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host, UNIT);
const status = (key: string) => sh(`curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' http://${host.address}:${host.sglangPort}/v1/models`);
const budget = async (key: string) => JSON.parse(await sh(`curl -s -H 'Authorization: Bearer ${key}' http://${host.address}:${host.sglangPort}/server_info`)).speculative_ddtree_budget as number;
/** The user the unit's main process runs as. */
const serverUser = () => sh(`ps -o user= -p "$(systemctl show -p MainPID --value ${UNIT}.service)"`);

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({
    main: {
      ...readRepoStackConfig("b16t4-w2048"),
      ...simHostConfig(host, UNIT),
      "dflash-sglang:safety": { stableSeconds: 1 },
      "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  const service = (ws.stackConfig("main")["dflash-sglang:service"] ?? {}) as Record<string, unknown>;
  ws.setStackConfig("main", "service", { ...service, runAs: "sglang" });
  await (await ws.stack("main")).setConfig("dflash-sglang:apiKey", { value: KEY_A, secret: true });
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("runAs names a user the host lacks: preflight refuses, naming it, before anything is installed", async () => {
  const message = await failedUp(await ws.stack("main"), "the user sglang does not exist yet");
  assert.match(message, /service\.runAs: the user sglang does not exist on 127\.0\.0\.\d+\. Create it \(useradd --system sglang\)/);
  assert.equal(await sh(`test -e /etc/systemd/system/${UNIT}.service && echo installed || echo absent`), "absent");
});

test("runAs sglang with an API key: up serves as sglang, which reads the key from its own credential copy only", async () => {
  await sh("useradd --system --no-create-home sglang");
  const stack = await ws.stack("main");
  assert.equal((await stack.up()).summary.result, "succeeded");
  assert.equal(await serverUser(), "sglang");
  assert.equal(await status(KEY_A), "200");
  assert.equal(await status("sk-wrong"), "401");
  // The live files stay root's alone; the server's user cannot read them, only systemd's copy.
  assert.equal(await sh(`stat -c '%U %a' /etc/dflash-sglang /etc/dflash-sglang/${UNIT}.secrets.yaml`), "root 700\nroot 600");
  assert.notEqual((await hosts.ssh(host, `runuser -u sglang -- cat /etc/dflash-sglang/${UNIT}.secrets.yaml`)).code, 0);
  const copy = await sh(`stat -c '%U %a' /run/credentials/${UNIT}.service/server-config.yaml`);
  assert.equal(copy, "sglang 400");
});

test("runAs sglang: a new key with a budget whose server dies of OOM rolls back to the previous configuration with its own key", async () => {
  const stack = await ws.stack("main");
  await stack.setConfig("dflash-sglang:apiKey", { value: KEY_B, secret: true });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b12t6-w2048")["dflash-sglang:speculative"]);
  hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 } }));
  let message = "";
  try {
    message = await failedUp(stack, "the new configuration was to die of OOM");
  } finally {
    hosts.fault(HOST, "{}");
    await stack.setConfig("dflash-sglang:apiKey", { value: KEY_A, secret: true });
    ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  }
  assert.match(message, /CUDA out of memory/);
  assert.match(message, /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving/);
  assert.doesNotMatch(message, /ROLLBACK FAILED|HOST DOWN/);
  assert.equal(await serverUser(), "sglang");
  assert.equal(await status(KEY_A), "200", "the previous configuration serves with its own key");
  assert.equal(await status(KEY_B), "401");
  assert.equal(await budget(KEY_A), 16);
});

test("runAs sglang: destroy stops the server and leaves no secret of the stack on the host", async () => {
  const stack = await ws.stack("main");
  let output = "";
  await stack.destroy({ onOutput: (s) => (output += s) });
  assert.match(output, /sglang-k26 drained, stopped and removed from 127\.0\.0\.\d+/);
  const left = await sh(`ls -d /etc/systemd/system/${UNIT}.service /var/lib/dflash-sglang /etc/dflash-sglang/${UNIT}.* /run/credentials/${UNIT}.service 2>/dev/null || true`);
  assert.equal(left, "", "nothing of the stack is left, the credential copies included");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service || true`), "inactive");
});
