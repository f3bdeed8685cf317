import { test } from "node:test";
import * as assert from "node:assert/strict";
import { configChanges, configWarnings, projectConfigOf, stackConfigOf, stackOfPath, touchedStacks } from "../../../components/review/change";

const STACKS = ["b16t4-w2048", "b8t4-w2048", "baseline"];

test("a change of one stack file touches that stack only", () => {
  const t = touchedStacks(["stacks/Pulumi.b8t4-w2048.yaml", "README.md"], STACKS, "stacks");
  assert.deepEqual(t.touched, [{ stack: "b8t4-w2048", because: "stack file changed" }]);
  assert.deepEqual(t.removed, []);
});

test("a change of Pulumi.yaml touches every stack; a named one is touched without a change", () => {
  assert.deepEqual(touchedStacks(["Pulumi.yaml"], STACKS, "stacks").touched.map((t) => [t.stack, t.because]), STACKS.map((s) => [s, "project config changed"]));
  assert.deepEqual(touchedStacks([], STACKS, "stacks", (s) => s === "baseline").touched, [{ stack: "baseline", because: "named" }]);
  assert.deepEqual(touchedStacks([], STACKS, "stacks").touched, []);
});

test("a new stack file and a removed one are told apart", () => {
  const t = touchedStacks(["stacks/Pulumi.new.yaml", "stacks/Pulumi.gone.yaml"], [...STACKS, "new"], "stacks", undefined, STACKS);
  assert.deepEqual(t.touched, [{ stack: "new", because: "new stack file" }]);
  assert.deepEqual(t.removed, ["gone"]);
});

test("stack files are recognised in their folder only", () => {
  assert.equal(stackOfPath("stacks/Pulumi.x.yaml", "stacks"), "x");
  assert.equal(stackOfPath("other/Pulumi.x.yaml", "stacks"), undefined);
  assert.equal(stackOfPath("Pulumi.yaml", "stacks"), undefined);
  assert.equal(stackOfPath("Pulumi.x.yaml", ""), "x");
});

test("settings that change read as words; a window removed reads 'none'", () => {
  const before = { speculative: { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048 }, model: { tpSize: 8 } };
  const after = { speculative: { algorithm: "DDTREE", budget: 16, topk: 4, draftWindowSize: "none" }, model: { tpSize: 8 } };
  assert.deepEqual(configChanges(before, after).map((c) => c.words), ["budget 8 -> 16", "window 2048 -> none"]);
  assert.deepEqual(configChanges(after, after), []);
});

test("a secret's value never appears: set, rotated, removed", () => {
  const s = (c: string) => ({ apiKey: { secure: c } });
  assert.deepEqual(configChanges({}, s("v1:aaa")), [{ key: "apiKey", words: "apiKey set", secret: true }]);
  assert.deepEqual(configChanges(s("v1:aaa"), s("v1:bbb")).map((c) => c.words), ["apiKey rotated"]);
  assert.deepEqual(configChanges(s("v1:aaa"), {}).map((c) => c.words), ["apiKey removed"]);
  assert.ok(!configChanges(s("v1:aaa"), s("v1:bbb"))[0].words.includes("v1:"));
});

test("project config and stack config are read as the program reads them", () => {
  const project = "name: p\nconfig:\n  dflash-sglang:model:\n    value:\n      tpSize: 8\n  dflash-sglang:sglangBuild: ddtree-fork\n";
  assert.deepEqual(projectConfigOf(project), { model: { tpSize: 8 }, sglangBuild: "ddtree-fork" });
  assert.deepEqual(stackConfigOf("encryptionsalt: x\nconfig:\n  dflash-sglang:speculative:\n    budget: 4\n", "stacks/Pulumi.s.yaml"), { speculative: { budget: 4 } });
});

test("warnings: drainPolicy proceed, a tpSize change, a GPU change", () => {
  assert.match(configWarnings(undefined, { timeouts: { drainPolicy: "proceed" } })[0], /cuts the requests/);
  assert.match(configWarnings({ model: { tpSize: 8 } }, { model: { tpSize: 4 } })[0], /tpSize changes \(8 -> 4\)/);
  assert.match(configWarnings({}, { service: { environment: { CUDA_VISIBLE_DEVICES: "0,1" } } })[0], /GPUs it runs on change/);
  assert.deepEqual(configWarnings({ model: { tpSize: 8 } }, { model: { tpSize: 8 } }), []);
});

test("a change of the program (components, index.ts, the lock file) touches every stack", () => {
  for (const file of ["components/sglang-service/render.ts", "index.ts", "package-lock.json"]) {
    assert.deepEqual(touchedStacks([file], STACKS, "stacks").touched.map((t) => t.because), STACKS.map(() => "program changed"), file);
  }
  assert.deepEqual(touchedStacks(["docs/review.md", "test/x.test.ts"], STACKS, "stacks").touched, []);
});

test("Pulumi's reading of config keys: a key without the namespace is ours (both given is refused); a declaration's value, else its default, else nothing", () => {
  assert.throws(() => projectConfigOf("name: p\nconfig:\n  dflash-sglang:host:\n    value: {address: a}\n  host:\n    value: {address: b}\n"), /Pulumi\.yaml:5:3: "dflash-sglang:host" and "host" name the same setting/);
  assert.throws(() => stackConfigOf("config:\n  budget: 1\n  dflash-sglang:budget: 2\n", "stacks/Pulumi.s.yaml"), /stacks\/Pulumi\.s\.yaml:3:3: "budget" and "dflash-sglang:budget" name the same setting/);
  assert.deepEqual(projectConfigOf("name: p\nconfig:\n  dflash-sglang:host:\n    default: {address: 10.6.6.6}\n  dflash-sglang:a:\n    type: string\n  dflash-sglang:b:\n    value: 1\n    default: 2\n"), { host: { address: "10.6.6.6" }, b: 1 });
});
