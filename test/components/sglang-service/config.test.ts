// A key of the dflash-sglang namespace that is no setting is refused, naming it, a guess and
// the valid ones (config.ts unknownSettings): a misspelt section would otherwise be ignored
// and its defaults apply. Pure, then through the real engine: `preview` fails before any
// resource exists, so no host is reached (the stack's host is the project's placeholder).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { emptySecrets, hostFixCommands, optionLikeSecrets, secretsOutsideSecretSettings, unknownSettings } from "../../../components/sglang-service/config";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { mergedConfig, projectConfig, readRepoStackConfig, simWorkspace } from "../../../lib/workspace";

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
    assert.match(err.message, /dflash-sglang:host\.hostKey: is required: Pulumi\.yaml sets host\.hostKey, but stacks\/Pulumi\.partial\.yaml sets dflash-sglang:host itself, which replaces Pulumi\.yaml's whole host/);
    // Issue 63: every key the stack still needs, as commands, the host key read from its address.
    assert.match(err.message, /\n {10}npx pulumi config set --path --stack partial host\.privateKeyPath \/root\/\.ssh\/id_ed25519\n {10}npx pulumi config set --path --stack partial host\.hostKey "\$\(ssh-keyscan -t ed25519 127\.0\.0\.99 2>\/dev\/null \| cut -d' ' -f2-\)"\n/);
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

// Issue 63: the placeholder's fix was \`npx pulumi config set --path host.address <addr>\`, which
// led straight into \`host.hostKey: is required\` (a stack that sets host replaces Pulumi.yaml's
// whole host, key file included). Its commands, followed in order on a fresh stack (a copied
// stack file, as in README "Adding a configuration"), give a configuration that validates. No
// host is reached: ssh-keyscan is a stand-in that answers for the address it is given.
test("the placeholder host's commands, followed in order on a fresh stack, give a configuration that validates", async () => {
  const fresh = readRepoStackConfig("b8t4-w2048");
  const ws = simWorkspace({ fresh });
  const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
  try {
    const err = await (await ws.stack("fresh")).preview().then(
      () => assert.fail("preview succeeded on the placeholder host"),
      (e: Error) => e,
    );
    // The engine's diagnostics, once (the Automation API's error repeats the output).
    const from = err.message.indexOf("Diagnostics:");
    const to = err.message.indexOf("Diagnostics:", from + 1);
    const diagnostics = err.message.slice(from, to > from ? to : undefined);
    assert.match(diagnostics, /- dflash-sglang:host\.address: is still the documented placeholder gpu-host\.example\.invalid\. Point the stack at your GPU host: set ADDR to its address \(e\.g\. ADDR=10\.0\.0\.5\), then run these, in order; they set every host key the stack needs/);
    assert.doesNotMatch(diagnostics, /hostKey: is required|<addr>/);
    const commands = [...diagnostics.matchAll(/^ +(npx pulumi config set .*)$/gm)].map((m) => m[1]);
    assert.deepEqual(
      commands.map((c) => c.split(" ").slice(0, 8).join(" ")),
      ["address", "privateKeyPath", "hostKey"].map((k) => `npx pulumi config set --path --stack fresh host.${k}`),
    );
    // As a user would run them: npx reaches the pinned CLI; ssh-keyscan answers without a host.
    const bin = path.join(ws.dir, "fake-bin");
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, "ssh-keyscan"), `#!/bin/sh\nfor a; do last=$a; done\necho "$last ${hostKey}"\n`, { mode: 0o755 });
    const script = ["set -euo pipefail", 'npx() { [ "$1" = pulumi ] || exit 9; shift; command pulumi "$@"; }', "ADDR=127.0.0.98", ...commands].join("\n");
    const r = spawnSync("bash", ["-c", script], { cwd: ws.dir, env: { ...ws.env, PATH: `${bin}:${ws.env.PATH}` }, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const d = parseDeployment(mergedConfig(ws.stackConfig("fresh")), "fresh");
    assert.deepEqual([d.host.address, d.host.hostKey, d.host.privateKeyPath], ["127.0.0.98", hostKey, (projectConfig().host as { privateKeyPath: string }).privateKeyPath]);
  } finally {
    ws.cleanup();
  }
});

test("the host commands: only the keys still needed, the host key read from the address and port the stack has", () => {
  const project = projectConfig().host;
  assert.equal(hostFixCommands({ address: "10.0.0.5", hostKey: "ssh-ed25519 AAAA" }, project, "s"), undefined, "a usable host block needs none");
  assert.deepEqual(hostFixCommands({ address: "10.0.0.5", port: 2222, privateKeyPath: "/k" }, project, "s")?.commands, [
    `npx pulumi config set --path --stack s host.hostKey "$(ssh-keyscan -p 2222 -t ed25519 10.0.0.5 2>/dev/null | cut -d' ' -f2-)"`,
  ]);
  assert.deepEqual(hostFixCommands({ ...(project as object), address: "x.invalid", user: "deploy", become: "sudo" }, project, "s")?.keys, ["address", "hostKey"], "the stack's own host keeps its other keys");
});

test("a secret setting set to nothing is refused (a missing openssl in `config set --secret apiKey \"$(openssl ...)\"` stores \"\": a server with no key)", () => {
  assert.deepEqual(emptySecrets({ "dflash-sglang:apiKey": "", "dflash-sglang:hfToken": "hf_x", "other:apiKey": "" }), [
    "  - dflash-sglang:apiKey: is set but empty; set it to a value (e.g. `npx pulumi config set --secret apiKey`, which prompts for it) or remove it (`npx pulumi config rm apiKey`)",
  ]);
  assert.deepEqual(emptySecrets({ "dflash-sglang:apiKey": "k" }), []);
});

// Issue 59: SGLang merges its --config file into argv as `--api-key VALUE`
// (srt/server_args_config_parser.py), and argparse reads a word starting with "-" as an option.
test("an API key that starts with \"-\" is refused before anything reaches a host, naming the fix; argparse's own exceptions pass", () => {
  assert.deepEqual(optionLikeSecrets({ "dflash-sglang:apiKey": "-abc", "dflash-sglang:hfToken": "-hf" }), [
    '  - dflash-sglang:apiKey: starts with "-", which SGLang\'s argument parser takes for an option (SGLang would refuse to start: "argument --api-key: expected one argument"); set a key that does not, e.g. `npx pulumi config set --secret apiKey "$(openssl rand -hex 32)"`',
  ]);
  for (const key of ["abc-", "k", "-123", "-1.5", "- a b"]) assert.deepEqual(optionLikeSecrets({ "dflash-sglang:apiKey": key }), [], key);
  assert.deepEqual(optionLikeSecrets({}), []);
});
