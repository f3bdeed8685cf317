// Issue 23: hosts where root cannot log in. A simulated host with `PermitRootLogin no` and a
// user `deploy` whose sudo may run exactly the README's sudoers lines (become.ts sudoersFor):
// `up`, a failed reconfiguration's rollback, `refresh` and `destroy` work as they do for root,
// through `host.become: sudo`, and sudo's own log shows that every host step was the one
// command the sudoers file names. A second host whose sudo wants a password: the stack is
// refused before anything changes, naming the host and the user.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { sudoersFor } from "../../../components/sglang-service/become";
import { hostShell } from "../../support/hostShell";
import { failedUp } from "../../support/failedUp";
import { storedResultOfOutputs } from "../../../components/benchmark/compare";

const HOST = `sudo-${process.pid}`;
const PASSWORD_HOST = `sudopw-${process.pid}`;
const UNIT = "sglang-k26";
const KEY = `sk-sudo-${process.pid}`;
let host: hosts.HostInfo;
let passwordHost: hosts.HostInfo;
let ws: SimWorkspace;

const { sh, mainPid } = hostShell(() => host, UNIT);
const serving = async () => JSON.parse(await sh(`curl -s -H 'Authorization: Bearer ${KEY}' http://${host.address}:${host.sglangPort}/server_info`)) as Record<string, unknown>;
const settings = { "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 }, "dflash-sglang:benchmark": { enabled: false } };

/** Runs `command` over SSH as `user` on the host's tool port, as the tool would reach it. */
function sshAs(h: hosts.HostInfo, user: string, command: string): Promise<{ code: number; stderr: string }> {
  const args = ["-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", `UserKnownHostsFile=${h.knownHostsPath}`, "-o", "GlobalKnownHostsFile=/dev/null", "-i", h.privateKeyPath, "-p", String(h.port), "--", `${user}@${h.address}`, command];
  return new Promise((resolve) => {
    const child = spawn("ssh", args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code: code ?? 255, stderr }));
  });
}

/** Every command sudo ran for deploy since the host booted, from its log in the journal (refusals, `deploy : a password is required ; ...`, left out). */
async function sudoCommands(): Promise<string[]> {
  const log = await sh("journalctl -q --no-pager -o cat SYSLOG_IDENTIFIER=sudo");
  return log
    .split("\n")
    .filter((l) => /^\s*deploy : PWD=/.test(l))
    .map((l) => l.replace(/^.*; USER=/, "USER="));
}

before(async () => {
  const sglang = { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 };
  [host, passwordHost] = await Promise.all([hosts.start(HOST, { sglang, sudoers: sudoersFor("deploy") }), hosts.start(PASSWORD_HOST, { sglang, sudoers: "deploy ALL=(ALL) ALL\n" })]);
  ws = simWorkspace({
    main: { ...readRepoStackConfig("b16t4-w2048"), ...simHostConfig(host, UNIT), ...settings },
    password: { ...readRepoStackConfig("b16t4-w2048"), ...simHostConfig(passwordHost, UNIT), ...settings },
  });
  await (await ws.stack("main")).setConfig("dflash-sglang:apiKey", { value: KEY, secret: true });
});

after(async () => {
  await Promise.all([hosts.stop(HOST), hosts.stop(PASSWORD_HOST)]);
  ws?.cleanup();
});

test("the host: root may not log in where the tool connects, and deploy's sudo runs nothing but the README's command", async () => {
  assert.equal(host.user, "deploy");
  assert.match((await sshAs(host, "root", "true")).stderr, /Permission denied/);
  assert.equal((await sshAs(host, "deploy", "true")).code, 0);
  assert.match((await sshAs(host, "deploy", "sudo -n true")).stderr, /sudo: a password is required/);
  assert.match((await sshAs(host, "deploy", "sudo -n -- bash -c true")).stderr, /sudo: a password is required/);
});

test("up through sudo, with a short benchmark: the server serves, its secret files are root's 0600 files, and every host step was `sudo -n -- bash -s`", async () => {
  let output = "";
  // The benchmark reads who serves and holds the host's lock through sudo too.
  ws.setStackConfig("main", "benchmark", { runs: 1, warmupRuns: 0, maxTokens: 32, longContextTokens: [1024], concurrency: [2], coding: false });
  const up = await (await ws.stack("main")).up({ onOutput: (s) => (output += s) });
  ws.setStackConfig("main", "benchmark", { enabled: false });
  assert.equal(up.summary.result, "succeeded");
  assert.equal((storedResultOfOutputs(up.outputs) as { measured_on?: { mainPid?: number } } | null)?.measured_on?.mainPid, await mainPid(), "measured the server this stack deployed");
  assert.equal((await serving()).speculative_ddtree_budget, 16);
  assert.equal(await sh(`stat -c '%U %a' /etc/dflash-sglang/${UNIT}.*`).then((s) => [...new Set(s.split("\n"))].join()), "root 600");
  const commands = await sudoCommands();
  assert.ok(commands.length >= 4, `sudo ran the host steps: ${commands.join("\n")}`);
  assert.deepEqual([...new Set(commands)], ["USER=root ; COMMAND=/usr/bin/bash -s"], "one command, the one the sudoers file names");
  assert.doesNotMatch(output, new RegExp(KEY));
  assert.doesNotMatch((await sh("journalctl -q --no-pager -o cat SYSLOG_IDENTIFIER=sudo")), new RegExp(KEY), "no secret in sudo's log");
});

test("a failed reconfiguration through sudo rolls back to the previous configuration, which serves", async () => {
  const stack = await ws.stack("main");
  ws.setStackConfig("main", "speculative", readRepoStackConfig("b12t6-w2048")["dflash-sglang:speculative"]);
  hosts.fault(HOST, JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 } }));
  let message = "";
  try {
    message = await failedUp(stack, "the new configuration was to die of OOM");
  } finally {
    hosts.fault(HOST, "{}");
    ws.setStackConfig("main", "speculative", readRepoStackConfig("b16t4-w2048")["dflash-sglang:speculative"]);
  }
  assert.match(message, /CUDA out of memory/);
  assert.match(message, /Rolled back: the previous configuration \(stack main, unit [0-9a-f]{12}\) is back and serving/);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
});

// Issue 36: the host as it serves. A stopped unit used to read as "no change" in preview (and in
// the review comment) until a separate `refresh`; `up` then changed nothing while nothing served.
test("a unit stopped by hand, through sudo: preview says it is stopped and up starts it, with no refresh", async () => {
  const stack = await ws.stack("main");
  await sh(`systemctl stop ${UNIT}.service`);
  const preview = await stack.preview();
  assert.match(preview.stdout, new RegExp(`${UNIT} on \\S+ runs the unit of this stack \\([0-9a-f]{12}\\) as generation \\d+, stopped since [^;]+?: it serves nothing now; \`up\` starts it\\.`));
  assert.ok((preview.changeSummary.update ?? 0) >= 1, `preview plans the start: ${JSON.stringify(preview.changeSummary)}`);
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.match(up.stdout, /installed but stopped|not run this stack's unit/);
  assert.ok((await mainPid()) > 0);
  assert.equal((await serving()).speculative_ddtree_budget, 16);
});

test("destroy through sudo leaves nothing of the stack on the host, and sudo ran nothing but `bash -s`", async () => {
  await (await ws.stack("main")).destroy();
  assert.equal(await sh(`ls -d /etc/systemd/system/${UNIT}.service /var/lib/dflash-sglang /etc/dflash-sglang/${UNIT}.* 2>/dev/null || true`), "");
  assert.equal(await sh(`systemctl is-active ${UNIT}.service || true`), "inactive");
  assert.deepEqual([...new Set(await sudoCommands())], ["USER=root ; COMMAND=/usr/bin/bash -s"]);
});

test("a user whose sudo wants a password: up is refused before anything changes, naming the host and the user", async () => {
  const message = await failedUp(await ws.stack("password"), "deploy's sudo wants a password");
  assert.match(message, new RegExp(`the SSH user deploy on ${passwordHost.address.replace(/\./g, "\\.")}:22 cannot run the host steps as root with \`sudo -n -- bash -s\``));
  assert.match(message, /sudo said "sudo: a password is required"\. Nothing was run as root and nothing was changed/);
  const left = await hosts.ssh(passwordHost, "ls -d /var/lib/dflash-sglang /run/dflash-sglang 2>/dev/null || true");
  assert.equal(left.stdout.trim(), "", "nothing was staged or locked on the host");
});

test("a user that is not root, without host.become: refused before anything changes, saying to set host.become", async () => {
  const { become: _, ...asPlainUser } = simHostConfig(passwordHost, UNIT)["dflash-sglang:host"] as Record<string, unknown>;
  ws.setStackConfig("password", "host", asPlainUser);
  const message = await failedUp(await ws.stack("password"), "deploy is not root");
  assert.match(message, new RegExp(`the SSH user deploy on ${passwordHost.address.replace(/\./g, "\\.")}:22 is not root .* and host.become is not set\\. Nothing was changed\\. Set host.become: sudo`));
});
