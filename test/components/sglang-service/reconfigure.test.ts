// The core promise, end to end: the real engine, real SSH, real systemd on a simulated
// GPU host. Tests run in order and share one host, as a user's stacks share one server.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { mergedConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { withSsh } from "../../../components/sglang-service/remote/ssh";
import { waitReady } from "../../../components/sglang-service/remote/steps";
import { expectedServerArgs, localServerUrl } from "../../../components/sglang-service/render";
import * as YAML from "yaml";
import * as fs from "node:fs";
import * as path from "node:path";
import { hostShell } from "../../support/hostShell";

const HOST = `core-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const stackConfig = (name: string) => ({ ...readRepoStackConfig(name), ...simHostConfig(host, UNIT), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": { enabled: false } });

const { sh, mainPid } = hostShell(() => host, UNIT);


/** The resolved deployment a stack of the workspace describes (for expected values). */
function deploymentOf(stackName: string) {
  const stackFile = YAML.parse(fs.readFileSync(path.join(ws.dir, "stacks", `Pulumi.${stackName}.yaml`), "utf8")).config;
  return parseDeployment(mergedConfig(stackFile), stackName);
}

/** Streams a chat completion directly from the server; resolves with how it ended. */
async function streamChat(maxTokens: number): Promise<{ done: boolean; tokens: number }> {
  const res = await fetch(`http://${host.address}:${host.sglangPort}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Tell me about speculative decoding" }], max_tokens: maxTokens, stream: true, ignore_eos: true, stream_options: { include_usage: true } }),
  });
  let text = "";
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
  } catch {
    return { done: false, tokens: 0 };
  }
  const usage = /"completion_tokens":(\d+)/.exec(text);
  return { done: text.includes("data: [DONE]"), tokens: usage ? Number(usage[1]) : 0 };
}

before(async () => {
  // SGLang v0.5.19 (simhost/sim/sglang/lines.ts), still run by users: its drain ends with a
  // SIGKILL of its own process (v0.5.20 on exit 0); the other suites' hosts run main.
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", line: "v0.5.19", loadSeconds: 2, warmupSeconds: 0.5 } });
  ws = simWorkspace({ "b8t4-w2048": stackConfig("b8t4-w2048") });
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("first deploy: the rendered unit is installed, active means serving, outputs record it", async () => {
  const stack = await ws.stack("b8t4-w2048");
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  // The committed expectation (the snapshot render.test.ts pins), with this host's address
  // and port in place of the project defaults; not renderUnit, the code under test.
  const expected = fs.readFileSync(path.join(__dirname, "__snapshots__", "b8t4-w2048.service"), "utf8").replaceAll("127.0.0.1", host.address).replaceAll("30001", String(host.sglangPort));
  assert.equal(await sh(`cat /etc/systemd/system/${UNIT}.service`), expected.trim());
  assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active");
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_budget, 8);
  assert.equal(up.outputs.serverArgs.value.speculative_draft_window_size, 2048);
  assert.deepEqual(up.outputs.launchCommand.value.slice(0, 3), ["/usr/bin/python3", "-m", "sglang.launch_server"]);
  assert.match(up.outputs.unitHash.value, /^[0-9a-f]{64}$/);
  for (const k of ["drainSeconds", "stopSeconds", "gpuReleaseSeconds", "loadToReadySeconds"]) assert.equal(typeof up.outputs.restartTimings.value[k], "number");
  // The load began when the restart started the unit, before the readiness step did: all of it is counted.
  assert.ok(up.outputs.restartTimings.value.loadToReadySeconds >= 2, `loadToReadySeconds ${up.outputs.restartTimings.value.loadToReadySeconds} < the simulated load of 2 s`);
  // Nothing was drained: the output says so, not "old server (pid 0) drained in 0 s".
  assert.match(up.stdout, /no server ran before \(a first install\)/);
  assert.doesNotMatch(up.stdout, /pid 0\)/);
});

test("a no-op up changes nothing and does not restart the server", async () => {
  const pid = await mainPid();
  const up = await (await ws.stack("b8t4-w2048")).up();
  assert.deepEqual(up.summary.resourceChanges, { same: 9 }, "every resource unchanged");
  assert.equal(await mainPid(), pid);
});

test("preview shows the unit change for review and touches nothing on the host", async () => {
  const pid = await mainPid();
  ws.setStackConfig("b8t4-w2048", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  const preview = await (await ws.stack("b8t4-w2048")).preview({ diff: true });
  assert.ok((preview.changeSummary.update ?? 0) >= 1, JSON.stringify(preview.changeSummary));
  // One option per line in the unit, so the CLI's diff shows the exact change untruncated.
  assert.match(preview.stdout, /^\s*- +--speculative-ddtree-budget 8 \\$/m);
  assert.match(preview.stdout, /^\s*\+ +--speculative-ddtree-budget 16 \\$/m);
  assert.equal(await mainPid(), pid);
});

test("preview of a stack never deployed shows what `up` changes on the host, against the unit another stack put there", async () => {
  const pid = await mainPid();
  for (const [k, v] of Object.entries(stackConfig("b16t4-w2048"))) ws.setStackConfig("b16t4-w2048", k.replace("dflash-sglang:", ""), v);
  const stack = await ws.stack("b16t4-w2048");
  try {
    const preview = await stack.preview({ diff: true });
    assert.deepEqual(Object.keys(preview.changeSummary).filter((k) => k !== "create"), [], "a stack never deployed only creates");
    // The CLI prints the program's info diagnostics on stderr in --diff mode.
    const said = preview.stdout + preview.stderr;
    assert.match(said, /sglang-k26 on 127\.0\.0\.\d+ runs the unit of stack b8t4-w2048 \([0-9a-f]{12}\) as generation \d+; `up` replaces it with stack b16t4-w2048's unit \([0-9a-f]{12}\), changing \d+ lines:/);
    assert.match(said, /^\s*- +--speculative-ddtree-budget 8 \\$/m);
    assert.match(said, /^\s*\+ +--speculative-ddtree-budget 16 \\$/m);
    assert.match(said, /^\s*- X-DFlash-Stack=b8t4-w2048$/m);
    assert.equal(await mainPid(), pid, "preview touches nothing");
  } finally {
    await stack.workspace.removeStack("b16t4-w2048", { force: true });
  }
});

test("a reconfiguration waits out the GPU release delay and the new config serves (no OOM)", async () => {
  hosts.fault(HOST, JSON.stringify({ gpuReleaseDelaySeconds: 4 }));
  const oldPid = await mainPid();
  const up = await (await ws.stack("b8t4-w2048")).up();
  assert.equal(up.summary.result, "succeeded");
  assert.ok(up.outputs.restartTimings.value.gpuReleaseSeconds >= 3, JSON.stringify(up.outputs.restartTimings.value));
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_budget, 16);
  assert.notEqual(await mainPid(), oldPid);
  const journal = await sh(`journalctl -u ${UNIT}.service --no-pager -o cat`);
  assert.doesNotMatch(journal, /out of memory/i);
  // v0.5.19's drain ends with a SIGKILL of its own process: a clean stop for this unit
  // (SuccessExitStatus=SIGKILL), never "failed".
  // (systemd logs a successful exit's status only at debug level: the drain's count, then at once
  // "Deactivated successfully", with no uvicorn shutdown line between them.)
  assert.match(journal, /Remaining number of requests 0\.[^\n]*\n[^\n]*Deactivated successfully\./);
  assert.doesNotMatch(journal, /Failed with result/);
  hosts.fault(HOST, "{}");
});

// Issue 18, sequence 6, preview of an unchanged stack whose host runs another stack's unit: replayed with every invariant of the fault campaign by test/campaign/cases/issue-18-seq6-preview-says-what-up-does.json
// (test/campaign/cases.test.ts), so it is not also a scenario here.

test("streaming requests in flight during a reconfiguration all complete", async () => {
  // ~180 tok/s: 1500 tokens keep each stream busy for about 8 s, long past the start of `up`.
  const streams = [streamChat(1500), streamChat(1500), streamChat(1500)];
  ws.setStackConfig("b8t4-w2048", "speculative", readRepoStackConfig("b4t4-w2048")["dflash-sglang:speculative"]);
  const up = await (await ws.stack("b8t4-w2048")).up();
  assert.equal(up.summary.result, "succeeded");
  const results = await Promise.all(streams);
  assert.deepEqual(results, [{ done: true, tokens: 1500 }, { done: true, tokens: 1500 }, { done: true, tokens: 1500 }]);
  assert.ok(up.outputs.restartTimings.value.drainSeconds > 0, "the rollout had to wait for the streams");
});

test("a flag the host's SGLang does not know fails preflight; the old server keeps serving", async () => {
  const pid = await mainPid();
  const model = { ...deploymentOf("b8t4-w2048").model, extraArgs: ["--speculative-dflash-enable-ddtree"] };
  ws.setStackConfig("b8t4-w2048", "model", model);
  const stack = await ws.stack("b8t4-w2048");
  await assert.rejects(stack.up(), (e: Error) => {
    assert.match(e.message, /Preflight failed for sglang-k26 \(stack b8t4-w2048\).*nothing was stopped or changed/s);
    // A flag of model.extraArgs is the user's word (issue 63): named as such, with its fix.
    assert.match(e.message, new RegExp(`- model\\.extraArgs: --speculative-dflash-enable-ddtree is not a flag of the SGLang on ${host.address.replace(/\./g, "\\.")} \\(its --help lists no such flag\\)\\. Correct model\\.extraArgs`));
    assert.doesNotMatch(e.message, /Set sglangBuild|this is a simulated host/);
    return true;
  });
  const { extraArgs: _drop, ...restored } = model;
  ws.setStackConfig("b8t4-w2048", "model", restored);
  // A flag the tool derives (here from a flag map's spelling) is a matter of the build.
  ws.setStackConfig("b8t4-w2048", "sglangBuild", { flags: { budget: "--speculative-ddtree-budget", topkEnv: "SGLANG_DDTREE_MAX_TOPK", compactCache: "--speculative-dflash-enable-ddtree", algorithms: ["DFLASH", "DDTREE"] } });
  await assert.rejects(stack.up(), (e: Error) => {
    assert.match(e.message, /Preflight failed for sglang-k26 \(stack b8t4-w2048\).*nothing was stopped or changed/s);
    assert.match(e.message, /the installed SGLang does not accept --speculative-dflash-enable-ddtree \(checked against its --help\)\. Set sglangBuild to the build installed on the host/);
    // On a simulated host, preflight says how to change its build.
    assert.match(e.message, new RegExp(`this is a simulated host: \`npm run simhost -- configure ${HOST} '\\{"profile":"ddtree-fork"\\}'\` gives it the DDTree build`));
    return true;
  });
  ws.setStackConfig("b8t4-w2048", "sglangBuild", "ddtree-fork");
  assert.equal(await mainPid(), pid);
  assert.equal(await sh(`curl -s -o /dev/null -w '%{http_code}' http://${host.address}:${host.sglangPort}/health`), "200");
});

test("an old server that still answers is never taken as the new configuration", async () => {
  // The host serves budget 4 now; ask readiness for budget 12 without restarting anything.
  const want = deploymentOf("b8t4-w2048");
  const other = { ...want, speculative: { ...want.speculative, budget: 12 } };
  const started = Date.now();
  const connection = { host: host.address, port: host.port, user: host.user, hostKey: host.hostKey, privateKey: fs.readFileSync(host.privateKeyPath, "utf8") };
  await assert.rejects(
    withSsh(connection, (ssh) =>
      waitReady(ssh, {
        unitName: UNIT,
        serverUrl: localServerUrl(other),
        port: other.service.port,
        tpSize: 8,
        timeouts: { ...other.timeouts, readySeconds: 3, pollMs: 200 },
        safety: other.safety,
        curlAuth: "",
        stack: "stale-check",
        label: "stale-check",
        expectedArgs: expectedServerArgs(other),
        modelName: other.model.path,
      }),
    ),
    /was not serving the configuration within 3 s.*serving, but with other arguments: speculative_ddtree_budget=4 \(want 12\)/s,
  );
  assert.ok(Date.now() - started >= 3000);
});

test("a stale old process that keeps answering after stop delays the start until it is gone", async () => {
  hosts.fault(HOST, JSON.stringify({ staleSeconds: 3 }));
  ws.setStackConfig("b8t4-w2048", "speculative", readRepoStackConfig("b12t6-w2048")["dflash-sglang:speculative"]);
  const up = await (await ws.stack("b8t4-w2048")).up();
  hosts.fault(HOST, "{}");
  assert.equal(up.summary.result, "succeeded");
  assert.ok(up.outputs.restartTimings.value.stopSeconds >= 3, JSON.stringify(up.outputs.restartTimings.value));
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_budget, 12);
  assert.equal(up.outputs.serverArgs.value.speculative_ddtree_topk, 6);
});

test("destroy stops and removes the unit it installed", async () => {
  const stack = await ws.stack("b8t4-w2048");
  await stack.destroy();
  assert.equal((await hosts.ssh(host, `test -e /etc/systemd/system/${UNIT}.service`)).code, 1);
  assert.notEqual(await sh(`systemctl is-active ${UNIT}.service || true`), "active");
});
