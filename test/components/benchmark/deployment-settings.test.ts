// The configuration's deployment settings (configurationOf's `deploymentSettings`), which the
// report compares before it takes a baseline: the repository's own baseline and speculative
// stacks record the same ones, and a deployment setting of the baseline's that differs is named.
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { currentConfiguration, SweepHost } from "../../../components/sweep/sweep";
import { readRepoStackConfig } from "../../../lib/workspace";
import { speedups } from "../../../components/verdict/choose";
import { resultOf } from "../../support/benchmarkResults";
import { REPO_ROOT } from "../../../lib/pulumi-env";

const HOST: SweepHost = {
  name: "127.0.0.10",
  config: { "dflash-sglang:host": { address: "127.0.0.10", hostKey: "ssh-ed25519 AAAA", privateKeyPath: "/k" }, "dflash-sglang:service": { unitName: "sglang-k26", port: 30001, listenAddress: "127.0.0.10" } },
};
const configuration = (stack: string, extra: Record<string, unknown> = {}) => currentConfiguration(stack, { ...readRepoStackConfig(stack), ...extra }, HOST);

test("the baseline and a speculative stack of the repository record the same deployment settings, none of them speculative, the environment as a fingerprint", () => {
  const base = configuration("baseline").deploymentSettings as Record<string, unknown>;
  const b16 = configuration("b16t4-w2048").deploymentSettings as Record<string, unknown>;
  assert.deepEqual(base, b16);
  assert.deepEqual(Object.keys(base), [...Object.keys(base)].sort(), "sorted");
  for (const key of Object.keys(base)) assert.doesNotMatch(key, /^speculative\.|drafterPath|listenAddress|\.port$|distInitPort/, key);
  for (const key of ["model.quantization", "model.memFractionStatic", "model.contextLength", "model.extraArgs", "service.environment"]) assert.ok(key in base, key);
  const withEnv: SweepHost = { ...HOST, config: { ...HOST.config, "dflash-sglang:service": { ...(HOST.config["dflash-sglang:service"] as object), environment: { NCCL_DEBUG: "INFO" } } } };
  const secret = currentConfiguration("baseline", readRepoStackConfig("baseline"), withEnv).deploymentSettings as Record<string, unknown>;
  assert.match(String(secret["service.environment"]), /^sha256 [0-9a-f]{12}$/);
  assert.doesNotMatch(JSON.stringify(secret), /INFO/, "values stay out of the outputs and history");
});

test("the report refuses a baseline deployed with another quantization, naming it", () => {
  const projectModel = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")).config["dflash-sglang:model"].value as Record<string, unknown>;
  const at = "2026-12-02T10:00:00.000Z";
  const rows = [
    { stack: "b16t4-w2048", configuration: configuration("b16t4-w2048"), result: resultOf({ decode: 180, spread: 2 }), takenAt: at },
    { stack: "baseline", configuration: configuration("baseline", { "dflash-sglang:model": { ...projectModel, quantization: "fp8" } }), result: resultOf({ decode: 75, spread: 1 }), takenAt: at },
  ];
  assert.match(speedups(rows).get("b16t4-w2048")?.why ?? "", /^the baseline on 10\.0\.0\.5 \(baseline\) was deployed with another model\.quantization \("fp8"; b16t4-w2048: "compressed-tensors"\)$/);
});
