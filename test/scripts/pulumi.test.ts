// `npx pulumi ...` in the project folder runs scripts/pulumi.sh (set-up links it as
// node_modules/.bin/pulumi): the pinned CLI with the project's defaults, offline. Only
// commands that read run here (version, whoami).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
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

test("`stack rm` through the wrapper keeps the stack's settings file unless asked with --remove-config, and says so", async () => {
  const { dir, env } = npxLikePath();
  // A project of its own (the repo's stacks/ stays untouched), with its own file backend.
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "pulumi-rm-"));
  try {
    fs.writeFileSync(path.join(project, "Pulumi.yaml"), "name: rm-check\nruntime: nodejs\nstackConfigDir: stacks\n");
    fs.mkdirSync(path.join(project, "state"));
    const e = { ...env, PULUMI_BACKEND_URL: `file://${path.join(project, "state")}`, PULUMI_CONFIG_PASSPHRASE: "rm-check" };
    const file = path.join(project, "stacks", "Pulumi.dev.yaml");
    const pulumi = async (...args: string[]) => {
      const r = await run("pulumi", args, { cwd: project, env: e });
      assert.equal(r.code, 0, `pulumi ${args.join(" ")}: ${r.stderr}`);
      return r;
    };
    await pulumi("stack", "init", "dev");
    assert.ok(fs.existsSync(file), "stack init wrote the settings file");
    assert.match(fs.readFileSync(file, "utf8"), /^encryptionsalt: /m);
    const kept = await pulumi("stack", "rm", "--yes", "--stack", "dev");
    assert.match(kept.stderr, /keeping the stack's settings file .* --preserve-config .* --remove-config/);
    assert.ok(fs.existsSync(file), "the settings file is still there");
    // Its removed stack's salt, which encrypts nothing there, is taken out.
    assert.match(kept.stderr, /took the removed stack's encryptionsalt out of stacks\/Pulumi\.dev\.yaml/);
    assert.doesNotMatch(fs.readFileSync(file, "utf8"), /encryptionsalt/);
    // A file with a secret keeps the salt that encrypts it.
    await pulumi("stack", "init", "dev");
    await pulumi("config", "set", "--secret", "--stack", "dev", "token", "not-a-real-one");
    const withSecret = await pulumi("stack", "rm", "--yes", "--force", "--stack", "dev");
    assert.doesNotMatch(withSecret.stderr, /took the removed stack's encryptionsalt/);
    assert.match(fs.readFileSync(file, "utf8"), /^encryptionsalt: /m);
    fs.writeFileSync(file, "config: {}\n");
    assert.doesNotMatch((await pulumi("stack", "ls", "--json")).stdout, /"dev"/, "the stack itself is gone");
    await pulumi("stack", "init", "dev");
    const removed = await pulumi("stack", "rm", "--yes", "--remove-config", "--stack", "dev");
    assert.doesNotMatch(removed.stderr, /keeping/);
    assert.ok(!fs.existsSync(file), "asked to, it removes the file too");
  } finally {
    fs.rmSync(dir, { recursive: true });
    fs.rmSync(project, { recursive: true, force: true });
  }
});

test("every project command's npm step links `npx pulumi` to the wrapper, also when the dependencies are already installed", () => {
  // A copy of the project's npm step in a folder of its own, dependencies already there.
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "npm-deps-"));
  try {
    fs.mkdirSync(path.join(root, "scripts"));
    for (const f of ["npm-deps.sh", "node-env.sh"]) fs.copyFileSync(path.join(REPO_ROOT, "scripts", f), path.join(root, "scripts", f));
    fs.copyFileSync(path.join(REPO_ROOT, "package-lock.json"), path.join(root, "package-lock.json"));
    fs.mkdirSync(path.join(root, "node_modules/.bin"), { recursive: true });
    fs.copyFileSync(path.join(root, "package-lock.json"), path.join(root, "node_modules/.dflash-lock-stamp"));
    for (const args of [["--if-missing"], []]) {
      fs.rmSync(path.join(root, "node_modules/.bin/pulumi"), { force: true });
      const r = spawnSync("bash", [path.join(root, "scripts/npm-deps.sh"), ...args], { encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /npm ci/, "installed already: no npm ci");
      assert.equal(fs.readlinkSync(path.join(root, "node_modules/.bin/pulumi")), "../../scripts/pulumi.sh", `npm-deps.sh ${args.join(" ")}`);
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

// Issue 63: Pulumi's "no stack named 'X' found" names none of the stacks there are. Through the
// wrapper, a --stack that has neither a stack file nor a stack in the backend is told, before
// Pulumi's error, the stacks that exist (stack files, and the backend's) and how to add it.
test("a --stack that exists nowhere lists the stacks that do and how to add it, before Pulumi's error", async () => {
  const { dir, env } = npxLikePath();
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "pulumi-nostack-"));
  try {
    fs.writeFileSync(path.join(project, "Pulumi.yaml"), "name: nostack-check\nruntime: nodejs\nstackConfigDir: stacks\n");
    fs.mkdirSync(path.join(project, "state"));
    const e = { ...env, PULUMI_BACKEND_URL: `file://${path.join(project, "state")}`, PULUMI_CONFIG_PASSPHRASE: "nostack-check" };
    const pulumi = (...args: string[]) => run("pulumi", args, { cwd: project, env: e });
    // A stack in the backend only (its file gone), and a stack file only (no stack yet).
    assert.equal((await pulumi("stack", "init", "in-backend")).code, 0);
    fs.rmSync(path.join(project, "stacks", "Pulumi.in-backend.yaml"));
    fs.writeFileSync(path.join(project, "stacks", "Pulumi.b16t4-w2048.yaml"), "config: {}\n");
    const r = await pulumi("config", "--stack", "b16t4-w248");
    assert.notEqual(r.code, 0);
    const ours = r.stderr.indexOf("pulumi: no stack b16t4-w248:");
    assert.ok(ours >= 0, r.stderr);
    assert.ok(ours < r.stderr.indexOf("no stack named 'b16t4-w248' found"), "before Pulumi's error");
    assert.match(r.stderr, /^pulumi: no stack b16t4-w248: stacks\/ has no Pulumi\.b16t4-w248\.yaml, and the backend \(file:\/\/.*\) has no stack b16t4-w248\. Did you mean b16t4-w2048\?$/m);
    assert.match(r.stderr, /^ {2}stack files in stacks\/: b16t4-w2048$/m);
    assert.match(r.stderr, /^ {2}stacks in the backend: in-backend$/m);
    assert.match(r.stderr, /^ {4}cp stacks\/Pulumi\.b16t4-w2048\.yaml stacks\/Pulumi\.b16t4-w248\.yaml\n {4}npx pulumi stack init b16t4-w248$/m);
    // The same with --stack=X.
    assert.match((await pulumi("config", "--stack=nowhere")).stderr, /^pulumi: no stack nowhere: /m);
    // A stack that exists somewhere, and the commands that create one, get no note.
    for (const args of [["config", "--stack", "in-backend"], ["config", "--stack", "b16t4-w2048"], ["stack", "init", "--stack", "fresh"], ["stack", "select", "--create", "--stack", "other"]]) {
      assert.doesNotMatch((await pulumi(...args)).stderr, /pulumi: no stack/, args.join(" "));
    }
  } finally {
    fs.rmSync(dir, { recursive: true });
    fs.rmSync(project, { recursive: true, force: true });
  }
});
