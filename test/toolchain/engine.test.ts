// End to end through the real engine, offline: the pinned CLI, the upstream Node.js
// language host, the dynamic-provider plugin and the command provider built from source, driven by the Automation API in a throwaway backend.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import { REPO_ROOT, pulumiCommand, pulumiEnv } from "../../lib/pulumi-env";

test("the pinned CLI reports the pinned version", () => {
  const env = pulumiEnv();
  const pinned = fs.readFileSync(path.join(REPO_ROOT, "toolchain/versions.env"), "utf8").match(/^PULUMI_VERSION=(\S+)/m)?.[1];
  const got = execFileSync("pulumi", ["version"], { env, encoding: "utf8" }).trim();
  assert.equal(got, pinned);
});

test("the language host is the upstream one, of the pinned version", () => {
  const env = pulumiEnv();
  const host = execFileSync("bash", ["-c", "command -v pulumi-language-nodejs"], { env, encoding: "utf8" }).trim();
  // The upstream host answers -version; ours (deleted) had no such flag.
  const got = execFileSync(host, ["-version"], { env, encoding: "utf8" }).trim();
  assert.equal(got, execFileSync("pulumi", ["version"], { env, encoding: "utf8" }).trim());
  const plugins = execFileSync("pulumi", ["plugin", "ls", "--json"], { env, encoding: "utf8" });
  assert.ok((JSON.parse(plugins) as { name: string; kind: string; version: string }[]).some((p) => p.name === "command" && p.kind === "resource" && p.version === "1.2.1"), plugins);
});

test("up, outputs, no-change preview, destroy and stack removal work offline", async () => {
  const backend = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-engine-"));
  try {
    const env = pulumiEnv({ PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: "engine-test" });
    const stackName = `smoke-${process.pid}`;
    const stack = await LocalWorkspace.createStack(
      { stackName, workDir: path.join(REPO_ROOT, "test/fixtures/engine-smoke") },
      { envVars: env, pulumiCommand: await pulumiCommand() },
    );
    // Stack settings live in the fixture folder: remove them whatever happens.
    const stackFile = path.join(REPO_ROOT, "test/fixtures/engine-smoke", `Pulumi.${stackName}.yaml`);
    try {
      await stack.setConfig("message", { value: "hello" });
      const up = await stack.up();
      assert.equal(up.summary.result, "succeeded");
      assert.equal(up.outputs.message.value, "hello");
      assert.equal(up.outputs.length.value, 5, "value computed by the dynamic provider at create");
      assert.equal(up.outputs.shouted.value, "HELLO", "stdout of a command.local.Command");
      assert.doesNotMatch(up.stdout + up.stderr, /from \$PATH/, `the command plugin is found where Pulumi installs plugins:\n${up.stdout}\n${up.stderr}`);

      const preview = await stack.preview();
      const changes = Object.entries(preview.changeSummary).filter(([op, n]) => op !== "same" && n > 0);
      assert.deepEqual(changes, [], "a second preview must show no change");

      const down = await stack.destroy();
      assert.equal(down.summary.result, "succeeded");
      await stack.workspace.removeStack(stackName);
      await assert.rejects(stack.workspace.selectStack(stackName));
    } finally {
      fs.rmSync(stackFile, { force: true });
    }
  } finally {
    fs.rmSync(backend, { recursive: true, force: true });
  }
});
