// The per-operator overlay (components/sglang-service/overlay.ts, dflash.local.yaml): pure
// parsing, what it refuses, and how it merges over a stack's configuration.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { mergeSettings, overlayFor, overlayKeys, parseOverlay, readOverlay } from "../../../components/sglang-service/overlay";

const STACKS = ["b16t4-w2048", "b8t4-w2048"];

test("an overlay merges key by key over a stack's sections: `all`, then the stack's own entry", () => {
  const o = parseOverlay(
    ["all:", "  host: {hostKey: ssh-ed25519 AAAA, user: deploy}", "stacks:", "  b16t4-w2048:", "    host: {address: 127.0.0.10}", "    service: {port: 30001}"].join("\n"),
    STACKS,
  );
  const mine = overlayFor(o, "b16t4-w2048");
  assert.deepEqual(mine, { host: { hostKey: "ssh-ed25519 AAAA", user: "deploy", address: "127.0.0.10" }, service: { port: 30001 } });
  assert.deepEqual(overlayFor(o, "b8t4-w2048"), { host: { hostKey: "ssh-ed25519 AAAA", user: "deploy" } });
  assert.deepEqual(overlayKeys(mine), ["host.address", "host.hostKey", "host.user", "service.port"]);
  // Over Pulumi.yaml's whole host section: only the keys it names change.
  const project = { address: "gpu-host.example.invalid", user: "root", privateKeyPath: "/root/.ssh/id_ed25519", hostKey: "ssh-ed25519 placeholder" };
  assert.deepEqual(mergeSettings(project, mine.host), { address: "127.0.0.10", user: "deploy", privateKeyPath: "/root/.ssh/id_ed25519", hostKey: "ssh-ed25519 AAAA" });
  // A list is replaced whole, as a stack file's would be.
  assert.deepEqual(mergeSettings([{ address: "a" }, { address: "b" }], [{ address: "c" }]), [{ address: "c" }]);
  assert.deepEqual(mergeSettings({ port: 1 }, undefined), { port: 1 });
  assert.deepEqual(parseOverlay("", STACKS), { all: {}, stacks: {} });
});

test("an overlay refuses what it does not take, naming the file, the key and what is valid", () => {
  const refused = (text: string, re: RegExp) => assert.throws(() => parseOverlay(text, STACKS), (e: Error) => (assert.match(e.message, /^dflash\.local\.yaml /), assert.match(e.message, re), true));
  refused("al:\n  host: {address: x}", /al: is not a key of dflash\.local\.yaml \(valid: all, stacks\)/);
  refused("all:\n  hots: {address: x}", /all\.hots: is not a per-operator setting; did you mean host\? \(valid: host, service/);
  // Within a section, only where the stack runs: not what the server runs as, nor a group's nodes.
  refused("all:\n  service: {runAs: nobody, environment: {LD_PRELOAD: /x.so}}", /all\.service\.runAs: is not a per-operator setting \(valid: service\.listenAddress, service\.port, service\.distInitPort/);
  refused("all:\n  host: {adress: x}", /all\.host\.adress: is not a per-operator setting; did you mean host\.address\?/);
  refused("all:\n  nodes: []", /all\.nodes: is not a per-operator setting/);
  // What a stack runs stays in the reviewed stack files.
  refused("all:\n  speculative: {budget: 32}", /all\.speculative: is not a per-operator setting .*what it runs stays in the reviewed stack files/);
  refused("stacks:\n  b16t4-w2048:\n    apiKey: sk-123", /stacks\.b16t4-w2048\.apiKey: is a secret: it belongs in the stack's encrypted configuration/);
  refused("stacks:\n  b16t4-w248:\n    host: {address: x}", /stacks\.b16t4-w248: is no stack of this project; did you mean b16t4-w2048\? \(stacks with a file in stacks\/: b16t4-w2048, b8t4-w2048\)/);
  refused("all:\n  host: 10.0.0.5", /all\.host: must be a mapping/);
  refused("- a\n- b", /must be a mapping with the keys all and stacks/);
  assert.throws(() => parseOverlay("all: [", STACKS), /dflash\.local\.yaml is not valid YAML/);
});

test("readOverlay reads the project folder's file, knowing its stacks and the one being run", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "overlay-"));
  try {
    assert.equal(readOverlay(dir, "x"), undefined);
    fs.mkdirSync(path.join(dir, "stacks"));
    fs.writeFileSync(path.join(dir, "stacks", "Pulumi.b16t4-w2048.yaml"), "config: {}\n");
    fs.writeFileSync(path.join(dir, "dflash.local.yaml"), "stacks:\n  b16t4-w2048: {host: {address: 127.0.0.10}}\n  fresh: {host: {address: 127.0.0.11}}\n");
    // A stack that has no file yet (just `stack init`ed) may be named while it runs.
    assert.deepEqual(overlayFor(readOverlay(dir, "fresh")!, "fresh"), { host: { address: "127.0.0.11" } });
    assert.throws(() => readOverlay(dir, "b16t4-w2048"), /stacks\.fresh: is no stack of this project/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
