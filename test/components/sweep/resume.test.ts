// What `npm run sweep -- --resume` counts as already measured: a stack whose outputs hold a
// benchmark of the same deployment, benchmark settings and benchmark code as it would deploy
// now (configurationOf's fingerprints); and what a sweep says it measured. The sweep itself,
// through the real engine on simulated hosts: sweep.test.ts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { alreadyMeasured, currentConfiguration, renderOutcomes, shortDecodeRate, SweepHost } from "../../../components/sweep/sweep";
import { readRepoStackConfig } from "../../../lib/workspace";
import { formatOneResultOf, resultOf } from "../../support/benchmarkResults";

const STACK = "b8t4-w2048";
// Simulated hosts share the machine's port space: each one's service listens on its own address.
const host = (address: string): SweepHost => ({
  name: address,
  config: { "dflash-sglang:host": { address, hostKey: "ssh-ed25519 AAAA", privateKeyPath: "/k" }, "dflash-sglang:service": { unitName: "sglang-k26", port: 30001, listenAddress: address } },
});
const HOSTS = [host("127.0.0.10"), host("127.0.0.11")];
const stackConfig = (extra: Record<string, unknown> = {}) => ({ ...readRepoStackConfig(STACK), "dflash-sglang:benchmark": { runs: 3, maxTokens: 128 }, ...extra });
const now = (config = stackConfig()) => HOSTS.map((h) => currentConfiguration(STACK, config, h));
/** A stack's outputs as state gives them back: keys sorted. */
const outputs = (configuration: Record<string, unknown>, benchmark: unknown = resultOf({ decode: 170, spread: 2 })) => ({
  benchmark: { value: benchmark },
  configuration: { value: Object.fromEntries(Object.entries(configuration).sort(([a], [b]) => a.localeCompare(b))) },
});

test("a stack measured with the configuration it would deploy now, on any of the sweep's hosts, is done", () => {
  const [onFirst, onSecond] = now();
  assert.equal(alreadyMeasured(outputs(onSecond), now()), true);
  assert.equal(alreadyMeasured(outputs(onFirst), now()), true);
  assert.equal(alreadyMeasured(outputs(onFirst, formatOneResultOf({ decode: 170, spread: 2 })), now()), true, "whatever the result's format: the fingerprints say what was measured");
  assert.equal(alreadyMeasured({ configuration: { value: onFirst } }, now()), false, "no benchmark output");
  assert.equal(alreadyMeasured(outputs(onFirst, null), now()), false, "benchmark.enabled was false");
});

test("other benchmark settings, other benchmark code or another deployment are not done", () => {
  const [measured] = now();
  const settings = now(stackConfig({ "dflash-sglang:benchmark": { runs: 5, maxTokens: 128 } }));
  assert.notEqual(settings[0].benchmark, measured.benchmark);
  assert.equal(alreadyMeasured(outputs(measured), settings), false, "benchmark.runs changed");
  assert.equal(alreadyMeasured(outputs(measured), now(stackConfig({ "dflash-sglang:benchmark": { runs: 3, maxTokens: 128, longContextTokens: [8192] } }))), false, "long contexts changed");
  assert.equal(alreadyMeasured(outputs({ ...measured, benchmarkCode: "000000000000" }), now()), false, "measured by other benchmark code");
  const model = { path: "/models/Kimi-K2.6", drafterPath: "/models/Kimi-K2.6-DFlash-v2", tpSize: 8, quantization: "compressed-tensors", trustRemoteCode: true };
  assert.equal(alreadyMeasured(outputs(measured), now(stackConfig({ "dflash-sglang:model": model }))), false, "another drafter");
  assert.equal(alreadyMeasured(outputs(measured), now(stackConfig({ "dflash-sglang:model": { ...model, drafterPath: "/models/Kimi-K2.6-DFlash", tpSize: 4 } }))), false, "another TP size");
  // Before the fingerprints, a configuration output named only the speculative block, build and model.
  const { deployment: _d, benchmark: _b, benchmarkCode: _c, tpSize: _t, ...before } = measured;
  assert.equal(alreadyMeasured(outputs(before), now()), false, "an output from before the fingerprints");
});

test("a sweep says each configuration's short-context decode rate, from either benchmark format", () => {
  assert.equal(shortDecodeRate(resultOf({ decode: 181.7, spread: 1 })), 181.7, "format 2: decode_tokens_per_s, not output_throughput");
  assert.equal(shortDecodeRate(formatOneResultOf({ decode: 170.2, spread: 1 })), 170.2, "format 1: its output_throughput was the decode rate");
  assert.equal(shortDecodeRate(null), undefined);
  assert.equal(
    renderOutcomes([
      { stack: "b16t4-w2048", host: "gpu-1", status: "succeeded", seconds: 412.3, decodeTokensPerS: 181.7 },
      { stack: "b12t6-w2048", host: "gpu-2", status: "failed", seconds: 30.1, cause: "CUDA out of memory | GPU 3" },
    ]),
    [
      "| stack | host | status | seconds | decode tok/s short | cause |",
      "|---|---|---|---:|---:|---|",
      "| b16t4-w2048 | gpu-1 | succeeded | 412.3 | 181.7 |  |",
      "| b12t6-w2048 | gpu-2 | failed | 30.1 | - | CUDA out of memory \\| GPU 3 |",
      "",
    ].join("\n"),
  );
});
