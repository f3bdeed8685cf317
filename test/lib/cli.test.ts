// Every command of the project reads its command line before it does anything: --help
// prints the usage generated from its declaration and exits 0, a typo, a missing or bad
// value or a stray argument exits 2 naming the flag and what is valid, and neither
// reaches set-up nor boots a host. The scripts run as child processes, as users run them
// (see test/support/commandLines.ts: set-up refuses to run there).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { inProjectFolder, existingDirectory, setUp } from "../../lib/cli";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { assertNothingStarted, assertRefused, assertUsage, npmRun, runScript, SETUP_REFUSED, simulatedHosts } from "../support/commandLines";
import { HELD_OUT_FAMILY_SEEDS } from "../../bench/adaptive/families";

/** Hosts the sweep (sweep-<pid>-<n>) and the demo (demo-<pid>) would boot. */
const SCRIPT_HOSTS = /^(sweep-\d+-\d+|demo-\d+)$/;

test("npm run sweep -- --help prints the options and starts nothing (no set-up, no hosts)", () => {
  const before = simulatedHosts();
  const r = npmRun("sweep", "--help");
  assertUsage(r, "usage: npm run sweep -- [options]");
  for (const option of ["--stacks GLOB", "--hosts FILE", "--sim-hosts N", "--sim-load-seconds S", "--resume", "--keep-going", "-h, --help"]) {
    assert.ok(r.stdout.includes(`\n  ${option} `), `usage lists ${option}:\n${r.stdout}`);
  }
  assert.match(r.stdout, /--sim-hosts N +boot N simulated hosts for the sweep \(a positive whole number; default: 2; not with --hosts\)/);
  assertNothingStarted(r, before, SCRIPT_HOSTS);
});

test("npm run sweep -- --stack b8 (a typo of --stacks) is refused naming --stack, before set-up", () => {
  const before = simulatedHosts();
  const r = npmRun("sweep", "--stack", "b8");
  assertRefused(r, "npm run sweep: unknown option --stack; did you mean --stacks? (valid: --stacks, --hosts, --sim-hosts, --sim-load-seconds, --sim-surface, --resume, --keep-going, --strategy, --budgets, --topks, --windows, --compact-cache, --objective, --long-context, --long-weight, --gpu-hours, --launches, --seed, --relaunches, --help)", "npm run sweep -- --help");
  assertNothingStarted(r, before, SCRIPT_HOSTS);
});

test("sweep: a missing value, a bad value, a pattern that matches no stack file, a stray argument, --hosts with --sim-hosts", () => {
  const before = simulatedHosts();
  const help = "npm run sweep -- --help";
  const cases: [string[], string][] = [
    [["--stacks"], "--stacks needs a value (GLOB, a pattern (* any characters, ? one) matching stack names of stacks/Pulumi.<name>.yaml)"],
    [["--sim-hosts", "two"], '--sim-hosts must be a positive whole number, got "two"'],
    [["--sim-load-seconds", "0"], '--sim-load-seconds must be a positive number, got "0"'],
    [["--stacks", "b99*"], 'got "b99*": it matches none of b12t6-w2048, b16t4-w2048, b4t4-w2048, b8t4-w2048, b8t4-wnone'],
    [["--hosts", "no-such-hosts.json"], '--hosts must be a JSON file listing hosts'],
    [["--hosts", "package.json"], 'got "package.json": it holds no list of hosts'],
    [["--resume", "b8"], 'unexpected argument "b8" (this command takes no arguments)'],
    [["--hosts", "package.json", "--sim-hosts", "3"], "--sim-hosts and --hosts exclude each other; give one of them"],
    [["--objective", "long"], "--objective is an option of --strategy adaptive"],
    [["--strategy", "adaptive", "--stacks", "b8*"], "--stacks is an option of --strategy full (the adaptive sweep makes its stacks from the grid options)"],
    [["--strategy", "adaptive", "--sim-surface", "package.json"], "surface: surface has unknown key(s)"],
  ];
  for (const [args, message] of cases) {
    const r = runScript("scripts/sweep.ts", ...args);
    assertRefused(r, message, help);
    assertNothingStarted(r, before, SCRIPT_HOSTS);
  }
});

test("sweep: each host of a --hosts file is checked by the schema of dflash-sglang:host", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sweep-hosts-"));
  try {
    const file = path.join(dir, "hosts.json");
    fs.writeFileSync(file, JSON.stringify([{ name: "gpu-1", address: "10.0.0.5", hostKey: "ssh-ed25519 AAAAC3Nza", privateKeyPath: "/root/.ssh/id" }, { address: "-oProxyCommand=x", hostKey: "nope" }]));
    const r = runScript("scripts/sweep.ts", "--hosts", file);
    assertRefused(r, 'host 2: host.address must not begin with "-" (it would be read as a command-line option)', "npm run sweep -- --help");
    assert.match(r.stderr, /host\.hostKey must be an SSH public key line/);
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test("sweep on real hosts: without a passphrase, or with an empty one, it is refused before set-up, saying what to set", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sweep-hosts-"));
  const saved = { p: process.env.PULUMI_CONFIG_PASSPHRASE, f: process.env.PULUMI_CONFIG_PASSPHRASE_FILE, b: process.env.PULUMI_BACKEND_URL };
  try {
    const file = path.join(dir, "hosts.json");
    fs.writeFileSync(file, JSON.stringify([{ name: "gpu-1", address: "10.0.0.5", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholderReplaceWithYourHostKeyxxxxxxxx", privateKeyPath: "/root/.ssh/id" }]));
    delete process.env.PULUMI_CONFIG_PASSPHRASE;
    delete process.env.PULUMI_CONFIG_PASSPHRASE_FILE;
    delete process.env.PULUMI_BACKEND_URL;
    const none = runScript("scripts/sweep.ts", "--hosts", file);
    assert.equal(none.status, 1, none.stderr);
    assert.match(none.stderr, /refused: a sweep on real hosts keeps its stacks' secrets with your passphrase, and none is set: export PULUMI_CONFIG_PASSPHRASE \(or PULUMI_CONFIG_PASSPHRASE_FILE\)\. Nothing was deployed\./);
    assert.doesNotMatch(none.stderr, SETUP_REFUSED);
    process.env.PULUMI_CONFIG_PASSPHRASE = "";
    const empty = runScript("scripts/sweep.ts", "--hosts", file);
    assert.equal(empty.status, 1, empty.stderr);
    assert.match(empty.stderr, /refused: PULUMI_CONFIG_PASSPHRASE is set but empty\. An empty passphrase protects nothing/);
    assert.doesNotMatch(empty.stderr, SETUP_REFUSED);
  } finally {
    for (const [key, value] of [["PULUMI_CONFIG_PASSPHRASE", saved.p], ["PULUMI_CONFIG_PASSPHRASE_FILE", saved.f], ["PULUMI_BACKEND_URL", saved.b]] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    fs.rmSync(dir, { recursive: true });
  }
});

test("report, grid, demo and campaign: --help through npm run prints their usage and starts nothing", () => {
  const before = simulatedHosts();
  for (const [name, usage, options] of [
    ["report", "usage: npm run report -- [options]", ["--stacks GLOB", "--from SOURCE", "--out DIR", "--workdir DIR"]],
    ["grid", "usage: npm run grid -- [options]", ["--budgets LIST", "--topks LIST", "--windows LIST", "--compact-cache MODE", "--out DIR", "--force"]],
    ["demo", "usage: npm run demo --", []],
    ["campaign", "usage: npm run campaign -- [options]", ["--seed S", "--sequences N", "--steps K", "--shrink"]],
    ["review", "usage: npm run review -- [options]", ["--base REF", "--stacks GLOB", "--out FILE", "--plans DIR"]],
    ["apply", "usage: npm run apply -- [options]", ["--plans DIR"]],
  ] as const) {
    const r = npmRun(name, "-h");
    assertUsage(r, usage);
    for (const option of options) assert.ok(r.stdout.includes(`\n  ${option} `), `${name} usage lists ${option}:\n${r.stdout}`);
    assertNothingStarted(r, before, SCRIPT_HOSTS);
  }
});

test("report, grid, demo, review and apply refuse mistakes before anything starts", () => {
  const before = simulatedHosts();
  const cases: [string, string[], string, string][] = [
    ["scripts/report.ts", ["--stack", "b8"], "unknown option --stack; did you mean --stacks?", "npm run report -- --help"],
    ["bench/campaign.ts", ["--sequence", "3"], "unknown option --sequence; did you mean --sequences?", "npm run campaign -- --help"],
    ["bench/campaign.ts", ["--steps", "0"], '--steps must be a positive whole number, got "0"', "npm run campaign -- --help"],
    ["scripts/report.ts", ["--out"], "--out needs a value (DIR, a folder, made if missing, relative to the project folder)", "npm run report -- --help"],
    ["scripts/report.ts", ["--workdir", "/nonexistent"], '--workdir must be an existing directory, relative to the project folder, got "/nonexistent": no such directory', "npm run report -- --help"],
    ["scripts/report.ts", ["--out", "package.json"], 'got "package.json": it exists and is not a folder', "npm run report -- --help"],
    ["scripts/report.ts", ["--from", "demos"], '--from must be one of "project", "demo", "sweep", got "demos"', "npm run report -- --help"],
    ["scripts/report.ts", ["--from", "sweep", "--workdir", "."], "--workdir names the project folder to read, so it goes with --from project only (got --from sweep)", "npm run report -- --help"],
    ["scripts/grid.ts", ["--budget", "4"], "unknown option --budget; did you mean --budgets?", "npm run grid -- --help"],
    ["scripts/grid.ts", ["--windows", "2048,0"], '--windows must be a comma-separated list, each a positive whole number or "none", got "2048,0": item 2 ("0") is not a positive whole number or "none"', "npm run grid -- --help"],
    ["scripts/grid.ts", ["--compact-cache", "yes"], '--compact-cache must be one of "auto", "on", "off", got "yes"', "npm run grid -- --help"],
    ["scripts/grid.ts", ["--force=yes"], '--force takes no value, got "yes"', "npm run grid -- --help"],
    ["scripts/demo.ts", ["now"], 'unexpected argument "now" (this command takes no arguments)', "npm run demo -- --help"],
    ["scripts/demo.ts", ["--fast"], "unknown option --fast (valid: --help)", "npm run demo -- --help"],
    ["scripts/review.ts", ["--stack", "b8"], "unknown option --stack; did you mean --stacks?", "npm run review -- --help"],
    ["scripts/review.ts", ["--plans", "package.json"], 'got "package.json": it exists and is not a folder', "npm run review -- --help"],
    ["scripts/apply.ts", ["--plan", "x"], "unknown option --plan; did you mean --plans?", "npm run apply -- --help"],
    ["scripts/apply.ts", ["--plans", "/nonexistent"], '--plans must be an existing directory, relative to the project folder, got "/nonexistent": no such directory', "npm run apply -- --help"],
  ];
  for (const [script, args, message, help] of cases) {
    const r = runScript(script, ...args);
    assertRefused(r, message, help);
    assertNothingStarted(r, before, SCRIPT_HOSTS);
  }
});

test("a command line that is accepted goes on to set-up (so the checks above can fail)", () => {
  const r = runScript("scripts/report.ts", "--stacks", "no-such-stack-*");
  assert.equal(r.status, 1);
  assert.match(r.stderr, SETUP_REFUSED);
  assert.match(r.stderr, /report failed: set-up failed \(bash .*scripts\/setup\.sh --no-hosts ended with 3\)/);
});

test("grid needs no set-up: it writes its stack files", () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "grid-"));
  try {
    const r = runScript("scripts/grid.ts", "--budgets", "4,8", "--topks", "6", "--windows", "none", "--out", out);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(fs.readdirSync(out), ["Pulumi.b8t6-wnone.yaml"]);
    assert.match(r.stdout, /skipped {2}b4t6-wnone: topk 6 > budget 4/);
    // Pulumi reads stacks/ only: a file written elsewhere is said to be unread there.
    assert.match(r.stdout, /note: npx pulumi and npm run sweep read stack files from stacks\/ \(stackConfigDir in Pulumi\.yaml\), not from .*grid-.*: move the ones you want there/);
    // Every combination skipped: an error, and no folder made.
    const none = path.join(out, "none");
    const skippedAll = runScript("scripts/grid.ts", "--budgets", "4", "--topks", "6", "--windows", "none", "--out", none);
    assert.equal(skippedAll.status, 1);
    assert.match(skippedAll.stderr, /grid: every combination was skipped \(above\); nothing was written\. Change --budgets, --topks or --windows/);
    assert.ok(!fs.existsSync(none), "no empty folder");
  } finally {
    fs.rmSync(out, { recursive: true });
  }
});

test("the benchmarks and the pulumi guard read their command lines the same way", () => {
  for (const [script, options] of [
    ["bench/reconfigure.ts", ["--loads LIST", "--runs N", "--release S", "--stable S", "--baseline REV"]],
    ["bench/sweep-throughput.ts", ["--configs N", "--load S", "--hosts LIST"]],
    ["bench/client-overhead.ts", ["--runs N", "--tokens N"]],
    ["bench/faults.ts", ["--line LINE", "--sudo LINE", "--only TEXT"]],
    ["bench/adaptive-variants.ts", ["--variants JSON", "--seeds N,N", "--surfaces N", "--out NAME"]],
    ["scripts/pulumi-guard.ts", ["--allow-empty-passphrase", "--clear-stale-locks"]],
  ] as const) {
    const invocation = script.startsWith("bench/") ? `npx tsx ${script}` : script;
    const help = runScript(script, "--help");
    assertUsage(help, `usage: ${invocation}${options.length ? " [options]" : ""}`);
    for (const option of options) assert.ok(help.stdout.includes(`\n  ${option} `), `${script} usage lists ${option}:\n${help.stdout}`);
    assertRefused(runScript(script, "--rnus", "3"), "unknown option --rnus", `${invocation} --help`);
  }
  assertRefused(runScript("bench/sweep-throughput.ts", "--configs", "17"), '--configs must be a whole number from 1 to 16, got "17"', "npx tsx bench/sweep-throughput.ts --help");
  assertRefused(runScript("bench/faults.ts", "--line", "nightly"), /--line must be one of "release", "main", "both", got "nightly"/, "npx tsx bench/faults.ts --help");
  // A variant benchmark tunes on the training families: a held-out one is refused, and so is a misspelt option (it would run the defaults under the variant's name).
  assertRefused(runScript("bench/adaptive-variants.ts", "--seeds", `1,${HELD_OUT_FAMILY_SEEDS[0]}`), new RegExp(`--seeds must be .*item 2 \\("${HELD_OUT_FAMILY_SEEDS[0]}"\\) is not a family seed that is not held out .*: ${HELD_OUT_FAMILY_SEEDS[0]} is a held-out family: tune on the training families`), "npx tsx bench/adaptive-variants.ts --help");
  assertRefused(runScript("bench/adaptive-variants.ts", "--variants", '{"a": {"covr": 0.9}}'), /--variants must be .*variant "a": unknown option "covr"; valid: .*cover/, "npx tsx bench/adaptive-variants.ts --help");
  assertRefused(runScript("bench/reconfigure.ts", "--loads", "10,x"), '--loads must be a comma-separated list, each a positive number, got "10,x"', "npx tsx bench/reconfigure.ts --help");
});

test("setUp runs scripts/setup.sh and throws, naming it, when set-up fails", () => {
  const saved = process.env.DFLASH_FORBID_SETUP;
  process.env.DFLASH_FORBID_SETUP = "1";
  try {
    assert.throws(() => setUp({ hosts: true }), new RegExp(`^Error: set-up failed \\(bash ${REPO_ROOT}/scripts/setup\\.sh ended with 3\\)`));
    assert.throws(() => setUp({ hosts: false }), /setup\.sh --no-hosts ended with 3/);
  } finally {
    if (saved === undefined) delete process.env.DFLASH_FORBID_SETUP;
    else process.env.DFLASH_FORBID_SETUP = saved;
  }
});

test("paths given to the project's commands start at the project folder", () => {
  const bench = inProjectFolder(existingDirectory);
  assert.equal(bench.parse("bench"), path.join(REPO_ROOT, "bench"));
  assert.equal(bench.parse("/tmp"), "/tmp");
  assert.equal(bench.expects, "an existing directory, relative to the project folder");
  assert.throws(() => bench.parse("no-such-folder"), /no such directory/);
});
