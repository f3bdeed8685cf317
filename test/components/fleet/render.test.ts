// The fleet's pure core: its configuration section (errors name the key and what is valid),
// HAProxy's configuration (a committed snapshot: what a reviewer reads), the replicas'
// deployments, the balancer's answers parsed, and the rollout's order.
// Refresh the snapshot with UPDATE_SNAPSHOTS=1 and read the diff before committing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError, parseDeployment, minHealthyOf } from "../../../components/sglang-service/schema";
import { frontendOf, parseServers, renderHaproxyConfig, replicaDeployment, replicasOf, serverName, standing, urlHostPort } from "../../../components/fleet/render";
import { rolloutOrder } from "../../../components/fleet/fleet";
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
  const wild = parseDeployment(withFleet(FLEET, { service: { listenAddress: "0.0.0.0" } }), "fleet-test");
  assert.equal(replicaDeployment(wild, 1).service.listenAddress, "0.0.0.0");
  assert.deepEqual(frontendOf(d.fleet!), { address: "10.0.0.9", port: 8080 });
  assert.equal(minHealthyOf(d.fleet!), 2);
});

test("the fleet section: unknown keys, a replica twice, the balancer on a replica, minHealthy or maxUnavailable out of range, a group as replica, each named", () => {
  assert.match(problems(withFleet({ ...FLEET, replica: [] })), /fleet has unknown key\(s\) "replica"; valid keys: replicas, minHealthy, maxUnavailable, loadBalancer/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [] })), /dflash-sglang:fleet\.replicas: fleet\.replicas must list at least one further replica/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [at("10.0.0.6"), at("10.0.0.6")] })), /fleet\.replicas\[1\] \(10\.0\.0\.6:22\) is the same host as fleet\.replicas\[0\]/);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { host: at("10.0.0.6") } })), /fleet\.loadBalancer\.host \(10\.0\.0\.6:22\) is fleet\.replicas\[0\]: HAProxy runs on a host of its own/);
  assert.match(problems(withFleet({ ...FLEET, minHealthy: 3 })), /fleet\.minHealthy \(3\) leaves no replica free to roll: with 3 replicas and maxUnavailable 1 it can be at most 2/);
  assert.match(problems(withFleet({ ...FLEET, maxUnavailable: 4 })), /fleet\.maxUnavailable \(4\) is more than the fleet's 3 replicas/);
  assert.match(problems(withFleet({ ...FLEET, loadBalancer: { host: at("10.0.0.9"), prot: 1 } })), /fleet\.loadBalancer has unknown key\(s\) "prot"/);
  assert.match(problems(withFleet(FLEET, { nodes: [at("10.0.0.20")] })), /a fleet's replicas are single hosts for now/);
  assert.match(problems(withFleet({ ...FLEET, replicas: [{ address: "10.0.0.6" }] })), /dflash-sglang:fleet\.replicas\.0\.hostKey: is required/);
});

test("the balancer's answers: each server's line parsed, its standing in words; no HAProxy yet is null", () => {
  const servers = parseServers(
    [
      "replica1 10.0.0.5:30000 op=2 admin=0 scur=3 qcur=1 status=UP check=L7OK",
      "replica2 10.0.0.6:30000 op=2 admin=8 scur=0 qcur=0 status=DRAIN check=L7OK",
      "replica3 10.0.0.7:30000 op=0 admin=1 scur=0 qcur=0 status=MAINT check=L4CON",
      "replica4 10.0.0.8:30000 op=0 admin=0 scur=0 qcur=0 status=DOWN_1/2 check=L7STS",
    ].join("\n"),
  );
  assert.ok(servers);
  assert.deepEqual(servers[0], { server: "replica1", address: "10.0.0.5:30000", op: 2, admin: 0, sessions: 3, queued: 1, status: "UP", check: "L7OK" });
  assert.equal(servers[3].status, "DOWN 1/2");
  assert.deepEqual(servers.map((s) => standing(s)), ["serving", "draining", "in maintenance", "down"]);
  assert.equal(standing(undefined), "absent");
  assert.equal(parseServers("@@absent\n"), null);
});

test("the rollout's order: replicas that serve nothing first, then the others, each in replica order", () => {
  assert.deepEqual(rolloutOrder(["serving", "serving", "serving"]), [0, 1, 2]);
  assert.deepEqual(rolloutOrder(["serving", "draining", "down"]), [1, 2, 0]);
  assert.deepEqual(rolloutOrder(["absent", "absent", "absent"]), [0, 1, 2]);
});
