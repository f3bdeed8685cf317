// Issue 38, item 2: every configuration installed on a host is a generation, kept whole under
// /var/lib/dflash-sglang/<unit>/generations/N (host/generations.sh), with `current` and
// `known-good` links. A rollback after a change of unit name, port and API key at once puts
// the previous generation back whole (its port, its key, its helpers), under the new name;
// after 4 more changes the host keeps the known-good and the newest 3 (safety.keepGenerations);
// the stack output `generation` and the readiness step name the generation serving; destroy
// removes them all. The branches (pruning, the rollback's choice, adoption of an earlier
// version's record) are bash tests: host/generations.bats.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";

const HOST = `generations-${process.pid}`;
const FIRST = "sglang-gen";
const SECOND = "sglang-gen2";
const KEY_A = `sk-gen-a-${process.pid}`;
const KEY_B = `sk-gen-b-${process.pid}`;
const STATE = "/var/lib/dflash-sglang";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host, FIRST);
const on = (port: number, key: string) => `-H 'Authorization: Bearer ${key}' http://${host.address}:${port}`;
const status = (port: number, key: string) => sh(`curl -s -o /dev/null -w '%{http_code}' ${on(port, key)}/v1/models`);
const budget = async (port: number, key: string) => JSON.parse(await sh(`curl -s ${on(port, key)}/server_info`)).speculative_ddtree_budget as number;
/** The generation numbers kept for `unit`, newest first, and where its links point. */
const generations = async (unit: string) => ({
  kept: (await sh(`ls ${STATE}/${unit}/generations | sort -rn`)).split("\n").map(Number),
  current: Number((await sh(`readlink ${STATE}/${unit}/current`)).replace("generations/", "")),
  knownGood: Number((await sh(`readlink ${STATE}/${unit}/known-good`)).replace("generations/", "")),
});
const record = async (unit: string, n: number) => JSON.parse(await sh(`cat ${STATE}/${unit}/generations/${n}/generation.json`)) as Record<string, unknown>;

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 1, warmupSeconds: 0.2 } });
  ws = simWorkspace({
    main: {
      ...readRepoStackConfig("b8t4-w2048"),
      ...simHostConfig(host, FIRST),
      "dflash-sglang:safety": { stableSeconds: 0.5 },
      "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 20 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  await (await ws.stack("main")).setConfig("dflash-sglang:apiKey", { value: KEY_A, secret: true });
  const up = await (await ws.stack("main")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(up.outputs.generation.value, 1);
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("a change of unit name, port and API key whose server dies at load: the previous generation comes back whole, under the new name", async () => {
  const port = host.sglangPort;
  const stack = await ws.stack("main");
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, SECOND)["dflash-sglang:service"] as object), port: port + 1 });
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  await stack.setConfig("dflash-sglang:apiKey", { value: KEY_B, secret: true });
  hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 16 } }));
  let message: string;
  try {
    message = await failedUp(stack, "the new configuration was to die of OOM");
  } finally {
    hosts.fault(HOST, "{}");
  }
  assert.match(message, /CUDA out of memory/);
  // Carried to the new name as its generation 1, the failed one is 2; the rollback names 1.
  assert.match(message, /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving on 127\.0\.0\.\d+ as generation 1 /);
  assert.doesNotMatch(message, /ROLLBACK FAILED|HOST DOWN/);
  // Whole: its port, its key, its arguments.
  assert.equal(await status(port, KEY_A), "200", "the previous generation serves on its own port with its own key");
  assert.equal(await status(port, KEY_B), "401");
  assert.equal(await budget(port, KEY_A), 8);
  assert.equal(await sh(`systemctl is-active ${SECOND}.service`), "active");
  assert.equal((await hosts.ssh(host, `test -e /etc/systemd/system/${FIRST}.service`)).code, 1, "the old name is gone");
  const g = await generations(SECOND);
  assert.deepEqual(g, { kept: [2, 1], current: 1, knownGood: 1 });
  assert.deepEqual(
    { ...(await record(SECOND, 1)), createdAt: "" },
    { generation: 1, stack: "main", unit: SECOND, port, unitHash: (await sh(`sha256sum ${STATE}/${SECOND}/generations/1/unit.service`)).slice(0, 64), createdAt: "", renamedFrom: FIRST, renamedFromGeneration: 1 },
  );
  assert.equal((await record(SECOND, 2)).port, port + 1, "the failed generation is kept, with what it was");
  // The live files are the generation's.
  assert.equal(await sh(`cmp /etc/systemd/system/${SECOND}.service ${STATE}/${SECOND}/generations/1/unit.service && cmp /etc/dflash-sglang/${SECOND}.secrets.yaml ${STATE}/${SECOND}/generations/1/secrets/${SECOND}.secrets.yaml && echo same`), "same");

  // With the fault gone, the next up goes on to the new configuration: generation 3.
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(up.outputs.generation.value, 3);
  assert.match(up.stdout, /proven: generation 3 on 127\.0\.0\.\d+ is the known-good configuration now/);
  assert.equal(await status(port + 1, KEY_B), "200");
  assert.equal(await budget(port + 1, KEY_B), 16);
});

test("after 4 more changes the host keeps the known-good and the newest 3 (safety.keepGenerations); preview names the generation serving", async () => {
  const stack = await ws.stack("main");
  const budgets = ["b8t4-w2048", "b16t4-w2048"];
  let last = 0;
  for (let i = 0; i < 4; i++) {
    ws.setStackConfig("main", "speculative", readRepoStackConfig(budgets[i % 2])["dflash-sglang:speculative"]);
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
    last = up.outputs.generation.value as number;
  }
  assert.equal(last, 7);
  assert.deepEqual(await generations(SECOND), { kept: [7, 6, 5], current: 7, knownGood: 7 });
  // A change's preview names the generation that serves now, the one `up` replaces.
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b8t4-w2048")["dflash-sglang:speculative"]);
  const preview = await stack.preview();
  assert.match(preview.stdout, new RegExp(`${SECOND} on 127\\.0\\.0\\.\\d+ runs the unit of this stack \\([0-9a-f]{12}\\) as generation 7; \`up\` replaces it`));
  // Fewer kept: the setting prunes at the next change.
  ws.setStackConfig("main", "safety", { stableSeconds: 0.5, keepGenerations: 1 });
  assert.equal((await stack.up()).summary.result, "succeeded");
  assert.deepEqual(await generations(SECOND), { kept: [8], current: 8, knownGood: 8 });
});

test("destroy removes every generation with the unit", async () => {
  await (await ws.stack("main")).destroy();
  assert.equal(await sh(`ls -A ${STATE} 2>/dev/null | wc -l`), "0");
  assert.equal(await sh(`ls /etc/dflash-sglang 2>/dev/null | wc -l`), "0");
});
