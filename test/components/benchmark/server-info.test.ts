// The benchmark's read of SGLang's server info: /server_info, and the deprecated
// /get_server_info only after a 404 (sgl-project/sglang python/sglang/srt/entrypoints/
// http_server.py: get_server_info logs a deprecation warning on every call).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { withServingSim } from "../../support/localSim";
import { serverInfo } from "../../../components/benchmark/run";

const args = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--api-key", "k"];
const withServer = (removedEndpoints: string[], fn: (baseUrl: string, log: () => string) => Promise<void>) =>
  withServingSim({ removedEndpoints }, args, ({ port, log }) => fn(`http://127.0.0.1:${port}`, log));

test("server info comes from /server_info; the deprecated endpoint is not asked", async () => {
  await withServer(["/get_server_info"], async (baseUrl, log) => {
    const r = await serverInfo({ baseUrl, apiKey: "k" });
    assert.equal(r.path, "/server_info");
    assert.ok(Array.isArray((r.info as { internal_states?: unknown }).internal_states));
    assert.doesNotMatch(log(), /deprecated/);
  });
});

test("an SGLang without /server_info: the benchmark falls back to /get_server_info after its 404", async () => {
  await withServer(["/server_info"], async (baseUrl, log) => {
    const r = await serverInfo({ baseUrl, apiKey: "k" });
    assert.equal(r.path, "/get_server_info");
    assert.ok(Array.isArray((r.info as { internal_states?: unknown }).internal_states));
    assert.doesNotMatch(log(), /deprecated/, "a version without /server_info predates the deprecation");
  });
});
