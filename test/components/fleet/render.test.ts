// The fleet's pure core: its configuration section (errors name the key and what is valid),
// HAProxy's configuration (a committed snapshot: what a reviewer reads), the replicas'
// deployments, the balancer's answers parsed, and the rollout's order.
// Refresh the snapshot with UPDATE_SNAPSHOTS=1 and read the diff before committing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { agentPortOf, ConfigError, parseDeployment, minHealthyOf } from "../../../components/sglang-service/schema";
import { balancerPaths, frontendOf, renderAgentInstall, renderAgentRemoval, renderAgentScript, renderAgentService, renderAgentSocket, haproxyConfigHash, mustRejoin, parseBalancer, parseServers, renderBalancerUnit, renderHaproxyConfig, replicaDeployment, replicasOf, serverName, standing, urlHostPort } from "../../../components/fleet/render";
import { balancerDrift, rolloutOrder } from "../../../components/fleet/fleet";
import { testStackConfig } from "../sglang-service/stackConfig";

const UPDATE = process.env.UPDATE_SNAPSHOTS === "1";
if (UPDATE && process.env.CI) throw new Error("UPDATE_SNAPSHOTS=1 is refused under CI: snapshots are updated by a person who reads the diff");

const base = testStackConfig("b16t4-w2048");
const hostKey = (base.host as { hostKey: string }).hostKey;
const at = (address: string, extra: object = {}) => ({ address, hostKey, ...extra });
const withFleet = (fleet: object, more: object = {}) => ({ ...base, ...more, fleet });
const FLEET = { replicas: [at("10.0.0.6"), at("10.0.0.7")], loadBalancer: { host: at("10.0.0.9") } };

function problems(raw: object): string {
  try {
    parseDeployment(raw as Record<string, unknown>, "fleet-test");
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.message;
  }
  return assert.fail("the configuration was accepted");
}

test("HAProxy's configuration: one backend of the replicas, checks that generate, states kept across reloads (snapshot)", () => {
  const d = parseDeployment(withFleet(FLEET), "fleet-test");
  const text = renderHaproxyConfig(d, "fleet-test");
  const file = path.join(__dirname, "__snapshots__", "haproxy.cfg");
  if (UPDATE) fs.mkdirSync(path.dirname(file), { recursive: true }), fs.writeFileSync(file, text);
  assert.equal(text, fs.readFileSync(file, "utf8"));
  // Deterministic: the same configuration renders the same text.
  assert.equal(renderHaproxyConfig(parseDeployment(withFleet(FLEET), "fleet-test"), "fleet-test"), text);
});

test("replicas: host is replica 1, each named by its address; each listens on its own address unless the listen address is a wildcard", () => {
  const d = parseDeployment(withFleet(FLEET), "fleet-test");
  const first = (base.host as { address: string }).address;
  assert.deepEqual(replicasOf(d).map((r) => [r.server, r.address]), [[`replica-${first}`, first], ["replica-10.0.0.6", "10.0.0.6"], ["replica-10.0.0.7", "10.0.0.7"]]);
  // Names come from where a replica is (not its place in the list), HAProxy's characters only.
  assert.equal(serverName({ address: "fd00::6", port: 2222 }), "replica-fd00__6-p2222");
  assert.equal(urlHostPort("fd00::6", 8080), "[fd00::6]:8080");
  assert.equal(urlHostPort("10.0.0.9", 8080), "10.0.0.9:8080");
  assert.equal(replicaDeployment(d, 2).host.address, "10.0.0.7");
  assert.equal(replicaDeployment(d, 2).service.listenAddress, "10.0.0.7");
  assert.equal(replicaDeployment(d, 2).fleet, undefined);
  // The replica's own drain follows the fleet's policy: "cut" (the default) starts the new configuration after cutting.
  assert.equal(replicaDeployment(d, 2).timeouts.drainPolicy, "proceed");
  assert.equal(replicaDeployment(parseDeployment(withFleet({ ...FLEET, drainPolicy: "halt" }), "fleet-test"), 1).timeouts.drainPolicy, "fail");
  const wild = parseDeployment(withFleet(FLEET, { service: { listenAddress: "0.0.0.0" } }), "fleet-test");
  assert.equal(replicaDeployment(wild, 1).service.listenAddress, "0.0.0.0");
  assert.deepEqual(frontendOf(d.fleet!), { address: "10.0.0.9", port: 8080 });
  assert.equal(minHealthyOf(d.fleet!), 2);
});

test("the fleet section: unknown keys, a replica twice, the balancer on a replica, minHealthy or maxUnavailable out of range, a group as replica, each named", () => {
  assert.match(problems(withFleet({ ...FLEET, replica: [] })), /fleet has unknown key\(s\) "replica"; valid keys: replicas, minHealthy, maxUnavailable, drainPolicy, loadBalancer/);
  assert.match(problems(withFleet({ ...FLEET, drainPolicy: "wait" })), /dflash-sglang:fleet\.drainPolicy: .*"cut".*"halt"/);
  // A fleet's server drain follows fleet.drainPolicy: timeouts.drainPolicy, even the default value, is refused.
  assert.match(problems(withFleet(FLEET, { timeouts: { drainPolicy: "fail" } })), /dflash-sglang:timeouts\.drainPolicy: a fleet's replicas follow fleet\.drainPolicy \("cut" or "halt"\)/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [] })), /dflash-sglang:fleet\.replicas: fleet\.replicas must list at least one further replica/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [at("10.0.0.6"), at("10.0.0.6")] })), /fleet\.replicas\[1\] \(10\.0\.0\.6:22\) is the same host as fleet\.replicas\[0\]/);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { host: at("10.0.0.6") } })), /fleet\.loadBalancer\.host \(10\.0\.0\.6:22\) is fleet\.replicas\[0\]: HAProxy runs on a host of its own/);
  assert.match(problems(withFleet({ ...FLEET, minHealthy: 3 })), /fleet\.minHealthy \(3\) leaves no replica free to roll: with 3 replicas and maxUnavailable 1 it can be at most 2/);
  assert.match(problems(withFleet({ ...FLEET, maxUnavailable: 4 })), /fleet\.maxUnavailable \(4\) is more than the fleet's 3 replicas/);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { host: at("10.0.0.9"), prot: 1 } })), /fleet\.loadBalancer has unknown key\(s\) "prot"/);
  assert.match(problems(withFleet(FLEET, { nodes: [at("10.0.0.20")] })), /a fleet's replicas are single hosts for now/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [{ address: "10.0.0.6" }] })), /dflash-sglang:fleet\.replicas\.0\.hostKey: is required/);
});

test("the balancer's answers: each server's line parsed, with this stack's marks; its standing in words; no HAProxy yet is null", () => {
  const view = parseBalancer(
    [
      "@@instance active",
      "@@config abc",
      "@@running abc",
      "@@listening yes",
      "@@states yes",
      "@@joined replica1 9f2c 2026-12-07T07:01:02Z",
      "@@joined replica2",
      "@@left replica2",
      "@@joined replica4",
      "@@joined replica5",
      "@@joined replica7",
      "replica1 10.0.0.5:30000 op=2 admin=4 scur=3 qcur=1 status=UP check=L7OK",
      "replica2 10.0.0.6:30000 op=2 admin=12 scur=0 qcur=0 status=DRAIN check=L7OK",
      "replica3 10.0.0.7:30000 op=0 admin=5 scur=0 qcur=0 status=MAINT check=",
      "replica4 10.0.0.8:30000 op=0 admin=5 scur=0 qcur=0 status=MAINT check=",
      "replica5 10.0.0.9:30000 op=2 admin=12 scur=2 qcur=0 status=DRAIN check=L7OK",
      "replica6 10.0.0.10:30000 op=0 admin=4 scur=0 qcur=0 status=DOWN_1/2 check=L7STS",
      "replica7 10.0.0.11:30000 op=1 admin=4 scur=0 qcur=0 status=UP check=L7OK",
    ].join("\n"),
  );
  const servers = view.servers;
  assert.ok(servers);
  assert.deepEqual(servers[0], { server: "replica1", address: "10.0.0.5:30000", op: 2, admin: 4, sessions: 3, queued: 1, status: "UP", check: "L7OK", joined: true, left: false, lastJoined: { unitHash: "9f2c", at: "2026-12-07T07:01:02Z" } });
  // An earlier version's mark says only that it joined.
  assert.equal(servers[1].joined, true);
  assert.equal(servers[1].lastJoined, null);
  assert.equal(servers[5].status, "DOWN 1/2");
  // admin 4 alone: the configuration's `disabled`, lifted by `state ready`; op 1: in its slowstart.
  assert.deepEqual(
    servers.map((s) => standing(s)),
    ["serving", "draining", "waiting to join", "held in maintenance", "held draining", "down", "serving"],
  );
  assert.deepEqual({ ...view, servers: undefined }, { servers: undefined, instance: "active", config: "abc", running: "abc", listening: true, states: true, conflicts: [], legacy: null });
  assert.equal(standing(undefined), "absent");
  assert.equal(parseServers("@@absent\n"), null);
  // What `up` takes out and puts back whatever else changed: a rollout cut short, a new replica; a hold only where the stack clears holds.
  assert.deepEqual(
    ["serving", "draining", "in maintenance", "waiting to join", "held in maintenance", "held draining", "down", "absent"].map((st) => [mustRejoin(view, st, "keep"), mustRejoin(view, st, "clear")]),
    [[false, false], [true, true], [true, true], [true, true], [false, true], [false, true], [false, false], [true, true]],
  );
  // No HAProxy of this stack answers: every replica rejoins where no states were saved (a new or rebuilt balancer), none where they were.
  assert.equal(mustRejoin({ servers: null, states: false }, "absent", "keep"), true);
  assert.equal(mustRejoin({ servers: null, states: true }, "absent", "keep"), false);
});

test("the balancer's drift: anything but this stack's configuration running, loaded and listening is named (up repairs it)", () => {
  const v = { servers: [], instance: "active", config: "h1", running: "h1", listening: true, states: true, conflicts: [], legacy: null };
  assert.equal(balancerDrift(v, "h1"), "in place");
  assert.equal(balancerDrift({ ...v, instance: "absent", config: "absent", running: "none", listening: false }, "h1"), "not running; no configuration file");
  assert.equal(balancerDrift({ ...v, config: "h0" }, "h1"), "its configuration file differs");
  assert.equal(balancerDrift({ ...v, running: "h0" }, "h1"), "the running worker loaded another configuration");
  assert.equal(balancerDrift({ ...v, listening: false }, "h1"), "it does not listen on the stack's address and port");
  assert.equal(balancerDrift({ ...v, instance: "failed" }, "h1"), "its unit is failed");
  assert.equal(balancerDrift({ ...v, legacy: "active" }, "h1"), "Debian's haproxy.service still runs the configuration an earlier version wrote");
});

test("each stack's HAProxy is its own: unit, configuration, socket and states named by the stack; the configuration names its own hash", () => {
  const d = parseDeployment(withFleet(FLEET), "fleet-test");
  assert.deepEqual(balancerPaths("b16t4-w2048"), {
    unitName: "dflash-balancer-b16t4-w2048.service",
    unit: "/etc/systemd/system/dflash-balancer-b16t4-w2048.service",
    configDir: "/etc/dflash-sglang/balancer",
    config: "/etc/dflash-sglang/balancer/b16t4-w2048.cfg",
    runDir: "/run/dflash-balancer-b16t4-w2048",
    socket: "/run/dflash-balancer-b16t4-w2048/admin.sock",
    masterSocket: "/run/dflash-balancer-b16t4-w2048/master.sock",
    stateDir: "/var/lib/dflash-sglang/balancer/b16t4-w2048",
    stateFile: "/var/lib/dflash-sglang/balancer/b16t4-w2048/server-state",
    lock: "/run/dflash-balancer-b16t4-w2048.lock",
  });
  const text = renderHaproxyConfig(d, "fleet-test");
  assert.match(text, new RegExp(`\\n    description dflash-sglang config sha256:${haproxyConfigHash(d, "fleet-test")}\\n`));
  assert.notEqual(haproxyConfigHash(d, "fleet-test"), haproxyConfigHash(d, "other"));
  // Every server starts out of rotation; slowstart by default, off at 0.
  assert.match(text, /default-server check inter 2000ms fastinter 250ms downinter 250ms fall 2 rise 2 slowstart 30000ms agent-check agent-port 30002 agent-inter 2000ms disabled\n/);
  const off = parseDeployment(withFleet({ ...FLEET, loadBalancer: { ...FLEET.loadBalancer, slowstartSeconds: 0 } }), "fleet-test");
  assert.match(renderHaproxyConfig(off, "fleet-test"), /fall 2 rise 2 agent-check agent-port 30002 agent-inter 2000ms disabled\n/);
  const unit = renderBalancerUnit("fleet-test");
  assert.match(unit, /^ExecStart=\/usr\/sbin\/haproxy -Ws -f \$\{CONFIG\} -p \/run\/dflash-balancer-fleet-test\/haproxy.pid -S \/run\/dflash-balancer-fleet-test\/master.sock$/m);
  // The reload signal by number: procps's kill refuses signal names under tr_TR.
  assert.match(unit, /^ExecReload=\/bin\/kill -12 \$MAINPID$/m);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { ...FLEET.loadBalancer, operatorStates: "forget" } })), /fleet\.loadBalancer\.operatorStates.*one of "keep", "clear"/);
});

test("the rollout's order: replicas that serve nothing first, then the others, each in replica order", () => {
  assert.deepEqual(rolloutOrder(["serving", "serving", "serving"]), [0, 1, 2]);
  assert.deepEqual(rolloutOrder(["serving", "draining", "down"]), [1, 2, 0]);
  assert.deepEqual(rolloutOrder(["absent", "absent", "absent"]), [0, 1, 2]);
});

test("HAProxy's agent check on each replica: its port (service.port + 1 unless set, never service.port), its socket on the replica's address, the check that judges an answer's form", () => {
  const d = parseDeployment(withFleet(FLEET), "fleet-test");
  assert.equal(agentPortOf(d), d.service.port + 1);
  assert.equal(agentPortOf(parseDeployment(withFleet({ ...FLEET, loadBalancer: { ...FLEET.loadBalancer, agentPort: 9100 } }), "fleet-test")), 9100);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { ...FLEET.loadBalancer, agentPort: d.service.port } })), new RegExp(`dflash-sglang:fleet\\.loadBalancer\\.agentPort: fleet\\.loadBalancer\\.agentPort \\(${d.service.port}\\) is service\\.port`));
  const socket = renderAgentSocket(d, "fleet-test", 2);
  assert.match(socket, new RegExp(`\\nListenStream=10\\.0\\.0\\.7:${d.service.port + 1}\\nAccept=yes\\n`));
  assert.match(renderAgentService("fleet-test"), /\nExecStart=\/bin\/bash \/var\/lib\/dflash-sglang\/agent\/fleet-test\/agent\.sh\nStandardInput=socket\nStandardOutput=socket\n/);
  const check = renderAgentScript(d, "fleet-test", 2);
  assert.match(check, new RegExp(`url=http://10\\.0\\.0\\.7:${d.service.port}/v1/chat/completions`));
  assert.match(check, /curl_headers=\/etc\/dflash-sglang\/secrets\/sglang-k26\.curl-headers|curl_headers=\S+\.curl-headers/);
  // The installation carries the three texts; the removal names only this stack's files.
  const install = renderAgentInstall(d, "fleet-test", 2);
  for (const part of [socket, renderAgentService("fleet-test"), check]) assert.ok(install.includes(part.trimEnd()), "the installation holds each file whole");
  assert.match(renderAgentRemoval(d, "fleet-test"), /socket_unit=dflash-agent-fleet-test\.socket/);
});
