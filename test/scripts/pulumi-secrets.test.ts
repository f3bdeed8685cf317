// `npx pulumi` (scripts/pulumi.sh) and the secrets passphrase, for real: the pinned Pulumi CLI
// on a throwaway project (its own Pulumi.yaml, stacks/ and file:// backend), run without a
// terminal as CI and scripts run it. No passphrase: Pulumi refuses a secret and writes
// nothing; an empty one: the wrapper refuses before Pulumi runs; a real one: the stack file's
// salt does not open with "" (checked with lib/secrets-passphrase.ts, which the real CLI's
// salts verify). A stack encrypted with "" (made by the bare CLI, as the project's old default
// did) is reported by the next command with the rotation steps.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { pulumiEnv, REPO_ROOT } from "../../lib/pulumi-env";
import { saltOpensWith, stacksWithEmptyPassphrase } from "../../lib/secrets-passphrase";

const WRAPPER = path.join(REPO_ROOT, "scripts/pulumi.sh");
const SENTINEL = `sk-sentinel-${process.pid}-do-not-leak`;

interface Project {
  dir: string;
  env: NodeJS.ProcessEnv;
  stackFile(stack: string): string;
  /** Every file of the project and its state, as text: where a secret must not be. */
  allText(): string;
}

function project(): Project {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pulumi-secrets-"));
  fs.mkdirSync(path.join(dir, "stacks"));
  fs.mkdirSync(path.join(dir, "state"));
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: secrets-check\nruntime: nodejs\nstackConfigDir: stacks\n");
  const env: NodeJS.ProcessEnv = { ...process.env, PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`, DFLASH_SALT_CHECK_CACHE: path.join(dir, "salt-checks.json") };
  delete env.PULUMI_CONFIG_PASSPHRASE;
  delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
  const files = (d: string): string[] => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(d, e.name)) : [path.join(d, e.name)]));
  return {
    dir,
    env,
    stackFile: (stack) => path.join(dir, "stacks", `Pulumi.${stack}.yaml`),
    allText: () => files(dir).map((f) => fs.readFileSync(f, "utf8")).join("\n"),
  };
}

/** `npx pulumi ARGS` in the project folder, without a terminal (stdin closed). */
function npxPulumi(p: Project, args: string[], env: NodeJS.ProcessEnv = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync("bash", [WRAPPER, ...args], { cwd: p.dir, env: { ...p.env, ...env }, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function assertNoSecretAnywhere(p: Project): void {
  const text = p.allText();
  for (const form of [SENTINEL, Buffer.from(SENTINEL).toString("base64"), JSON.stringify(SENTINEL)]) assert.ok(!text.includes(form), `the secret (as ${form}) is in a file of the project or its state`);
}

test("without a passphrase, stack init and config set --secret are refused without a terminal, and nothing is written", () => {
  const p = project();
  try {
    const init = npxPulumi(p, ["stack", "init", "b16t4-w2048"]);
    assert.notEqual(init.code, 0, init.stdout);
    assert.match(init.stderr, /passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE/);
    // A stack made elsewhere with a passphrase: a secret still needs it.
    assert.equal(npxPulumi(p, ["stack", "init", "b16t4-w2048"], { PULUMI_CONFIG_PASSPHRASE: "the team passphrase" }).code, 0);
    const before = fs.readFileSync(p.stackFile("b16t4-w2048"), "utf8");
    const set = npxPulumi(p, ["config", "set", "--secret", "apiKey", SENTINEL, "--stack", "b16t4-w2048"]);
    assert.notEqual(set.code, 0, set.stdout);
    assert.match(set.stderr, /passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE/);
    assert.equal(fs.readFileSync(p.stackFile("b16t4-w2048"), "utf8"), before, "the stack file changed");
    assertNoSecretAnywhere(p);
  } finally {
    fs.rmSync(p.dir, { recursive: true, force: true });
  }
});

test("an empty passphrase is refused by the wrapper before Pulumi runs: no stack, no file", () => {
  const p = project();
  try {
    for (const env of [{ PULUMI_CONFIG_PASSPHRASE: "" }, { PULUMI_CONFIG_PASSPHRASE_FILE: path.join(p.dir, "empty-passphrase") }]) {
      fs.writeFileSync(path.join(p.dir, "empty-passphrase"), "\n");
      const init = npxPulumi(p, ["stack", "init", "b16t4-w2048"], env);
      assert.equal(init.code, 2, init.stderr);
      assert.match(init.stderr, /^pulumi: refused: PULUMI_CONFIG_PASSPHRASE(_FILE=\S+ is empty| is set but empty)\. An empty passphrase protects nothing.*\nNothing was run\.$/m);
      const set = npxPulumi(p, ["config", "set", "--secret", "apiKey", SENTINEL, "--stack", "b16t4-w2048"], env);
      assert.equal(set.code, 2, set.stderr);
    }
    assert.deepEqual(fs.readdirSync(path.join(p.dir, "stacks")), []);
    assert.deepEqual(fs.readdirSync(path.join(p.dir, "state")), [], "the backend was touched");
    assertNoSecretAnywhere(p);
  } finally {
    fs.rmSync(p.dir, { recursive: true, force: true });
  }
});

test("with a passphrase, config set --secret works, and the stack file's secrets do not open with the empty passphrase", () => {
  const p = project();
  const env = { PULUMI_CONFIG_PASSPHRASE: "correct horse battery staple" };
  try {
    assert.equal(npxPulumi(p, ["stack", "init", "b16t4-w2048"], env).code, 0);
    const set = npxPulumi(p, ["config", "set", "--secret", "apiKey", SENTINEL, "--stack", "b16t4-w2048"], env);
    assert.equal(set.code, 0, set.stderr);
    const file = YAML.parse(fs.readFileSync(p.stackFile("b16t4-w2048"), "utf8")) as { encryptionsalt: string; config: Record<string, { secure?: string }> };
    assert.ok(file.config["secrets-check:apiKey"].secure, "apiKey is stored as a secure value");
    assert.equal(saltOpensWith(file.encryptionsalt, env.PULUMI_CONFIG_PASSPHRASE), true, "the real CLI's salt opens with its passphrase");
    assert.equal(saltOpensWith(file.encryptionsalt, ""), false);
    assertNoSecretAnywhere(p);
    const get = npxPulumi(p, ["config", "get", "apiKey", "--stack", "b16t4-w2048"], env);
    assert.equal(get.stdout.trim(), SENTINEL, get.stderr);
    assert.deepEqual(stacksWithEmptyPassphrase(path.join(p.dir, "stacks"), p.env.PULUMI_BACKEND_URL), []);
    assert.doesNotMatch(get.stderr, /EMPTY passphrase/);
  } finally {
    fs.rmSync(p.dir, { recursive: true, force: true });
  }
});

test("a stack whose secrets open with the empty passphrase is reported by the next command, with the rotation steps", () => {
  const p = project();
  try {
    // As the project's old default (PULUMI_CONFIG_PASSPHRASE="") made it: the bare CLI.
    const bare = path.join(pulumiEnv().PATH.split(":")[0], "pulumi");
    const leaky = { ...p.env, PULUMI_CONFIG_PASSPHRASE: "" };
    for (const args of [["stack", "init", "leaky"], ["config", "set", "--secret", "apiKey", SENTINEL, "--stack", "leaky"], ["stack", "init", "fine"]]) {
      const r = spawnSync(bare, args, { cwd: p.dir, env: args.includes("fine") ? { ...p.env, PULUMI_CONFIG_PASSPHRASE: "a real one" } : leaky, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    }
    const ls = npxPulumi(p, ["stack", "ls"], { PULUMI_CONFIG_PASSPHRASE: "a real one" });
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stderr, /warning: the secrets of this stack open with the EMPTY passphrase: .*treat every secret in them \(apiKey, hfToken, sshPrivateKey\) as leaked:\n {2}leaky: stacks\/Pulumi\.leaky\.yaml\n/);
    assert.match(ls.stderr, /PULUMI_CONFIG_PASSPHRASE= npx pulumi stack change-secrets-provider passphrase --stack STACK/);
    assert.match(ls.stderr, /npx pulumi config set --secret --stack STACK apiKey NEW-KEY/);
    assert.doesNotMatch(ls.stderr, /^ {2}fine:/m);
    // Its stack file without the salt (a clone made before it was committed): the state's salt still tells.
    fs.writeFileSync(p.stackFile("leaky"), "config: {}\n");
    const again = npxPulumi(p, ["stack", "ls"], { PULUMI_CONFIG_PASSPHRASE: "a real one" });
    assert.match(again.stderr, /^ {2}leaky: state\/\.pulumi\/stacks\/secrets-check\/leaky\.json$/m);
    // The way off it is the one command the wrapper lets run with the empty passphrase.
    const move = npxPulumi(p, ["stack", "change-secrets-provider", "passphrase", "--stack", "leaky"], { PULUMI_CONFIG_PASSPHRASE: "" });
    assert.doesNotMatch(move.stderr, /refused: PULUMI_CONFIG_PASSPHRASE is set but empty/);
  } finally {
    fs.rmSync(p.dir, { recursive: true, force: true });
  }
});
