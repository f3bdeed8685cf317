// The guarantees against SGLang as it really is (the simulator follows sgl-project/sglang,
// python/sglang/...): its SIGTERM drain (srt/managers/tokenizer_manager.py
// sigterm_watchdog), stale gauges (scheduler metrics), /server_info replacing the
// deprecated /get_server_info (srt/entrypoints/http_server.py), argparse errors of
// `sglang serve` (srt/server_args.py) and its hidden deprecated aliases. Real engine,
// real SSH, real systemd; tests run in order on one host.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { projectConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { BUILD_PRESETS } from "../../../components/sglang-service/schema";
import { hostShell } from "../../support/hostShell";
import { until } from "../../support/localSim";

const HOST = `real-${process.pid}`;
const UNIT = "sglang-k26";
const STACK = "real";
let host: hosts.HostInfo;
let ws: SimWorkspace;

const spec = (stack: string) => readRepoStackConfig(stack)["dflash-sglang:speculative"] as Record<string, unknown>;
const TIMEOUTS = { readySeconds: 30, pollMs: 250 };

const { sh } = hostShell(() => host, UNIT);

const base = () => `http://${host.address}:${host.sglangPort}`;
const serving = async () => (await (await fetch(`${base()}/server_info`)).json()) as Record<string, unknown>;
const runningGauge = async () => Number(/^sglang:num_running_reqs\{.*\} (\S+)$/m.exec(await (await fetch(`${base()}/metrics`)).text())?.[1]);

/** Streams a chat completion; `onFirstChunk` runs once tokens flow. Resolves with whether it finished. */
async function streamChat(maxTokens: number, onFirstChunk: () => void = () => undefined): Promise<boolean> {
  try {
    const res = await fetch(`${base()}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Tell me about speculative decoding" }], max_tokens: maxTokens, stream: true, ignore_eos: true }),
    });
    let text = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      if (!text) onFirstChunk();
      text += Buffer.from(chunk).toString("utf8");
    }
    return text.includes("data: [DONE]");
  } catch {
    return false;
  }
}

/** Starts a stream and resolves (with its outcome's promise) once its first tokens arrived. */
async function streamInFlight(maxTokens: number): Promise<{ done: Promise<boolean> }> {
  let flowing!: () => void;
  const started = new Promise<void>((r) => (flowing = r));
  const done = streamChat(maxTokens, flowing);
  await Promise.race([started, done.then(() => Promise.reject(new Error("the stream ended before it was in flight")))]);
  return { done };
}

/** Runs `up` for the stack with a new speculative block (and more), returning its output. */
async function upWith(config: Record<string, unknown>, onOutput: (all: string) => void = () => undefined): Promise<{ output: string; outputs: Record<string, { value: any }> }> {
  for (const [k, v] of Object.entries(config)) ws.setStackConfig(STACK, k, v);
  let output = "";
  const up = await (await ws.stack(STACK)).up({ onOutput: (s) => onOutput((output += s)) });
  assert.equal(up.summary.result, "succeeded");
  return { output, outputs: up.outputs };
}

async function failingUp(config: Record<string, unknown>): Promise<string> {
  for (const [k, v] of Object.entries(config)) ws.setStackConfig(STACK, k, v);
  try {
    await (await ws.stack(STACK)).up();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("up succeeded but was expected to fail");
}

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({
    [STACK]: { ...readRepoStackConfig("b8t4-w2048"), ...simHostConfig(host, UNIT), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:timeouts": TIMEOUTS, "dflash-sglang:benchmark": { enabled: false } },
  });
  assert.equal((await (await ws.stack(STACK)).up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("stale gauges after traffic stopped: the stop is SGLang's drain, over within its 5 s period, and systemd calls it clean", async () => {
  // Two at once: the second one's prefill publishes the first as running (a prefill leaves
  // out what it admits), and nothing refreshes the gauge once both are done.
  assert.deepEqual(await Promise.all([streamChat(200), streamChat(200)]), [true, true]);
  assert.ok((await runningGauge()) >= 1, "the gauge still counts a finished request (the trap a gauge-based drain falls into)");
  const { outputs } = await upWith({ speculative: spec("b16t4-w2048") });
  const t = outputs.restartTimings.value;
  // SGLang main then gives its schedulers up to 15 s; the simulated ones take 0.5 s.
  assert.ok(t.drainSeconds + t.stopSeconds <= 7, `stop took ${JSON.stringify(t)}: more than SGLang's 5 s watchdog period and its schedulers' exit`);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  const journal = await sh(`journalctl -u ${UNIT}.service --no-pager -o cat`);
  assert.match(journal, /Gracefully exiting\.\.\. Remaining number of requests 0\./);
  // SGLang main (v0.5.20 on) then ends its children and hands the exit to uvicorn: exit 0, a clean
  // stop (v0.5.19 SIGKILLs itself instead, which SuccessExitStatus=SIGKILL makes clean too:
  // reconfigure.test.ts). The schedulers' wait for their ShutdownReq between the two logs nothing.
  assert.match(journal, /Remaining number of requests 0\.[^\n]*\n(\[[^\n]*INFO: [^\n]*\n)*[^\n]*Finished server process \[\d+\]\n[^\n]*Deactivated successfully\./);
  assert.doesNotMatch(journal, /Failed with result/);
});

test("a generation in flight when `up` starts completes; the drain waits for exactly that", async () => {
  // The old server's scheduler holds the request (the hang fault, matched to the old server)
  // until SGLang's drain has counted it, whenever the engine gets there; then it runs to its
  // end, and the drain, which checks every 5 s, waits for it.
  const old = (await serving()).speculative_ddtree_budget;
  hosts.fault(HOST, JSON.stringify({ hangGenerations: true, match: { speculative_ddtree_budget: old } }));
  let outputs: Record<string, { value: any }>;
  let stream: Promise<boolean>;
  try {
    stream = streamChat(400);
    await until("the held request", async () => (((await (await fetch(`${base()}/get_load`)).json()) as { num_reqs: number }[])[0].num_reqs === 1 ? true : undefined));
    let released = false;
    ({ outputs } = await upWith({ speculative: spec("b8t4-w2048") }, (all) => {
      if (!released && /SGLang is draining \(1 request still in flight\)/.test(all)) {
        released = true;
        hosts.fault(HOST, "{}");
      }
    }));
  } finally {
    hosts.fault(HOST, "{}");
  }
  assert.equal(await stream, true, "the stream finished with [DONE]");
  assert.ok(outputs.restartTimings.value.drainSeconds >= 5, JSON.stringify(outputs.restartTimings.value));
  assert.equal(outputs.restartTimings.value.drainSeconds + outputs.restartTimings.value.stopSeconds <= 30, true);
});

test("drain deadline with drainPolicy \"fail\": the cut is named, the previous configuration is restored", async () => {
  const { done: stream } = await streamInFlight(50_000);
  const message = await failingUp({ speculative: spec("b16t4-w2048"), timeouts: { ...TIMEOUTS, drainSeconds: 2, drainPolicy: "fail" } });
  assert.match(message, /the drain deadline \(timeouts\.drainSeconds = 2 s\) ended the old server, cutting 1 request still in flight; timeouts\.drainPolicy is "fail", so the new configuration is not started/);
  assert.match(message, /Rolled back: the previous configuration \(stack real, .*\) is back and serving/);
  assert.equal(await stream, false);
  assert.equal((await serving()).speculative_ddtree_budget, 8);
});

test("drain deadline with drainPolicy \"proceed\": the cut is reported and the new configuration serves", async () => {
  const { done: stream } = await streamInFlight(50_000);
  const { output, outputs } = await upWith({ speculative: spec("b16t4-w2048"), timeouts: { ...TIMEOUTS, drainSeconds: 2, drainPolicy: "proceed" } });
  assert.match(output, /the drain deadline \(timeouts\.drainSeconds = 2 s\) ended the old server, cutting 1 request still in flight; timeouts\.drainPolicy is "proceed": starting the new configuration/);
  assert.equal(outputs.restartTimings.value.requestsCut, 1);
  assert.equal(await stream, false);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  ws.setStackConfig(STACK, "timeouts", TIMEOUTS);
});

test("an SGLang without /get_server_info, then one without /server_info: readiness uses whichever exists", async () => {
  hosts.configure(HOST, JSON.stringify({ removedEndpoints: ["/get_server_info"] }));
  await upWith({ speculative: spec("b8t4-w2048") });
  assert.equal((await serving()).speculative_ddtree_budget, 8);
  hosts.configure(HOST, JSON.stringify({ removedEndpoints: ["/server_info"] }));
  const { outputs } = await upWith({ speculative: spec("b16t4-w2048") });
  assert.equal(outputs.serverArgs.value.speculative_ddtree_budget, 16, "read from /get_server_info");
  hosts.configure(HOST, JSON.stringify({ removedEndpoints: [] }));
  await upWith({ speculative: spec("b8t4-w2048") });
  const journal = await sh(`journalctl -u ${UNIT}.service --no-pager -o cat`);
  assert.doesNotMatch(journal, /Endpoint '\/get_server_info' is deprecated/, "where /server_info exists, the deprecated endpoint is never asked");
});

test("a bad flag value: `sglang serve: error: argument ... invalid choice` shown in one line, previous configuration back", async () => {
  const model = projectConfig().model as Record<string, unknown>;
  const message = await failingUp({ speculative: spec("b16t4-w2048"), model: { ...model, extraArgs: ["--quantization", "fp3"] } });
  assert.match(message, /failed while .*: SGLang rejected its arguments: argument --quantization: invalid choice: 'fp3' \(choose from /);
  assert.match(message, /Rolled back: /);
  assert.equal((await serving()).speculative_ddtree_budget, 8);
  ws.setStackConfig(STACK, "model", model);
});

test("a deprecated flag SGLang hides from --help passes preflight with a note; the server really takes it", async () => {
  // v0.5.19 and main both keep the alias (simhost/sim/sglang/flags.ts); the release runs it here.
  hosts.configure(HOST, JSON.stringify({ line: "release" }));
  try {
    const flags = { ...BUILD_PRESETS["ddtree-fork"], windowSize: "--speculative-dflash-draft-window-size" };
    const { output } = await upWith({ speculative: { ...spec("b8t4-w2048"), draftWindowSize: 1024 }, sglangBuild: { flags } });
    assert.match(output, /note: --speculative-dflash-draft-window-size is a deprecated spelling of --speculative-draft-window-size that SGLang accepts but hides from --help/);
    assert.equal((await serving()).speculative_draft_window_size, 1024);
    assert.equal((await sh("python3 -m sglang.launch_server --help")).includes("--speculative-dflash-draft-window-size"), false);
  } finally {
    hosts.configure(HOST, JSON.stringify({ line: "main" }));
    ws.setStackConfig(STACK, "sglangBuild", "ddtree-fork");
  }
});

// tokenizer_manager.py sigterm_watchdog (v0.5.17 on, and main): after the drain's count of 0, up
// to 15 s for the schedulers, HTTP frozen. With a short drain deadline an idle server can outlive it; what ends it then
// cuts nothing, and drainPolicy "fail" must not call that a failure.
test("SGLang main whose schedulers take the full 15 s after an idle drain: no kill reported, no cut, the new configuration serves", async () => {
  // The server to be stopped: one of main (the test above started a release's).
  await upWith({ speculative: spec("b8t4-w2048") });
  assert.match(String((await serving()).version), /dev/, "SGLang main serves");
  hosts.configure(HOST, JSON.stringify({ schedulerExitSeconds: 30 }));
  try {
    const { output, outputs } = await upWith({ speculative: spec("b16t4-w2048"), timeouts: { ...TIMEOUTS, drainSeconds: 1, drainPolicy: "fail" } });
    assert.equal(outputs.restartTimings.value.requestsCut, 0);
    assert.doesNotMatch(output, /killing the old server|cutting/);
    // It waited the full 15 s for its schedulers after the drain ended, and was left to end by
    // itself (before, it was killed at the transaction's deadline, drainSeconds 1 + 15 s, and
    // counted as a cut). Whether the total passes that deadline depends on when SGLang's
    // watchdog (a 5 s period) saw the SIGTERM: 15 s plus 0 to 5 s.
    const t = outputs.restartTimings.value;
    assert.ok(t.stopSeconds >= 14 && t.drainSeconds + t.stopSeconds >= 15, `the schedulers' wait: ${JSON.stringify(t)}`);
    assert.equal((await serving()).speculative_ddtree_budget, 16);
  } finally {
    hosts.configure(HOST, JSON.stringify({ schedulerExitSeconds: 0.5 }));
    ws.setStackConfig(STACK, "timeouts", TIMEOUTS);
  }
});
