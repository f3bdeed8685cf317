// `npx pulumi ...` in the project folder runs scripts/pulumi.sh (set-up links it as
// node_modules/.bin/pulumi): the pinned CLI with the project's defaults, offline. Only
// commands that read run here (version, whoami).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "../../lib/pulumi-env";

const PINNED = fs.readFileSync(path.join(REPO_ROOT, "toolchain/versions.env"), "utf8").match(/^PULUMI_VERSION=(\S+)/m)?.[1];
const WRAPPER = path.join(REPO_ROOT, "scripts/pulumi.sh");

/**
 * Runs a command in its own process group and kills the whole group at the deadline: a
 * wrapper that found itself on PATH would call itself without end.
 */
function run(file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...opts, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const deadline = setTimeout(() => {
      process.kill(-child.pid!, "SIGKILL");
      reject(new Error(`${file} ${args.join(" ")} still ran after 60 s (calling itself?); stderr: ${stderr.slice(-2000)}`));
    }, 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A folder with `pulumi` linked to the wrapper, first on PATH, as npx puts node_modules/.bin. */
function npxLikePath(): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pulumi-bin-"));
  fs.symlinkSync(WRAPPER, path.join(dir, "pulumi"));
  // With a language host beside it, toolchain/ensure.sh would take this `pulumi` for an
  // installed CLI and ask it its version, unless the wrapper keeps itself off PATH.
  fs.writeFileSync(path.join(dir, "pulumi-language-nodejs"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${dir}:${process.env.PATH}` };
  delete env.PULUMI_BACKEND_URL;
  return { dir, env };
}

test("pulumi, reached through a link on PATH from a subfolder, is the pinned CLI (the wrapper does not call itself)", async () => {
  const { dir, env } = npxLikePath();
  try {
    const r = await run("pulumi", ["version"], { cwd: path.join(REPO_ROOT, "stacks"), env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), PINNED);
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test("state is local to the project unless the user chose a backend", async () => {
  const { dir, env } = npxLikePath();
  const backend = fs.mkdtempSync(path.join(os.tmpdir(), "pulumi-backend-"));
  try {
    const ours = await run("pulumi", ["whoami", "--verbose"], { cwd: REPO_ROOT, env });
    assert.equal(ours.code, 0, ours.stderr);
    assert.match(ours.stdout, new RegExp(`^Backend URL: file://${REPO_ROOT}/\\.pulumi-state$`, "m"));
    const theirs = await run("pulumi", ["whoami", "--verbose"], { cwd: REPO_ROOT, env: { ...env, PULUMI_BACKEND_URL: `file://${backend}` } });
    assert.equal(theirs.code, 0, theirs.stderr);
    assert.match(theirs.stdout, new RegExp(`^Backend URL: file://${backend}$`, "m"));
  } finally {
    fs.rmSync(dir, { recursive: true });
    fs.rmSync(backend, { recursive: true });
  }
});

const LINK = path.join(REPO_ROOT, "node_modules/.bin/pulumi");

test("after set-up, `npx pulumi` in the project folder is the wrapper", { skip: !fs.existsSync(LINK) && "set-up (scripts/setup.sh, run by npm test) has not linked node_modules/.bin/pulumi in this checkout" }, async () => {
  assert.equal(fs.realpathSync(LINK), fs.realpathSync(WRAPPER));
  const r = await run("npx", ["--no-install", "pulumi", "version"], { cwd: REPO_ROOT, env: process.env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), PINNED);
});
