// `npm run simhost -- <command>` reads its command line before it does anything: the
// overview and each command's usage on --help (exit 0), mistakes refused with exit 2
// naming the flag and what is valid, and no host image built or host booted for either.
// Child processes, as users run it (see test/support/commandLines.ts).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { assertNothingStarted, assertRefused, assertUsage, npmRun, runScript, SETUP_REFUSED, simulatedHosts } from "../support/commandLines";

const NAME = `cli-test-${process.pid}`;
const OURS = new RegExp(`^${NAME}$`);
const simhost = (...args: string[]) => runScript("simhost/cli.ts", ...args);

test("npm run simhost -- --help lists the commands and starts nothing", () => {
  const before = simulatedHosts();
  const r = npmRun("simhost", "--help");
  assertUsage(r, "usage: npm run simhost -- <command> [options]");
  for (const line of ["start NAME [options]", "stop [NAME] [options]", "reboot NAME [options]", "status", "reclaim", "fault NAME JSON", "stack-config NAME STACK", "configure NAME JSON"]) {
    assert.match(r.stdout, new RegExp(`\\n {2}${line.replace(/[[\]]/g, "\\$&")} `), `overview lists ${line}`);
  }
  // Issue 63: the SGLang simulator's settings, from the list the parser checks against.
  for (const help of [r.stdout, simhost("start", "--help").stdout, simhost("configure", "--help").stdout]) {
    assert.match(help, /The SGLang simulator's settings \(--sglang, configure; simhost\/sim\/sglang\/settings\.ts\), any other key refused:\n {2}profile +the SGLang build simulated/);
    assert.match(help, /\n {2}loadSeconds +seconds the weights take to load/);
  }
  assertNothingStarted(r, before, OURS);
});

test("each command has its own usage", () => {
  const start = simhost("start", "--help");
  assertUsage(start, "usage: npm run simhost -- start NAME [options]");
  assert.match(start.stdout, /--gpus N +GPUs the simulated nvidia-smi reports \(a positive whole number; default: 8\)/);
  assert.match(start.stdout, /--boot-timeout SECONDS +how long the boot may take \(a positive number; default: 60\)/);
  assertUsage(simhost("stop", "-h"), "usage: npm run simhost -- stop [NAME] [options]");
  assertUsage(simhost("fault", "--help"), "usage: npm run simhost -- fault NAME JSON");
  const reboot = simhost("reboot", "--help");
  assertUsage(reboot, "usage: npm run simhost -- reboot NAME [options]");
  assert.match(reboot.stdout, /--power-cut +cut the power: every process of the host SIGKILLed at once/);
});

test("mistakes are refused naming what is valid, before any host image is built or host booted", () => {
  const before = simulatedHosts();
  const start = "npm run simhost -- start --help";
  const cases: [string[], string, string][] = [
    [[], "npm run simhost: missing command: one of start, stop, reboot, status, reclaim, fault, stack-config, configure", "npm run simhost -- --help"],
    [["strat", NAME], 'unknown command "strat"; did you mean start?', "npm run simhost -- --help"],
    [["start", NAME, "--gpu", "4"], "npm run simhost -- start: unknown option --gpu; did you mean --gpus? (valid: --gpus, --gpu-memory-mib, --sglang, --models, --boot-timeout, --sudo, --locale, --help)", start],
    [["start", NAME, "--gpus"], "--gpus needs a value (N, a positive whole number)", start],
    [["start", NAME, "--gpus", "0"], '--gpus must be a positive whole number, got "0"', start],
    [["start", NAME, "--sglang", "{profile: x}"], '--sglang must be a JSON object, e.g. {"profile":"ddtree-fork"}, got "{profile: x}": not valid JSON', start],
    [["start", NAME, "--models", '[{"path":"models/m","sizeGiB":1}]'], 'entry 1: "path" must be an absolute path', start],
    [["start", NAME, "--sudo", "nopasswd"], '--sudo must be one of "all", "listed", "password", got "nopasswd"', start],
    [["start", "Bad_Name"], `NAME must be a host name: 1-63 lower-case letters, digits and '-', starting with a letter or digit, got "Bad_Name"`, start],
    [["start"], "missing NAME: the host's name", start],
    [["stop"], "stop takes either NAME or --all", "npm run simhost -- stop --help"],
    [["stop", NAME, "--all"], "stop takes either NAME or --all", "npm run simhost -- stop --help"],
    [["reboot"], "missing NAME: the host (running: see status)", "npm run simhost -- reboot --help"],
    [["reboot", NAME, "--powercut"], "npm run simhost -- reboot: unknown option --powercut; did you mean --power-cut? (valid: --power-cut, --boot-timeout, --help)", "npm run simhost -- reboot --help"],
    [["reboot", NAME, "--power-cut=yes"], '--power-cut takes no value, got "yes"', "npm run simhost -- reboot --help"],
    [["status", NAME], `unexpected argument "${NAME}" (this command takes no arguments)`, "npm run simhost -- status --help"],
    [["reclaim", "--all"], "npm run simhost -- reclaim: unknown option --all (valid: --help)", "npm run simhost -- reclaim --help"],
    [["fault", NAME, '{"gpuReleaseDelay":5}'], 'unknown fault "gpuReleaseDelay"', "npm run simhost -- fault --help"],
    [["configure", NAME, "[1]"], "JSON must be a JSON object", "npm run simhost -- configure --help"],
    // Issue 63: the simulator's settings are checked against its one list (simhost/sim/sglang/settings.ts).
    [["start", NAME, "--sglang", '{"loadSecs":60}'], "unknown setting loadSecs; did you mean loadSeconds? valid: profile, line, loadSeconds, loadSecondsPerGiB, warmupSeconds, schedulerExitSeconds, speedScale, version, rendezvousSeconds, removedEndpoints, surface", start],
    [["start", NAME, "--sglang", '{"loadSeconds":"60"}'], 'setting loadSeconds must be a number of seconds, 0 or more; got "60"', start],
    [["configure", NAME, '{"speedscale":2}'], "unknown setting speedscale; did you mean speedScale? valid: ", "npm run simhost -- configure --help"],
    [["stack-config", NAME, "b16t4 w2048"], `STACK must be a stack name: letters, digits, '-', '_' and '.', got "b16t4 w2048"`, "npm run simhost -- stack-config --help"],
    [["stack-config", NAME], "missing STACK: the stack, e.g. b16t4-w2048", "npm run simhost -- stack-config --help"],
  ];
  for (const [args, message, help] of cases) {
    const r = simhost(...args);
    assertRefused(r, message, help);
    assertNothingStarted(r, before, OURS);
  }
});

test("stack-config of a host that is not running says how to start it, and prints no line", () => {
  const r = simhost("stack-config", NAME, "b16t4-w2048");
  assert.equal(r.status, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, new RegExp(`host ${NAME} is not running: start it with npm run simhost -- start ${NAME}`));
});

test("reboot of a host that is not running says how to start it, and prints no line", () => {
  const r = simhost("reboot", NAME, "--power-cut");
  assert.equal(r.status, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, new RegExp(`host ${NAME} is not running: start it with npm run simhost -- start ${NAME}`));
});

test("an accepted start goes on to prepare the host image (so the checks above can fail)", () => {
  const r = simhost("start", NAME, "--gpus", "2");
  assert.equal(r.status, 1);
  assert.match(r.stderr, SETUP_REFUSED);
  assert.match(r.stderr, /simhost: preparing the host image failed \(bash .*simhost\/prepare\.sh ended with 3\)/);
  assert.ok(!simulatedHosts().has(NAME));
});

test("simhost start boots the SGLang build Pulumi.yaml's sglangBuild names (a flag map: the simulator's default)", async () => {
  const { projectBuildProfile } = await import("../../simhost/hosts");
  const fs = await import("node:fs");
  const path = await import("node:path");
  assert.equal(projectBuildProfile(fs.readFileSync(path.join(__dirname, "..", "..", "Pulumi.yaml"), "utf8")), "ddtree-fork", "the project's own");
  assert.equal(projectBuildProfile("config:\n  dflash-sglang:sglangBuild: upstream\n"), "upstream");
  assert.equal(projectBuildProfile("config:\n  dflash-sglang:sglangBuild:\n    value: upstream\n"), "upstream", "the long form");
  assert.equal(projectBuildProfile("config:\n  dflash-sglang:sglangBuild:\n    flags: {budget: --x}\n"), undefined);
  assert.equal(projectBuildProfile("name: p\n"), undefined);
});
