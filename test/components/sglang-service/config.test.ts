// A key of the dflash-sglang namespace that is no setting is refused, naming it, a guess and
// the valid ones (config.ts unknownSettings): a misspelt section would otherwise be ignored
// and its defaults apply. Pure, then through the real engine: `preview` fails before any
// resource exists, so no host is reached (the stack's host is the project's placeholder).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { secretsOutsideSecretSettings, unknownSettings } from "../../../components/sglang-service/config";
import { readRepoStackConfig, simWorkspace } from "../../../lib/workspace";

test("a misspelt section or secret of our namespace is a problem line with a guess; every setting and other namespaces pass", () => {
  assert.deepEqual(unknownSettings(["dflash-sglang:timeout", "dflash-sglang:host", "dflash-sglang:apiKey", "aws:region", "dflash-sglang:apikey"]), [
    "  - dflash-sglang:apikey: is not a setting; did you mean dflash-sglang:apiKey? (valid: host, nodes, service, model, speculative, sglangBuild, timeouts, safety, benchmark, fleet, and the secrets apiKey, hfToken, sshPrivateKey)",
    "  - dflash-sglang:timeout: is not a setting; did you mean dflash-sglang:timeouts? (valid: host, nodes, service, model, speculative, sglangBuild, timeouts, safety, benchmark, fleet, and the secrets apiKey, hfToken, sshPrivateKey)",
  ]);
  const all = ["host", "nodes", "service", "model", "speculative", "sglangBuild", "timeouts", "safety", "benchmark", "apiKey", "hfToken", "sshPrivateKey"];
  assert.deepEqual(unknownSettings(all.map((k) => `dflash-sglang:${k}`)), []);
  assert.match(unknownSettings(["dflash-sglang:zzzzzzzz"])[0], /^ {2}- dflash-sglang:zzzzzzzz: is not a setting \(valid: /);
});

test("preview of a stack with a misspelt section fails naming the stack and the key, before any resource", async () => {
  const ws = simWorkspace({ typo: { "dflash-sglang:timeout": { readySeconds: 5 } } });
  try {
    const stack = await ws.stack("typo");
    const err = await stack.preview().then(
      () => assert.fail("preview succeeded with an unknown setting"),
      (e: Error) => e,
    );
    assert.match(err.message, /Invalid configuration for stack "typo" \(nothing was changed on any host\)/);
    assert.match(err.message, /dflash-sglang:timeout: is not a setting; did you mean dflash-sglang:timeouts\?/);
    assert.doesNotMatch(err.message, /sglang-unit|command:remote/);
  } finally {
    ws.cleanup();
  }
});

test("preview of a stack that sets only host.address says the stack's host replaced Pulumi.yaml's whole host", async () => {
  const ws = simWorkspace({ partial: { "dflash-sglang:host": { address: "127.0.0.99" } } });
  try {
    const err = await (await ws.stack("partial")).preview().then(
      () => assert.fail("preview succeeded without a host key"),
      (e: Error) => e,
    );
    assert.match(err.message, /dflash-sglang:host\.hostKey: is required \(Pulumi\.yaml sets host\.hostKey, but stacks\/Pulumi\.partial\.yaml sets dflash-sglang:host itself, which replaces Pulumi\.yaml's whole host/);
  } finally {
    ws.cleanup();
  }
});

// Issue 36 (a hostile read): a pull request could set service.unitName to another setting's
// secret ciphertext; decrypted, the preview's host read sent it to the host in a command line.
test("a secret value outside the secret settings is refused, naming the key and the settings that may hold one", () => {
  assert.deepEqual(secretsOutsideSecretSettings(["dflash-sglang:apiKey", "dflash-sglang:hfToken", "dflash-sglang:sshPrivateKey", "aws:secretKey"]), []);
  const lines = secretsOutsideSecretSettings(["dflash-sglang:service", "dflash-sglang:apiKey", "dflash-sglang:host"]);
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^ {2}- dflash-sglang:host: holds a secret value \(secure:\); only the secret settings apiKey, hfToken, sshPrivateKey may\./);
  assert.match(lines[1], /^ {2}- dflash-sglang:service: holds a secret value/);
});

test("through the engine: a secret in a setting that is not a secret one, at its top or nested, fails preview naming it, before any host is read", async () => {
  const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
  // 127.0.0.99: nothing listens there; the refusal comes before any connection.
  const ws = simWorkspace({ s: { ...readRepoStackConfig("b8t4-w2048"), "dflash-sglang:host": { address: "127.0.0.99", hostKey } } });
  try {
    const st = await ws.stack("s");
    await st.setConfig("dflash-sglang:service.unitName", { value: "hf-looks-like-a-name", secret: true }, true);
    await assert.rejects(st.preview(), (e: Error) => /dflash-sglang:service: holds a secret value \(secure:\); only the secret settings apiKey, hfToken, sshPrivateKey may/.test(e.message) && !e.message.includes("hf-looks-like-a-name"));
  } finally {
    ws.cleanup();
  }
});
