import { test } from "node:test";
import * as assert from "node:assert/strict";
import { effectOf, ReviewedStack, rolloutOrder, whatMoved } from "../../../components/review/record";

const step = (resource: string, op: string, keys: string[] = []) => ({ resource, op, keys });

test("what up would do, from the preview's steps and what the host runs", () => {
  const same = ["sglang-host", "sglang-unit", "sglang-restart", "sglang-ready", "benchmark-run"].map((r) => step(r, "same"));
  assert.equal(effectOf(same), "no change");
  assert.equal(effectOf([...same.slice(0, 2), step("sglang-restart", "update", ["create"])]), "restart");
  assert.equal(effectOf([step("sglang-host", "create"), step("sglang-restart", "create")]), "restart");
  assert.equal(effectOf([...same.slice(0, 4), step("benchmark-run", "update", ["settings"])]), "benchmark only");
  assert.equal(effectOf([step("sglang-unit", "update", ["stdin"]), step("sglang-restart", "same")]), "update, no restart");
  // Another stack's unit on the host: the readiness step restarts this stack's configuration there.
  const takenOver = "sglang-k26 on 127.0.0.9 runs the unit of stack other (abc); `up` replaces it with stack me's unit (def), changing 2 lines:";
  assert.equal(effectOf([step("sglang-ready", "update", ["hostRuns"])], takenOver), "restart");
  assert.equal(effectOf([step("sglang-ready", "update", ["hostRuns"])], "sglang-k26 on 127.0.0.9 runs the unit of this stack (abc); `up` changes nothing there."), "update, no restart");
});

const reviewed: ReviewedStack = {
  stack: "s",
  host: "h",
  effect: "restart",
  plan: "s.plan.json",
  planSha: "p",
  steps: [step("sglang-restart", "update", ["create"]), step("sglang-ready", "update", ["hostRuns", "unitHash"])],
  hostView: "u on h runs the unit of stack other (abc); `up` replaces it",
  fingerprints: { config: "c", state: "s", host: "h1" },
};

test("nothing moved: no line", () => {
  assert.deepEqual(whatMoved(reviewed, { fingerprints: { config: "c", state: "s", host: "h1" }, steps: reviewed.steps, hostView: reviewed.hostView }), []);
});

test("each kind of move is named", () => {
  assert.match(whatMoved(reviewed, { fingerprints: { config: "x" } })[0], /configuration changed/);
  assert.match(whatMoved(reviewed, { fingerprints: { state: "x" } })[0], /state changed/);
  const host = whatMoved(reviewed, { fingerprints: { host: "h2" }, hostView: "u on h runs the unit of stack third (fff)" })[0];
  assert.match(host, /what its host runs changed[\s\S]*reviewed: u on h runs the unit of stack other[\s\S]*now:\s+u on h runs the unit of stack third/);
  assert.match(whatMoved(reviewed, { fingerprints: {}, steps: [step("sglang-restart", "update", ["create"])] })[0], /plans other steps/);
});

test("a host read alone (hostRuns) is not a change of steps: the host is checked on its own", () => {
  const steps = [step("sglang-restart", "update", ["create"]), step("sglang-ready", "update", ["unitHash"])];
  assert.deepEqual(whatMoved(reviewed, { fingerprints: {}, steps }), []);
});

test("rollout: per host, the stack serving now goes last", () => {
  const stacks = [
    { stack: "a", host: "h1" },
    { stack: "b", host: "h1" },
    { stack: "c", host: "h2" },
    { stack: "d", host: "h1" },
  ];
  assert.deepEqual(rolloutOrder(stacks, (h) => (h === "h1" ? "a" : undefined)).map((s) => s.stack), ["b", "d", "a", "c"]);
});

test("credentials alone restart nothing; a node's own restart or presence does", () => {
  assert.equal(effectOf([step("sglang-host", "update", ["connection"]), step("sglang-restart", "update", ["connection"]), step("sglang-unit", "update", ["connection"])]), "update, no restart");
  assert.equal(effectOf([step("sglang-restart", "update", ["stdin"])]), "restart", "new secrets reach the server by a restart");
  assert.equal(effectOf([step("sglang-restart-node1", "update", ["create"])]), "restart");
  // A group's restart (issue 41, item 2: one resource behind one barrier).
  assert.equal(effectOf([step("sglang-restart-group", "update", ["nodes"])]), "restart");
  assert.equal(effectOf([step("sglang-restart-group", "update", ["secretStdin"])]), "restart");
  assert.equal(effectOf([step("sglang-restart-group", "create")]), "restart");
  assert.equal(effectOf([step("sglang-restart-group", "update", ["providerVersion"])]), "update, no restart");
  assert.equal(effectOf([step("sglang-host-node1", "replace")]), "restart");
});

test("a later stack of a host: readiness and benchmark steps follow the host and are not compared", () => {
  const steps = [step("sglang-restart", "update", ["create"]), step("sglang-ready", "update", ["hostRuns", "unitHash"]), step("benchmark-run", "update", ["settings"])];
  const afterTakeover = [step("sglang-restart", "update", ["create"]), step("sglang-ready", "update", ["hostRuns"])];
  assert.deepEqual(whatMoved({ ...reviewed, steps }, { fingerprints: {}, steps: afterTakeover, afterTakeover: true }), []);
  assert.match(whatMoved({ ...reviewed, steps }, { fingerprints: {}, steps: [step("sglang-ready", "update", ["hostRuns"])], afterTakeover: true })[0], /plans other steps/);
});

// Issue 36: a host named once by its address and once by a name (or another port of its sshd)
// is one machine: the stacks' pinned host key says so.
test("rollout order groups stacks by machine (the pinned host key), not by how they name it", () => {
  const stacks = [
    { stack: "a", host: "10.0.0.5", key: "ssh-ed25519 K1" },
    { stack: "b", host: "gpu-1.example.internal", key: "ssh-ed25519 K1" },
    { stack: "c", host: "10.0.0.6", key: "ssh-ed25519 K2" },
  ];
  const byName = rolloutOrder(stacks, (h) => (h === "10.0.0.5" ? "a" : undefined));
  assert.deepEqual(byName.map((s) => s.stack), ["a", "b", "c"], "named apart, they are three hosts");
  const byKey = rolloutOrder(stacks, (m) => (m === "ssh-ed25519 K1" ? "a" : undefined), (s) => s.key);
  assert.deepEqual(byKey.map((s) => s.stack), ["b", "a", "c"], "one machine: the stack serving there (a) goes last");
});
