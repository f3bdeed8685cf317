// The SGLangs the simulator follows (simhost/sim/sglang/lines.ts): the newest release, v0.5.21,
// main, and v0.5.19, where they differ, and the behaviours they share that the simulator once got
// wrong. Every test names the file of sgl-project/sglang (under python/sglang/) it follows.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { freePort, launch, sandbox, status, until } from "../../support/localSim";
import { streamChat as streamAt } from "../../support/streamChat";
import { ALL_SGLANG_LINES, LINES, SGLANG_LINES, SglangLine, boolEnv, startupArgsLine } from "../../../simhost/sim/sglang/lines";

const baseArgs = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--enable-metrics",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter")];
const ready = (port: number) => until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));

/** Runs `fn` against a serving simulator of `line`, then kills it and removes its sandbox. */
async function serving(line: SglangLine, sglang: object, extraArgs: string[], fn: (s: { port: number; log: () => string; child: ReturnType<typeof launch> }) => Promise<void>, env: Record<string, string> = {}, faults: object = {}): Promise<void> {
  const sb = sandbox({ line, ...sglang }, faults);
  const port = await freePort();
  const server = launch({ ...sb.env, ...env }, [...baseArgs(sb.dir, port), ...extraArgs]);
  try {
    // Its "fired up" line, not /health: some faults here fail every health check.
    await until("ready", async () => (server.log().includes("The server is fired up and ready to roll!") ? true : undefined));
    await fn({ port, log: server.log, child: server });
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
}

const streamChat = (port: number, maxTokens: number) => streamAt(`http://127.0.0.1:${port}`, maxTokens);
const inFlight = async (port: number) => ((await (await fetch(`http://127.0.0.1:${port}/get_load`)).json()) as { num_reqs: number }[])[0].num_reqs;

// Python's repr (Objects/unicodeobject.c unicode_repr): a str with a ' and no " is quoted with ".
test("the lines: v0.5.21 and main share main's traits and end a drain through uvicorn; v0.5.19 keeps its own", () => {
  assert.deepEqual(SGLANG_LINES, ["release", "main"], "the fault table's two");
  assert.deepEqual(ALL_SGLANG_LINES, ["release", "main", "v0.5.19"]);
  const { version: rv, ...release } = LINES.release;
  const { version: mv, ...main } = LINES.main;
  assert.deepEqual(release, main);
  assert.deepEqual([rv, mv, LINES["v0.5.19"].version], ["0.5.21-sim", "0.5.22.dev0-sim", "0.5.19-sim"]);
  assert.deepEqual(LINES["v0.5.19"], { version: "0.5.19-sim", startupArgs: "dataclass", configAliasKeys: "canonical-refused", modelPathRequiredByArgparse: true, drainExit: "self-sigkill" });
  assert.equal(LINES.main.drainExit, "asgi");
});

test("the two start-up line forms (srt/entrypoints/engine.py): a dataclass repr in v0.5.19, a dict on main and v0.5.21, the key in clear in both, quoted as Python quotes it", () => {
  const args = { model_path: "/m", api_key: "sk-it's", tp_size: 8, enable_metrics: true, context_length: null };
  assert.equal(startupArgsLine("v0.5.19", args), `server_args=ServerArgs(model_path='/m', api_key="sk-it's", tp_size=8, enable_metrics=True, context_length=None)`);
  assert.equal(startupArgsLine("main", args), `server_args={'model_path': '/m', 'api_key': "sk-it's", 'tp_size': 8, 'enable_metrics': True, 'context_length': None}`);
  assert.equal(startupArgsLine("release", args), startupArgsLine("main", args));
  assert.equal(startupArgsLine("main", { api_key: `a'b"c\\d` }), `server_args={'api_key': 'a\\'b"c\\\\d'}`, "both quotes: single, its ' escaped");
  assert.equal(startupArgsLine("main", { api_key: 'say "hi"' }), `server_args={'api_key': 'say "hi"'}`);
});

test("SGL_FORCE_SHUTDOWN and friends are read as SGLang's get_bool_env_var reads them (srt/utils/common.py)", () => {
  for (const v of ["1", "true", "True", "TRUE"]) assert.equal(boolEnv(v, false), true, v);
  for (const v of ["0", "false", "False", "yes", ""]) assert.equal(boolEnv(v, true), false, v);
  assert.equal(boolEnv(undefined, true), true);
  assert.equal(boolEnv(undefined, false), false);
});

// http_server.py server_info: resolved values on both lines (v0.5.17 on);
// srt/arg_groups/speculative_hook.py: the DFlash block size stands for the draft tokens;
// srt/server_args.py: max_running_requests resolves to 48 for DFLASH when unset (both lines).
for (const line of ALL_SGLANG_LINES) {
  test(`${line}: the start-up line, /server_info (resolved values) and the DFlash block size`, async () => {
    await serving(line, {}, ["--speculative-dflash-block-size", "8", "--api-key", "sk-line"], async ({ port, log }) => {
      const info = (await (await fetch(`http://127.0.0.1:${port}/server_info`, { headers: { authorization: "Bearer sk-line" } })).json()) as Record<string, unknown>;
      assert.equal(info.speculative_dflash_block_size, 8, "as given");
      assert.equal(info.speculative_num_draft_tokens, 8, "the block size copied in");
      assert.equal(info.served_model_name, info.model_path, "filled in");
      assert.equal(info.max_running_requests, 48, "DFLASH's default (PR #25424, before v0.5.19)");
      if (line === "v0.5.19") {
        assert.match(log(), /server_args=ServerArgs\(model_path='[^']*', .*api_key='sk-line'/);
        assert.match(String(info.version), /^0\.5\.19\b/);
      } else {
        assert.match(log(), /server_args=\{'model_path': '[^']*', .*'api_key': 'sk-line'/);
        assert.match(String(info.version), line === "main" ? /^0\.5\.22\.dev/ : /^0\.5\.21\b/);
      }
      // /health runs a one-token generation, polled after a 1 s sleep (http_server.py, health_generate).
      const t0 = Date.now();
      assert.equal(await status(port, "/health"), 200);
      assert.ok(Date.now() - t0 >= 1_000, `a health check took ${Date.now() - t0} ms`);
    });
  });
}

test("--speculative-num-draft-tokens and --speculative-dflash-block-size both set and different is an error on both lines", async () => {
  const both = ["--speculative-num-draft-tokens", "16", "--speculative-dflash-block-size", "8"];
  for (const line of SGLANG_LINES) {
    const sb = sandbox({ line });
    try {
      const r = await launch(sb.env, [...baseArgs(sb.dir, await freePort()), ...both]).exited;
      assert.equal(r.code, 1, line);
      assert.match(r.stderr, /ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ/);
    } finally {
      sb.cleanup();
    }
  }
});

// srt/server_args.py: the window is checked against the block size as resolved, not against a
// default of 16: block 8 with window 12 is valid, window 6 is not.
test("the drafter window is checked against the resolved block size", async () => {
  await serving("release", {}, ["--speculative-dflash-block-size", "8", "--speculative-draft-window-size", "12"], async ({ port }) => {
    const info = (await (await fetch(`http://127.0.0.1:${port}/server_info`)).json()) as Record<string, unknown>;
    assert.deepEqual([info.speculative_draft_window_size, info.speculative_num_draft_tokens], [12, 8]);
  });
  const sb = sandbox({ line: "main" });
  try {
    const r = await launch(sb.env, [...baseArgs(sb.dir, await freePort()), "--speculative-dflash-block-size", "8", "--speculative-draft-window-size", "6"]).exited;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens \(block_size\)\. window_size=6, block_size=8\./);
  } finally {
    sb.cleanup();
  }
  // Only the DFlash algorithms check it: EAGLE with a small window starts.
  const eagle = sandbox({ line: "main" });
  try {
    const port = await freePort();
    const args = [...baseArgs(eagle.dir, port), "--speculative-draft-window-size", "6"].map((a) => (a === "DFLASH" ? "EAGLE" : a));
    const server = launch(eagle.env, args);
    try {
      await until("EAGLE with window 6 serving", async () => (server.log().includes("The server is fired up and ready to roll!") ? true : undefined));
    } finally {
      server.child.kill("SIGKILL");
      await server.exited;
    }
  } finally {
    eagle.cleanup();
  }
});

// srt/server_args.py + srt/arg_groups/argparse_actions.py: the window's deprecated alias works on
// both lines and warns on stderr before logging starts.
test("the deprecated window alias on the command line: served on both lines, with the deprecation warning", async () => {
  for (const line of SGLANG_LINES) {
    await serving(line, {}, ["--speculative-dflash-draft-window-size", "1024"], async ({ port, child }) => {
      const info = (await (await fetch(`http://127.0.0.1:${port}/server_info`)).json()) as Record<string, unknown>;
      assert.equal(info.speculative_draft_window_size, 1024, line);
      child.child.kill("SIGKILL");
      assert.match((await child.exited).stderr, /^\x1b\[1;33m'--speculative-dflash-draft-window-size' is deprecated and will be removed in a future release\. Use '--speculative-draft-window-size' instead\.\x1b\[0m$/m);
    });
  }
});

// srt/speculative/spec_info.py: the lookup of an unknown name; sglang/cli/utils.py
// get_model_path (main) and argparse's required --model-path (release).
test("an unknown algorithm and a missing --model-path, as each line reports them", async () => {
  for (const line of ALL_SGLANG_LINES) {
    const sb = sandbox({ line, profile: "upstream" });
    try {
      const unknown = await launch(sb.env, baseArgs(sb.dir, 1).map((a) => (a === "DFLASH" ? "DDTREE" : a))).exited;
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /^ValueError: Unknown speculative algorithm name: DDTREE$/m, line);
      const noModel = await launch(sb.env, ["--port", "1"]).exited;
      assert.equal(noModel.code, line === "v0.5.19" ? 2 : 1);
      assert.match(noModel.stderr, line === "v0.5.19" ? /sglang serve: error: the following arguments are required: --model-path/ : /Exception: Error: --model-path is required\./);
    } finally {
      sb.cleanup();
    }
  }
});

// tokenizer_manager.py sigterm_watchdog (v0.5.17 on, PR #28779): after the last count of 0, a
// ShutdownReq to the schedulers and a blocking wait of up to 15 s for them inside the event loop:
// HTTP answers nothing meanwhile, and the connections left waiting are reset at the end. v0.5.19
// ends with kill_process_tree(include_parent=True), logging nothing more; v0.5.20 on (read at its
// tag) warns of schedulers still alive at 15 s, kills the children only and hands the exit to
// uvicorn, which logs its shutdown and exits 0.
test("after the drain the schedulers get up to 15 s to exit, on every line, HTTP frozen meanwhile; then each line's end", async () => {
  // The four at once, each in its own sandbox.
  await Promise.all(([["v0.5.19", 30], ["main", 2], ["main", 30], ["release", 0.5]] as const).map(([line, schedulerExitSeconds]) =>
    serving(line, { schedulerExitSeconds }, [], async ({ port, log, child }) => {
      // When the last count arrives, taken as its output comes (not at the next poll: a poll's
      // lateness would shorten the measured wait below the schedulers' own).
      const counted = () => /Remaining number of requests 0\./.test(log());
      const drained = new Promise<number>((resolve) => {
        const seen = () => {
          if (!counted()) return;
          child.child.stdout!.off("data", seen);
          resolve(Date.now());
        };
        child.child.stdout!.on("data", seen);
      });
      child.child.kill("SIGTERM");
      await until("the drain's last count", async () => (counted() ? true : undefined), 10_000);
      const drainedAt = await drained;
      // A client polling /health and /metrics during the wait: no answer, then a reset.
      const settled: number[] = [];
      const probes = ["/health", "/metrics"].map((p) =>
        fetch(`http://127.0.0.1:${port}${p}`)
          .then((r) => r.status, (e: Error) => `failed: ${(e.cause as Error | undefined)?.message ?? e.message}`)
          .finally(() => settled.push(Date.now())),
      );
      const exit = await child.exited;
      const exitedAt = Date.now();
      const took = (exitedAt - drainedAt) / 1000;
      const expected = Math.min(schedulerExitSeconds, 15);
      // The upper bound only tells the cases apart (2 s from 15 s, 15 s from 30 s), with room for a loaded machine.
      assert.ok(took >= expected - 0.1 && took < expected + 7, `${line} exited ${took} s after the drain, its schedulers taking ${schedulerExitSeconds} s`);
      for (const answer of await Promise.all(probes)) assert.match(String(answer), /^failed: /, `${line}: an HTTP answer during the scheduler wait: ${answer}`);
      // Neither probe settled during the wait: both were left hanging until the end reset them.
      for (const at of settled) assert.ok(at >= exitedAt - 500, `${line}: a probe settled ${(exitedAt - at) / 1000} s before the exit`);
      assert.doesNotMatch(log(), /Force exiting/);
      const after = log().slice(log().lastIndexOf("Remaining number of requests 0.")).trimEnd().split("\n").slice(1).map((l) => l.replace(/^\[[^\]]*\] /, ""));
      if (line === "v0.5.19") {
        assert.equal(exit.signal, "SIGKILL", "kill_process_tree(include_parent=True)");
        assert.deepEqual(after, [], "nothing logged after the last count");
        return;
      }
      assert.deepEqual([exit.code, exit.signal], [0, null], `${line}: uvicorn's normal exit`);
      const still = schedulerExitSeconds > 15 ? [`Schedulers still alive 15s after ShutdownReq, killing them before they released: [${Array.from({ length: 8 }, (_, r) => child.child.pid! + 1 + r).join(", ")}]`] : [];
      assert.deepEqual(after, [...still, "INFO:     Shutting down", "INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete.", `INFO:     Finished server process [${child.child.pid}]`]);
    }),
  ));
});

// The staleSeconds fault (a listener lingering after the drain) on both ends.
test("staleSeconds: read-only routes answer after the drain, then each line ends its own way", async () => {
  await Promise.all((["v0.5.19", "main"] as const).map((line) =>
    serving(line, { schedulerExitSeconds: 0 }, [], async ({ port, log, child }) => {
      child.child.kill("SIGTERM");
      await until("the drain's last count", async () => (/Remaining number of requests 0\./.test(log()) ? true : undefined), 10_000);
      await until("stale answers", async () => ((await status(port, "/v1/models")) === 200 ? true : undefined), 5_000);
      assert.equal(await status(port, "/health"), "refused", "only the read-only routes: the rest are cut");
      const exit = await child.exited;
      assert.deepEqual([exit.code, exit.signal], line === "v0.5.19" ? [null, "SIGKILL"] : [0, null]);
      assert.equal(await status(port, "/v1/models"), "refused");
    }, {}, { staleSeconds: 2 }),
  ));
});

// tokenizer_manager.py sigterm_watchdog: hung requests stay in rid_to_state, so the drain
// counts them and never ends by itself; a failed health check forces the exit. SGL_FORCE_SHUTDOWN
// (get_bool_env_var) skips the drain.
test("a stuck scheduler: its hung requests are counted by the drain, which ends only if a health check had failed", async () => {
  const env = { SGLANG_HEALTH_CHECK_TIMEOUT: "1" };
  await serving("main", { schedulerExitSeconds: 0 }, [], async ({ port, log, child }) => {
    void streamChat(port, 10);
    await until("the hung request", async () => ((await inFlight(port)) === 1 ? true : undefined));
    child.child.kill("SIGTERM");
    await until("two counts of 1", async () => ((log().match(/Remaining number of requests 1\./g) ?? []).length >= 2 ? true : undefined), 15_000);
    assert.equal(child.child.exitCode, null, "still draining: the hung request never finishes");
    assert.doesNotMatch(log(), /Remaining number of requests 0\./);
  }, env, { hangGenerations: true });
  await serving("main", { schedulerExitSeconds: 0 }, [], async ({ port, log, child }) => {
    void streamChat(port, 10);
    await until("the hung request", async () => ((await inFlight(port)) === 1 ? true : undefined));
    // One handler for both routes: no scheduler output within SGLANG_HEALTH_CHECK_TIMEOUT (1 s here) -> 503.
    assert.equal(await status(port, "/health"), 503);
    assert.match(log(), /Health check failed\. Server couldn't get a response from detokenizer for last 1 seconds\. tic start time: \d\d:\d\d:\d\d\. last_heartbeat time: \d\d:\d\d:\d\d$/m);
    child.child.kill("SIGTERM");
    const sent = Date.now();
    const exit = await child.exited;
    assert.deepEqual([exit.code, exit.signal], [0, null], "main: the exit handed to uvicorn");
    // The line as SGLang logs it: no count of the requests it leaves.
    assert.match(log(), /Signal SIGTERM received while health check failed\. Force exiting\.$/m);
    // The stuck scheduler never takes the ShutdownReq: the whole 15 s wait (schedulerExitSeconds 0 aside), then the warning.
    assert.ok(Date.now() - sent >= 15_000, `exited ${(Date.now() - sent) / 1000} s after SIGTERM`);
    assert.match(log(), /\] Schedulers still alive 15s after ShutdownReq, killing them before they released: \[\d+(, \d+){7}\]$/m);
  }, env, { hangGenerations: true });
});

test("SGL_FORCE_SHUTDOWN=True skips the drain of a request in flight", async () => {
  await serving("main", { schedulerExitSeconds: 0, speedScale: 0.2 }, [], async ({ port, log, child }) => {
    const stream = streamChat(port, 5_000);
    await until("the request", async () => ((await inFlight(port)) === 1 ? true : undefined));
    child.child.kill("SIGTERM");
    const exit = await child.exited;
    assert.equal(exit.code, 0);
    assert.match(log(), /Signal SIGTERM received while force shutdown flag set\. Force exiting\./);
    assert.equal(await stream, false, "the request was cut");
  }, { SGL_FORCE_SHUTDOWN: "True" });
});

// srt/observability/metrics_collector.py and the scheduler's log_prefill_stats: gauges carry
// rank labels, counters only model_name and engine_type; every sample prints as a float; the
// gauge set at a prefill leaves out the requests that prefill admitted.
test("metrics: floats, the counters' two labels, and a gauge that misses the request just admitted", async () => {
  await serving("main", {}, [], async ({ port }) => {
    const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    let text = await scrape();
    assert.match(text, /^sglang:num_running_reqs\{model_name="[^"]*",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"\} 0\.0$/m);
    assert.match(text, /^sglang:generation_tokens_total\{model_name="[^"]*",engine_type="unified"\} 0\.0$/m);
    assert.equal(await streamChat(port, 8), true);
    text = await scrape();
    assert.match(text, /^sglang:num_running_reqs\{.*\} 0\.0$/m, "the only request ran without ever being counted");
    assert.match(text, /^sglang:generation_tokens_total\{.*\} 8\.0$/m);
  });
});

// srt/model_executor/model_runner.py init_torch_distributed: each rank compares the minimum
// free memory across ranks with its own; SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK defaults to
// true on both lines (fatal).
test("GPUs 0-3 held by another server: \"unbalanced\" is fatal on both lines", async () => {
  for (const line of SGLANG_LINES) {
    const sb = sandbox({ line });
    fs.mkdirSync(path.join(sb.dir, "small"));
    fs.writeFileSync(path.join(sb.dir, "small", "config.json"), JSON.stringify({ sim_size_gib: 100 }));
    const port = await freePort();
    const holder = launch(sb.env, ["--model-path", path.join(sb.dir, "small"), "--tp-size", "4", "--port", String(port), "--host", "127.0.0.1"]);
    try {
      await ready(port);
      const r = await launch(sb.env, baseArgs(sb.dir, await freePort())).exited;
      assert.equal(r.signal, "SIGKILL", "a scheduler's failure: SIGQUIT, then the main process kills itself");
      assert.match(r.stderr, /^RuntimeError: The memory capacity is unbalanced\. Some GPUs may be occupied by other processes\./m, line);
    } finally {
      holder.child.kill("SIGKILL");
      await holder.exited;
      sb.cleanup();
    }
  }
});

// srt/model_executor/cuda_graph_runner.py: a failed capture ends the load; its message wraps
// torch's own out-of-memory text, which names the rank's device, then SGLang's advice.
test("a CUDA graph capture failure ends the load with SGLang's wording, torch's OOM naming each rank's GPU", async () => {
  const sb = sandbox({}, { crashDuringLoad: "cuda-graph" });
  try {
    const r = await launch(sb.env, baseArgs(sb.dir, await freePort())).exited;
    assert.equal(r.signal, "SIGKILL");
    for (let gpu = 0; gpu < 8; gpu++) assert.match(r.stderr, new RegExp(`^Exception: Capture cuda graph failed: CUDA out of memory\\. Tried to allocate 2\\.00 GiB\\. GPU ${gpu} has a total capacity of [\\d.]+ GiB of which `, "m"));
    assert.match(r.stderr, /\nPossible solutions:\n1\. set --mem-fraction-static to a smaller value \(e\.g\., 0\.8 or 0\.7\)\n2\. set --cuda-graph-max-bs to a smaller value \(e\.g\., 16\)\n3\. disable torch compile by not using --enable-torch-compile\n4\. disable CUDA graph by --disable-cuda-graph\. \(Not recommended\. Huge performance loss\)\nOpen an issue on GitHub https:\/\/github\.com\/sgl-project\/sglang\/issues\/new\/choose \n/);
  } finally {
    sb.cleanup();
  }
});

// http_server.py health_generate: one handler for /health and /health_generate;
// SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false answers /health 200 at once, /health_generate
// still generates.
test("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false: /health answers at once, /health_generate still generates", async () => {
  await serving("main", {}, [], async ({ port }) => {
    const t0 = Date.now();
    assert.equal(await status(port, "/health_generate"), 200);
    assert.ok(Date.now() - t0 >= 1_000, `/health_generate took ${Date.now() - t0} ms`);
  }, { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: "false" });
  // Not a timing: with the scheduler stuck (no output for anyone), /health still says 200 at once,
  // where /health_generate waits out SGLANG_HEALTH_CHECK_TIMEOUT and says 503.
  await serving("main", {}, [], async ({ port }) => {
    assert.equal(await status(port, "/health"), 200);
    assert.equal(await status(port, "/health_generate"), 503);
  }, { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: "false", SGLANG_HEALTH_CHECK_TIMEOUT: "1" }, { hangGenerations: true });
});

// The healthGenerateLagSeconds fault stands for a server still Starting (its warm-up request not
// done) while it serves: http_server.py health_generate answers 503 on both routes then.
test("a health lag fails both health routes while chats are served", async () => {
  await serving("release", {}, [], async ({ port }) => {
    assert.equal(await status(port, "/health"), 503);
    assert.equal(await status(port, "/health_generate"), 503);
    assert.equal(await streamChat(port, 4), true, "served meanwhile");
  }, {}, { healthGenerateLagSeconds: 600 });
});

// srt/utils/auth.py decide_request_auth: /health* and /metrics open; a normal route takes the API
// key as `Authorization: Bearer` in any case (or x-api-key); /flush_cache is ADMIN_OPTIONAL: with
// an admin key set, only that key opens it.
test("auth: bearer in any case, x-api-key, open health and metrics, the admin key for /flush_cache", async () => {
  await serving("main", {}, ["--api-key", "sk-user", "--admin-api-key", "sk-admin"], async ({ port }) => {
    const get = async (p: string, headers: Record<string, string>, method = "GET") => (await fetch(`http://127.0.0.1:${port}${p}`, { method, headers })).status;
    assert.equal(await get("/v1/models", {}), 401);
    assert.equal(await get("/v1/models", { authorization: "Bearer sk-user" }), 200);
    assert.equal(await get("/v1/models", { authorization: "bearer sk-user" }), 200);
    assert.equal(await get("/v1/models", { authorization: "BEARER sk-user" }), 200);
    assert.equal(await get("/v1/models", { "x-api-key": "sk-user" }), 200);
    assert.equal(await get("/v1/models", { authorization: "Bearer sk-admin" }), 401, "the admin key is not the API key");
    assert.equal(await get("/metrics", {}), 200);
    assert.equal(await get("/flush_cache", { authorization: "Bearer sk-user" }, "POST"), 401, "ADMIN_OPTIONAL: the API key is not accepted once an admin key is set");
    const flushed = await fetch(`http://127.0.0.1:${port}/flush_cache`, { method: "POST", headers: { authorization: "Bearer sk-admin" } });
    assert.equal(flushed.status, 200);
    assert.match(await flushed.text(), /^Cache flushed\.\n/);
  });
});
