// The SGLang simulator as a process (outside any host), held to what real SGLang does.
// Every test names the file of sgl-project/sglang (under python/sglang/) it follows.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { SIM, freePort, launch, sandbox, status, until, withServingSim } from "../../support/localSim";

const baseArgs = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--enable-metrics",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];

const ready = (port: number) => until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));

async function streamChat(port: number, maxTokens: number, headers: Record<string, string> = {}): Promise<{ done: boolean; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    // ignore_eos: the answer to "hello" ends by itself well before these tests' lengths.
    body: JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, stream: true, ignore_eos: true }),
  });
  let text = "";
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
  } catch {
    return { done: false, text };
  }
  return { done: text.includes("data: [DONE]"), text };
}

// srt/server_args.py prepare_server_args: argparse.ArgumentParser(prog="sglang serve").
test("unknown flag: `sglang serve: error: unrecognized arguments`, exit 2, before touching GPUs", async () => {
  const sb = sandbox({});
  try {
    const r = await launch(sb.env, [...baseArgs(sb.dir, 1), "--speculative-ddtree-budget", "8"]).exited;
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^sglang serve: error: unrecognized arguments: --speculative-ddtree-budget 8$/m);
    assert.equal(fs.existsSync(path.join(sb.dir, "gpu/procs")), false);
  } finally {
    sb.cleanup();
  }
});

// An algorithm the build does not know: test/simhost/sim/lines.test.ts (it differs by line).

// srt/entrypoints/http_server.py: the port opens after _launch_subprocesses; health_generate
// answers 503 while the server is Starting; server_info returns dataclasses.asdict(server_args)
// (api_key included, issue #37457); get_server_info logs a deprecation and returns the same.
// srt/entrypoints/engine.py _launch_subprocesses: logger.info(f"{server_args=}"), key in clear.
test("start-up phases; /server_info and the deprecated /get_server_info both give every argument, the API key too", async () => {
  const sb = sandbox({ loadSeconds: 1, warmupSeconds: 1 });
  const port = await freePort();
  const key = "sk-sentinel-0123";
  const server = launch(sb.env, [...baseArgs(sb.dir, port), "--api-key", key]);
  try {
    const seen = new Set<number | "refused">();
    await until("ready", async () => {
      const s = await status(port, "/health");
      seen.add(s);
      return s === 200 ? true : undefined;
    });
    assert.deepEqual([...seen].sort(), [200, 503, "refused"].sort());
    const auth = { authorization: `Bearer ${key}` };
    const info = (await (await fetch(`http://127.0.0.1:${port}/server_info`, { headers: auth })).json()) as Record<string, unknown> & { internal_states: { avg_spec_accept_length: number }[] };
    assert.equal(info.speculative_algorithm, "DFLASH");
    assert.equal(info.speculative_draft_window_size, 2048);
    assert.equal(info.api_key, key, "real SGLang returns the key unredacted");
    assert.ok("admin_api_key" in info && "ssl_keyfile_password" in info);
    assert.ok(info.internal_states[0].avg_spec_accept_length > 1);
    assert.doesNotMatch(server.log(), /get_server_info' is deprecated/);
    const legacy = await (await fetch(`http://127.0.0.1:${port}/get_server_info`, { headers: auth })).json();
    assert.deepEqual(legacy, info);
    assert.match(server.log(), /Endpoint '\/get_server_info' is deprecated and will be removed in a future version\. Please use '\/server_info' instead\./);
    // Main's form (the release's is in lines.test.ts).
    assert.match(server.log(), new RegExp(`server_args=\\{.*'api_key': '${key}'`), "the start-up log holds the key");
    assert.equal((await fetch(`http://127.0.0.1:${port}/server_info`)).status, 401, "without the key");
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
});

test("a version without /get_server_info (or without /server_info) answers 404 there", async () => {
  await withServingSim({ removedEndpoints: ["/get_server_info"] }, baseArgs, async ({ port }) => {
    assert.equal(await status(port, "/get_server_info"), 404);
    assert.equal(await status(port, "/server_info"), 200);
  });
});


// srt/metrics/collector.py (SchedulerMetricsCollector labels) and the scheduler's
// log_prefill_stats / log_decode_stats (every --decode-log-interval = 40 steps) and
// idle refresh (30 s): a scrape shows the last published value, not the live count.
test("metrics carry SGLang's labels and go stale: a finished request still shows as running", async () => {
  await withServingSim({}, baseArgs, async ({ port }) => {
    const gauge = async () => Number(/^sglang:num_running_reqs\{(.*)\} (\S+)$/m.exec(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())?.[2]);
    const labels = /^sglang:num_running_reqs\{(.*)\} /m.exec(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())?.[1] ?? "";
    assert.match(labels, /^model_name=".*",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"$/);
    assert.equal(await gauge(), 0);
    // A long request, then a short one admitted while it runs: that prefill publishes 1 (the
    // long one; not itself), and the long one's decode steps keep it at 1.
    const long = streamChat(port, 400);
    await until("the long request", async () => (((await (await fetch(`http://127.0.0.1:${port}/get_load`)).json()) as { num_reqs: number }[])[0].num_reqs === 1 ? true : undefined));
    assert.equal((await streamChat(port, 8)).done, true);
    assert.equal((await long).done, true);
    assert.equal(await gauge(), 1, "still 1 after every request finished: refreshed at prefill, every 40 decode steps, or 30 s idle");
  });
});


// srt/managers/tokenizer_manager.py: SignalHandler.sigterm_handler sets gracefully_exit;
// sigterm_watchdog checks it every 5 s, waits (5 s at a time) for rid_to_state to empty,
// admits new requests meanwhile, then (main, v0.5.20 on) kills its children only and hands the
// exit to uvicorn: exit 0. http_server.py health_generate: 503 during shutdown. (v0.5.19's
// SIGKILL of itself: lines.test.ts.)
test("SIGTERM drains: in-flight and newly arriving requests finish, health says 503, then uvicorn exits 0", async () => {
  const sb = sandbox({ speedScale: 0.5 });
  const port = await freePort();
  const server = launch(sb.env, baseArgs(sb.dir, port));
  try {
    await ready(port);
    const first = streamChat(port, 600);
    await until("request running", async () => (/num_running_reqs\{.*\} 1/.test(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()) ? true : undefined));
    server.child.kill("SIGTERM");
    await until("drain logged", async () => (/SIGTERM received\. .*Draining requests and shutting down\.\.\./.test(server.log()) ? true : undefined));
    assert.equal(await status(port, "/health"), 503);
    const late = await streamChat(port, 20);
    assert.equal(late.done, true, "a request arriving during the drain is served");
    assert.equal((await first).done, true, "the in-flight request completes");
    const exit = await server.exited;
    assert.deepEqual([exit.code, exit.signal], [0, null], "the children killed, the exit handed to uvicorn");
    assert.equal(await status(port, "/health"), "refused", "uvicorn stopped listening");
    assert.match(server.log(), /Gracefully exiting\.\.\. Remaining number of requests [1-9]\d*\./);
    assert.match(server.log(), /Gracefully exiting\.\.\. Remaining number of requests 0\./);
  } finally {
    server.child.kill("SIGKILL");
    sb.cleanup();
  }
});

// srt/managers/multi_tokenizer_mixin.py: with --tokenizer-worker-num N > 1 every HTTP worker is its
// own TokenizerManager with its own SIGTERM watchdog, counting its own requests, whose rids carry
// its worker id (its pid): `<pid>_<hex>`.
test("tokenizer workers: each logs its own count with its own pid-prefixed rids; the drain ends when every one logged 0", async () => {
  const sb = sandbox({ schedulerExitSeconds: 0 }, { hangGenerations: true });
  const port = await freePort();
  const server = launch(sb.env, [...baseArgs(sb.dir, port), "--tokenizer-worker-num", "2"]);
  try {
    await until("ready", async () => (server.log().includes("The server is fired up and ready to roll!") ? true : undefined));
    // Three hung requests, round-robin: two for worker 0, one for worker 1.
    for (let i = 0; i < 3; i++) void streamChat(port, 10).catch(() => undefined);
    await until("three in flight", async () => ((((await (await fetch(`http://127.0.0.1:${port}/get_load`)).json()) as { num_reqs: number }[])[0].num_reqs === 3) ? true : undefined));
    server.child.kill("SIGTERM");
    const counts = () => [...server.log().matchAll(/Gracefully exiting\.\.\. Remaining number of requests (\d+)\. Remaining requests remaining_rids=\[(.*)\]\.$/gm)];
    await until("both workers' counts", async () => (new Set(counts().map((m) => m[1])).size === 2 ? true : undefined), 15_000);
    const byCount = new Map(counts().map((m) => [Number(m[1]), m[2].split(", ").map((r) => /^'(\d+)_[0-9a-f]{32}'$/.exec(r)?.[1])]));
    assert.equal(byCount.get(2)?.length, 2);
    assert.equal(byCount.get(1)?.length, 1);
    const [pid0, pid1] = [byCount.get(2)![0], byCount.get(1)![0]];
    assert.ok(pid0 && pid1 && pid0 !== pid1 && byCount.get(2)![1] === pid0, `each worker's rids carry its own pid: ${pid0}, ${pid1}`);
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
  // Idle, two workers: each logs its 0 once, then the drain's end.
  const idle = sandbox({ schedulerExitSeconds: 0 });
  try {
    const s = launch(idle.env, [...baseArgs(idle.dir, port), "--tokenizer-worker-num", "2"]);
    await ready(port);
    s.child.kill("SIGTERM");
    assert.equal((await s.exited).code, 0);
    assert.equal((s.log().match(/Remaining number of requests 0\. Remaining requests remaining_rids=\[\]\.$/gm) ?? []).length, 2);
    assert.match(s.log(), /Finished server process/);
  } finally {
    idle.cleanup();
  }
});

test("SIGTERM while idle ends within the watchdog's 5 s period; while loading, at once by SIGTERM", async () => {
  const sb = sandbox({ loadSeconds: 30 });
  const port = await freePort();
  try {
    const loading = launch(sb.env, baseArgs(sb.dir, port));
    await until("loading", async () => (/Load weight begin/.test(loading.log()) ? true : undefined));
    loading.child.kill("SIGTERM");
    assert.equal((await loading.exited).signal, "SIGTERM", "no handle loop yet: the default action");
  } finally {
    sb.cleanup();
  }
  const sb2 = sandbox({});
  try {
    const idle = launch(sb2.env, baseArgs(sb2.dir, port));
    await ready(port);
    const t0 = Date.now();
    idle.child.kill("SIGTERM");
    const exit = await idle.exited;
    assert.equal(exit.code, 0);
    // At most one watchdog period (5 s) and the schedulers' 0.5 s; the bound tells it from the
    // 15 s wait of schedulers that never exit, with room for a loaded machine.
    assert.ok(Date.now() - t0 < 5_000 + 500 + 5_000, `idle stop took ${Date.now() - t0} ms`);
  } finally {
    sb2.cleanup();
  }
});

// The hang fault (not SGLang's behaviour but a stuck NCCL init's): the port stays closed while
// the fault is set; cleared, the load goes on. Tests hold a rollout there instead of racing a timer.
test("a load held by hangDuringLoad never opens the port; once the fault is cleared it finishes", async () => {
  const sb = sandbox({}, { hangDuringLoad: true });
  const port = await freePort();
  const server = launch(sb.env, baseArgs(sb.dir, port));
  try {
    await until("the hang", async () => (/37% Completed/.test(server.log()) ? true : undefined));
    await new Promise((r) => setTimeout(r, 1_000)); // longer than the whole unheld load (0.3 s + 0.3 s)
    assert.equal(await status(port, "/health"), "refused");
    fs.writeFileSync(path.join(sb.dir, "faults.json"), "{}");
    await ready(port);
    assert.match(server.log(), /Load weight end/);
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
});

// srt/model_executor/model_runner.py: weights that do not fit are torch's own OOM; the
// memory of an exited process stays in use until the driver frees it.
test("a new process started before the old one's memory is released dies with CUDA OOM", async () => {
  const sb = sandbox({}, { gpuReleaseDelaySeconds: 2 });
  const port = await freePort();
  try {
    const first = launch(sb.env, baseArgs(sb.dir, port));
    await ready(port);
    first.child.kill("SIGTERM");
    await first.exited;
    const second = launch(sb.env, baseArgs(sb.dir, port));
    const r = await second.exited;
    assert.equal(r.signal, "SIGKILL", "a scheduler's failure: SIGQUIT to the main process, which kills itself");
    assert.match(r.stderr, /^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ GiB\. GPU 0 has a total capacity/m);
    // Waiting for the release (a condition, not a sleep) lets the next start succeed.
    const smi = () => spawnSync(process.execPath, ["--import", "tsx", path.join(SIM, "nvidia-smi.ts"), "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"], { env: sb.env, encoding: "utf8" }).stdout;
    await until("GPU memory released", async () => (smi().split("\n").filter(Boolean).every((l) => l.endsWith(", 0")) ? true : undefined));
    const third = launch(sb.env, baseArgs(sb.dir, port));
    await ready(port);
    third.child.kill("SIGKILL");
    await third.exited;
  } finally {
    sb.cleanup();
  }
});

// srt/managers/tokenizer_manager.py: spec_verify_ct is in meta_info only with speculative decoding.
test("/generate reports spec_verify_ct only with speculative decoding on", async () => {
  const plain = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port)];
  await withServingSim({}, plain, async ({ port }) => {
    const body = (await (await fetch(`http://127.0.0.1:${port}/generate`, { method: "POST", body: JSON.stringify({ text: "hi", sampling_params: { max_new_tokens: 8 } }) })).json()) as { meta_info: Record<string, unknown> };
    assert.equal(body.meta_info.completion_tokens, 8);
    assert.equal("spec_verify_ct" in body.meta_info, false);
  });
});


// srt/server_args_config_parser.py ConfigArgumentMerger: file args go first, the command
// line wins; every key becomes a flag, so an unknown key is argparse's error.
test("--config YAML: values apply, the command line wins, an unknown key is an argparse error", async () => {
  const sb = sandbox({});
  const port = await freePort();
  const yaml = path.join(sb.dir, "server.yaml");
  fs.writeFileSync(yaml, 'api-key: "k-from-file"\nport: 1\n');
  const server = launch(sb.env, [...baseArgs(sb.dir, port), "--config", yaml]);
  try {
    await ready(port);
    assert.equal(await status(port, "/v1/models"), 401, "the key from the file is required");
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
  }
  fs.writeFileSync(yaml, "not-a-flag: 3\n");
  const bad = await launch(sb.env, [...baseArgs(sb.dir, port), "--config", yaml]).exited;
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^sglang serve: error: unrecognized arguments: --not-a-flag 3$/m);
  // Each scalar becomes two words, `--api-key -abc`: argparse takes -abc for an option.
  fs.writeFileSync(yaml, 'api-key: "-abc"\n');
  const dashed = await launch(sb.env, [...baseArgs(sb.dir, port), "--config", yaml]).exited;
  assert.equal(dashed.code, 2);
  assert.match(dashed.stderr, /^sglang serve: error: argument --api-key: expected one argument$/m);
  const txt = path.join(sb.dir, "server.txt");
  fs.writeFileSync(txt, "port: 1\n");
  const wrong = await launch(sb.env, [...baseArgs(sb.dir, port), "--config", txt]).exited;
  assert.match(wrong.stderr, /^ValueError: Config file must be YAML format, got: \.txt$/m);
  sb.cleanup();
});

// srt/utils/common.py launch_dummy_health_check_server: ranks 1.. answer only health checks.
test("rank 1 of a two-node launch serves only a dummy health check on --port", async () => {
  const [a, b] = [sandbox({}), sandbox({})];
  const [port0, port1, dist] = [await freePort(), await freePort(), await freePort()];
  const multi = (dir: string, port: number, rank: number) => [...baseArgs(dir, port).map((x) => (x === "8" ? "16" : x)), "--nnodes", "2", "--node-rank", String(rank), "--dist-init-addr", `127.0.0.1:${dist}`];
  const n0 = launch(a.env, multi(a.dir, port0, 0));
  const n1 = launch(b.env, multi(b.dir, port1, 1));
  try {
    await ready(port0);
    await ready(port1);
    assert.equal(await status(port1, "/health_generate"), 200);
    assert.equal(await status(port1, "/v1/models"), 404);
    assert.equal(await status(port1, "/server_info"), 404);
    assert.equal(await status(port0, "/v1/models"), 200);
  } finally {
    n1.child.kill("SIGKILL");
    n0.child.kill("SIGKILL");
    await Promise.all([n0.exited, n1.exited]);
    a.cleanup();
    b.cleanup();
  }
});
