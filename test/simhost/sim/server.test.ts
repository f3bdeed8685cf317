// The SGLang simulator as a process (outside any host): phases, OOM on unreleased
// memory, SIGTERM aborting in-flight requests, server info.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { SIM, freePort, launch, sandbox, status, until } from "../../support/localSim";

const baseArgs = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--enable-metrics",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];

test("unknown flag: exit 2 before touching GPUs", async () => {
  const sb = sandbox({});
  try {
    const { exited } = launch(sb.env, [...baseArgs(sb.dir, 1), "--speculative-ddtree-budget", "8"]);
    const r = await exited;
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unrecognized arguments: --speculative-ddtree-budget 8/);
    assert.equal(fs.existsSync(path.join(sb.dir, "gpu/procs")), false);
  } finally {
    sb.cleanup();
  }
});

test("port closed while loading, 503 during warm-up, then 200; server info shows the args", async () => {
  const sb = sandbox({ loadSeconds: 1, warmupSeconds: 1 });
  const port = await freePort();
  const { child, exited } = launch(sb.env, baseArgs(sb.dir, port));
  try {
    const seen = new Set<number | "refused">();
    await until("ready", async () => {
      const s = await status(port, "/health");
      seen.add(s);
      return s === 200 ? true : undefined;
    });
    assert.deepEqual([...seen].sort(), [200, 503, "refused"].sort());
    const info = (await (await fetch(`http://127.0.0.1:${port}/get_server_info`)).json()) as { speculative_algorithm: string; speculative_draft_window_size: number; internal_states: { avg_spec_accept_length: number }[] };
    assert.equal(info.speculative_algorithm, "DFLASH");
    assert.equal(info.speculative_draft_window_size, 2048);
    assert.ok(info.internal_states[0].avg_spec_accept_length > 1);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.match(metrics, /^sglang:num_running_reqs\{model_name=".*"\} 0$/m);
  } finally {
    child.kill("SIGTERM");
    await exited;
    sb.cleanup();
  }
});

test("a new process started before the old one's memory is released dies with CUDA OOM", async () => {
  const sb = sandbox({}, { gpuReleaseDelaySeconds: 2 });
  const port = await freePort();
  try {
    const first = launch(sb.env, baseArgs(sb.dir, port));
    await until("first ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    first.child.kill("SIGTERM");
    assert.equal((await first.exited).code, 0);
    const second = launch(sb.env, baseArgs(sb.dir, port));
    const r = await second.exited;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ GiB\. GPU 0/);
    // Waiting for the release (a condition, not a sleep) lets the next start succeed.
    const smi = () => spawnSync(process.execPath, ["--import", "tsx", path.join(SIM, "nvidia-smi.ts"), "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"], { env: sb.env, encoding: "utf8" }).stdout;
    await until("GPU memory released", async () => (smi().split("\n").filter(Boolean).every((l) => l.endsWith(", 0")) ? true : undefined));
    const third = launch(sb.env, baseArgs(sb.dir, port));
    await until("third ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    third.child.kill("SIGTERM");
    await third.exited;
  } finally {
    sb.cleanup();
  }
});

test("SIGTERM aborts in-flight streaming requests", async () => {
  const sb = sandbox({ speedScale: 0.2 });
  const port = await freePort();
  const { child, exited } = launch(sb.env, baseArgs(sb.dir, port));
  try {
    await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: 2000, stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    child.kill("SIGTERM");
    let text = "";
    const outcome = await (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return "ended";
          text += new TextDecoder().decode(value);
        }
      } catch {
        return "aborted";
      }
    })();
    assert.equal(outcome, "aborted");
    assert.equal(text.includes("[DONE]"), false);
  } finally {
    await exited;
    sb.cleanup();
  }
});
