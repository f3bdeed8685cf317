// Issue 12, scenario 8, for the benchmark: its timeout stops it. When the deadline's signal
// fires, the request in flight is aborted and no further request reaches the server
// (the earlier version only stopped waiting, and the benchmark went on in the background).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as http from "node:http";
import * as net from "node:net";
import { runBenchmark } from "../../../components/benchmark/run";
import { benchmarkSchema } from "../../../components/benchmark/schema";

test("aborting the benchmark's signal ends the request in flight and sends nothing more", { timeout: 20_000 }, async () => {
  let requests = 0;
  let open = 0;
  // A server whose streams trickle: one token a second, so every request is long. The
  // calibration request (one token) and the cache flush are answered at once.
  const server = http.createServer((req, res) => {
    if (req.url !== "/generate") return void res.writeHead(req.url === "/flush_cache" ? 200 : 404).end("{}");
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (n: number) => `data: ${JSON.stringify({ text: "x".repeat(n), meta_info: { prompt_tokens: 2000, completion_tokens: n, finish_reason: null } })}\n\n`;
      if (JSON.parse(body).sampling_params?.max_new_tokens === 1) return void res.end(`${chunk(1)}data: [DONE]\n\n`);
      requests++;
      open++;
      res.on("close", () => open--);
      let n = 0;
      const timer = setInterval(() => res.write(chunk(++n)), 1000);
      res.on("close", () => clearInterval(timer));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as net.AddressInfo;
  const stop = new AbortController();
  try {
    const settings = benchmarkSchema.parse({ runs: 3, warmupRuns: 0, maxTokens: 64, longContextTokens: [], concurrency: [1], coding: false });
    const run = runBenchmark({ baseUrl: `http://127.0.0.1:${port}`, model: "m", signal: stop.signal }, settings, () => undefined, () => undefined, "abort");
    while (requests === 0) await new Promise((r) => setTimeout(r, 20));
    const abortedAt = Date.now();
    stop.abort();
    await assert.rejects(run);
    assert.ok(Date.now() - abortedAt < 2000, `the benchmark ended ${Date.now() - abortedAt} ms after its signal`);
    const seen = requests;
    // The server is watched for a while after the end: nothing more arrives, nothing stays open.
    const until = Date.now() + 1500;
    while (Date.now() < until && open > 0) await new Promise((r) => setTimeout(r, 50));
    assert.equal(open, 0, "the request in flight was closed");
    // Absence has no event to wait for: a benchmark still running would send its next
    // request at once, so a second of silence shows it stopped.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(requests, seen, "no request after the abort");
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
