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
import { leanStack } from "../../lib/workspace";

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

test("a lean stack (lib/workspace.ts) returns what the Automation API returns, from fewer CLI runs", async () => {
  const backend = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-lean-"));
  const stackName = `lean-${process.pid}`;
  const stackFile = path.join(REPO_ROOT, "test/fixtures/engine-smoke", `Pulumi.${stackName}.yaml`);
  try {
    const env = pulumiEnv({ PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: "engine-test" });
    const stack = await LocalWorkspace.createStack({ stackName, workDir: path.join(REPO_ROOT, "test/fixtures/engine-smoke") }, { envVars: env, pulumiCommand: await pulumiCommand() });
    await stack.setConfig("message", { value: "lean" });
    const full = LocalWorkspace.prototype.stackOutputs.bind(stack.workspace);
    const lean = leanStack(stack);
    const fromHistory = async () => (await stack.history(1))[0];
    // Every CLI run, the workspace's and the stack's (the operation itself, and `stack history`).
    const runs: string[] = [];
    for (const o of [stack.workspace, stack] as unknown as { runPulumiCmd(...a: unknown[]): Promise<unknown> }[]) {
      const run = o.runPulumiCmd.bind(o);
      o.runPulumiCmd = (...a: unknown[]) => (runs.push((a[0] as string[]).slice(0, 3).join(" ")), run(...a));
    }
    const up = await lean.up();
    assert.deepEqual(runs, ["up --yes --skip-preview", "stack output --json", "stack output --json"], "the up, then its outputs (unmasked too, as one is secret), and no history");
    assert.deepEqual(up.outputs, await full(stackName), "outputs, secret flags included");
    assert.equal(up.outputs.secretMessage.secret, true);
    assert.equal(up.outputs.secretMessage.value, "lean");
    assert.equal(up.summary.result, "succeeded");
    assert.equal(up.summary.kind, "update");
    assert.deepEqual(up.summary.resourceChanges, (await fromHistory()).resourceChanges);
    await stack.setConfig("message", { value: "leaner" });
    const refresh = await lean.refresh();
    assert.equal(refresh.summary.kind, "refresh");
    assert.deepEqual(refresh.summary.resourceChanges, (await fromHistory()).resourceChanges);
    const again = await lean.up();
    assert.deepEqual(again.summary.resourceChanges, (await fromHistory()).resourceChanges, "a change: updates and replacements counted as the history counts them");
    assert.ok((again.summary.resourceChanges?.same ?? 0) < 4, JSON.stringify(again.summary.resourceChanges));
    const down = await lean.destroy();
    assert.equal(down.summary.kind, "destroy");
    assert.deepEqual(down.summary.resourceChanges, (await fromHistory()).resourceChanges);
    await stack.workspace.removeStack(stackName);
  } finally {
    fs.rmSync(stackFile, { force: true });
    fs.rmSync(backend, { recursive: true, force: true });
  }
});
