// Credential rotation (issue 12, scenario 5): the SSH key the tool uses (a new
// host.privateKeyPath, then the secret sshPrivateKey) and the host's own key are rotated,
// the old key revoked on the host; `refresh`, `up` and `destroy` then reach the host with
// the new ones. State still holds the old ones until an `up`, so whatever runs from state
// alone (refresh's read, destroy's teardown) must take the stack's current configuration,
// which Pulumi hands to providers with --run-program. Fails on f93069e: its refresh read the
// host with the key from state. Issue 23: the first rotation also closes root's login to the
// tool, which then logs in as deploy and becomes root through sudo (host.become), the way a
// host is hardened once the tool no longer needs root's login.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { until } from "../../support/localSim";
import { sudoersFor } from "../../../components/sglang-service/become";

const HOST = `credentials-${process.pid}`;
const UNIT = "sglang-k26";
let host: hosts.HostInfo;
let ws: SimWorkspace;
let keys: string;

const { sh, mainPid } = hostShell(() => host, UNIT);

/** A fresh ed25519 key pair for the tool; returns the private key's path. */
function newKey(name: string): string {
  const file = path.join(keys, name);
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", file]);
  return file;
}

/**
 * Authorizes only `toolKey` for the tool, as the user deploy (the harness keeps root's login
 * with its own key), and gives the host a new ed25519 host key; returns it as `type base64`.
 * The harness's known_hosts follows.
 */
async function rotate(toolKey: string): Promise<string> {
  const harness = fs.readFileSync(`${host.privateKeyPath}.pub`, "utf8").trim();
  const tool = fs.readFileSync(`${toolKey}.pub`, "utf8").trim();
  const out = await sh(
    [
      `printf '%s\\n' '${harness}' > /root/.ssh/authorized_keys`,
      `mkdir -p /home/deploy/.ssh && printf '%s\\n' '${tool}' > /home/deploy/.ssh/authorized_keys && chmod 644 /home/deploy/.ssh/authorized_keys`,
      `echo ${Buffer.from(sudoersFor("deploy")).toString("base64")} | base64 -d > /etc/sudoers.d/deploy && chmod 440 /etc/sudoers.d/deploy`,
      "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub",
      "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key",
      "systemctl reload ssh",
      "cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub",
    ].join(" && "),
  );
  fs.writeFileSync(host.knownHostsPath, `${host.address} ${out}\n`);
  // The reloaded sshd presents the new key (bounded wait).
  for (let i = 0; (await hosts.ssh(host, "true")).code !== 0; i++) {
    assert.ok(i < 100, "sshd does not present its new host key");
    await new Promise((r) => setTimeout(r, 100));
  }
  return out;
}

const hostConfig = (over: Record<string, unknown>) => ({ ...(simHostConfig(host, UNIT)["dflash-sglang:host"] as Record<string, unknown>), ...over });

before(async () => {
  keys = fs.mkdtempSync(path.join(os.tmpdir(), "credentials-"));
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  const first = newKey("tool-1");
  await sh(`echo '${fs.readFileSync(`${first}.pub`, "utf8").trim()}' >> /root/.ssh/authorized_keys`);
  ws = simWorkspace({
    main: {
      ...readRepoStackConfig("b8t4-w2048"),
      ...simHostConfig(host, UNIT),
      "dflash-sglang:host": hostConfig({ privateKeyPath: first }),
      "dflash-sglang:safety": { stableSeconds: 1 },
      "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  assert.equal((await (await ws.stack("main")).up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
  fs.rmSync(keys, { recursive: true, force: true });
});

/**
 * How many commands sudo has run for deploy (its log in the journal). By SYSLOG_IDENTIFIER, the
 * tag in sudo's own line, not _COMM: journald reads _COMM from /proc of the sender, and a sudo
 * that exited before a busy journald got to its line has none (a line seen as missing).
 */
const sudoRuns = async () => Number(await sh("journalctl -q --no-pager -o cat SYSLOG_IDENTIFIER=sudo | grep -c '^ *deploy : PWD=.*COMMAND=/usr/bin/bash -s$' || true"));

test("a new key file, a new host key and a new SSH user (deploy, through sudo), root's login and the old key revoked: refresh, then up, reach the host with them", async () => {
  const second = newKey("tool-2");
  const hostKey = await rotate(second);
  ws.setStackConfig("main", "host", hostConfig({ privateKeyPath: second, hostKey, user: "deploy", become: "sudo" }));
  const stack = await ws.stack("main");
  const pid = await mainPid();
  const refresh = await stack.refresh({ runProgram: true });
  assert.equal(refresh.summary.result, "succeeded");
  // The program's own read, then the readiness provider's (its connection check and its read):
  // the provider too takes the SSH user and how it becomes root from the configuration.
  // sudo's log lines reach the journal after its command has run: under load the last one can
  // come a moment after refresh returns (a whole run, five files at once, read 2 right after it).
  const threeRuns = await until("sudo's third journal line", async () => ((await sudoRuns()) >= 3 ? true : undefined), 15_000).catch(() => false);
  assert.ok(threeRuns, `refresh read the host as root through sudo, as the configuration says now (sudo ran ${await sudoRuns()} command(s))`);
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.equal(await mainPid(), pid, "new credentials alone restart nothing");
});

test("rotated again, to the secret sshPrivateKey (the key file left revoked): destroy reaches the host with it and removes the stack", async () => {
  const third = newKey("tool-3");
  const hostKey = await rotate(third);
  const stack = await ws.stack("main");
  await stack.setConfig("dflash-sglang:sshPrivateKey", { value: fs.readFileSync(third, "utf8"), secret: true });
  ws.setStackConfig("main", "host", hostConfig({ privateKeyPath: path.join(keys, "tool-2"), hostKey, user: "deploy", become: "sudo" }));
  // Without --run-program the providers get the last `up`'s configuration (Pulumi's rule
  // for refresh and destroy): the old key is refused, and the message says what to run.
  const plain = await stack.destroy().then(
    () => "",
    (e: Error) => e.message,
  );
  assert.match(plain, /run this with --run-program \(`pulumi refresh --run-program`, `pulumi destroy --run-program`\)/);
  assert.equal(await sh(`systemctl is-active ${UNIT}.service`), "active", "the refused destroy stopped nothing");
  const destroy = await stack.destroy({ runProgram: true });
  assert.equal(destroy.summary.result, "succeeded");
  assert.equal(await sh(`ls -d /etc/systemd/system/${UNIT}.service /etc/dflash-sglang /var/lib/dflash-sglang 2>/dev/null; true`), "", "nothing of the stack is left on the host");
});
