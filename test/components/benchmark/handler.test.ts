// The benchmark's checks of what it measures (handler.ts), as pure functions: the server
// before it must be this stack's deployment, serving; the one after must be the same, still
// serving. An `up` of a stack re-deploys it when the host runs another's (the service's host
// read), so these guard the window between the service's step and the benchmark's, and a
// restart or stop during the benchmark (stack.test.ts shows the latter on a simulated host).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { changed, measure, notOurs, type BenchmarkInputs } from "../../../components/benchmark/handler";

const ours = { unitName: "sglang-k26", unitHash: "a".repeat(64), serverArgs: { speculative_ddtree_budget: 8, tp_size: 8 } };
const serving = { mainPid: 4242, unitFileHash: "a".repeat(64), loaded: true, state: "active/running", answered: true, args: { speculative_ddtree_budget: 8, tp_size: 8, model_path: "/m" } };

test("the server is this stack's only when its unit file, systemd's view, its state and its arguments all say so", () => {
  assert.equal(notOurs(ours, serving), undefined);
  assert.match(notOurs(ours, { ...serving, mainPid: 0 })!, /^sglang-k26\.service is not running$/);
  assert.match(notOurs(ours, { ...serving, unitFileHash: "b".repeat(64) })!, /^the installed sglang-k26\.service is not this stack's \(sha256 bbbbbbbbbbbb, this stack's aaaaaaaaaaaa\): another stack's deployment holds the host$/);
  assert.match(notOurs(ours, { ...serving, unitFileHash: "" })!, /sha256 none/);
  assert.match(notOurs(ours, { ...serving, loaded: false })!, /NeedDaemonReload=yes/);
  assert.match(notOurs(ours, { ...serving, state: "deactivating/stop-sigterm" })!, /is deactivating\/stop-sigterm \(a server being stopped still answers while it drains\)/);
  assert.match(notOurs(ours, { ...serving, answered: false })!, /does not answer \/server_info/);
  // Same unit file, other arguments (e.g. an environment the unit does not pin): still refused.
  assert.match(notOurs(ours, { ...serving, args: { ...serving.args, speculative_ddtree_budget: 16 } })!, /^it runs other arguments: speculative_ddtree_budget=16 \(want 8\)$/);
});

test("the server after is the one before only with the same main PID and arguments, still serving", () => {
  const before = { mainPid: 4242, argsHash: "x", state: "active/running" };
  assert.equal(changed(before, before), undefined);
  assert.equal(changed(before, { ...before, mainPid: 4300 }), "main PID 4242 -> 4300");
  assert.equal(changed(before, { ...before, argsHash: "y" }), "main PID 4242 -> 4242, arguments changed");
  assert.equal(changed(before, { ...before, state: "deactivating/stop-sigterm" }), "main PID 4242 -> 4242, the unit is deactivating/stop-sigterm");
  assert.equal(changed(before, { ...before, mainPid: 0, state: "" }), "main PID 4242 -> 0, the unit is gone");
});

test("with benchmark.enabled false nothing is measured, and the outputs say so: no numbers, no time (issue 63), nothing compared", async () => {
  // No host is reached: the address is one nothing listens on.
  const i = { connection: { host: "127.0.0.1", port: 1, user: "root", privateKey: "" }, progressUrn: "", label: "sglang-k26 (stack b8)", stack: "b8", settings: { enabled: false }, resultsPath: "bench/out/b8.jsonl" } as unknown as BenchmarkInputs;
  const out = await measure(i, { result: null, takenAt: "2026-12-06T20:57:28.463Z" });
  assert.equal(out.result, null);
  assert.equal(out.takenAt, null);
  assert.equal(out.versusPrevious, null);
});
