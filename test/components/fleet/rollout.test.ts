// A fleet end to end: three replicas on simulated hosts behind a real HAProxy (Debian's 2.6, on
// a simulated host of its own), rolled by the real engine with clients sending through the
// balancer the whole time. Tests run in order and share the hosts, as a fleet's stacks would.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { mergedConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { bashCommand } from "../../../components/sglang-service/hostScript";
import { balancerPaths, parseServers, renderBalancerStep, serverName, standing } from "../../../components/fleet/render";
import { streamChat } from "../../../components/benchmark/client";
import { failedUp } from "../../support/failedUp";
import { assertClean, budgetsOf, underLoadAt, until } from "../../support/fleet";
import { killUpWhen } from "../../support/killUpWhen";

const NAMES = ["r1", "r2", "r3", "lb"].map((n) => `fleet-${n}-${process.pid}`);
const STACK = "fleet";
let hs: hosts.HostInfo[];
let ws: SimWorkspace;

const entry = (h: hosts.HostInfo) => ({ address: h.address, port: h.port, user: h.user, privateKeyPath: h.privateKeyPath, hostKey: h.hostKey });
function config(budget: number): Record<string, unknown> {
  const base = readRepoStackConfig("b8t4-w2048");
  return {
    ...base,
    ...simHostConfig(hs[0]),
    "dflash-sglang:speculative": { ...(base["dflash-sglang:speculative"] as object), budget },
    "dflash-sglang:safety": { stableSeconds: 1 },
    "dflash-sglang:benchmark": { enabled: false },
    "dflash-sglang:fleet": { replicas: [entry(hs[1]), entry(hs[2])], loadBalancer: { host: entry(hs[3]), port: 8080, checkSeconds: 0.5 } },
  };
}
const setBudget = (budget: number) => ws.setStackConfig(STACK, "speculative", (config(budget) as Record<string, unknown>)["dflash-sglang:speculative"]);
const deployment = () => parseDeployment(mergedConfig(ws.stackConfig(STACK)), STACK);

/**
 * A text with each replica's name in HAProxy (from its address: render.ts serverName) written
 * as replica1..3, the order of `hs`: what the assertions below read.
 */
function alias(text: string): string {
  const names = hs.slice(0, 3).map((h, k) => [serverName(h), `replica${k + 1}`]);
  return names.sort((a, b) => b[0].length - a[0].length).reduce((t, [name, short]) => t.replaceAll(name, short), text);
}

/** The balancer's servers as HAProxy sees them, by name (replica1..3): "serving", "draining", ... */
async function balancer(): Promise<Record<string, string>> {
  const r = await hosts.ssh(hs[3], bashCommand(renderBalancerStep(deployment(), STACK, "show")));
  assert.equal(r.code, 0, r.stderr);
  const servers = parseServers(r.stdout);
  assert.ok(servers && servers.length > 0, `HAProxy shows no servers: ${r.stdout}${r.stderr}`);
  return Object.fromEntries(servers.map((s) => [alias(s.server), standing(s)]));
}

/** Budgets the replicas' servers run, from each server's own /server_info. */
const budgets = (replicas = 3) => budgetsOf(hs.slice(0, replicas));

/** Runs `fn` with clients sending through the balancer (2 requests/s, every third streaming); the ledger. */
const underLoad = (fn: () => Promise<void>) => underLoadAt(`http://${hs[3].address}:8080`, deployment().model.path, fn);
const clean = assertClean;

/** A single-host stack on replica 3's host serving budget 4: a sweep host, as a team has them. */
const sweepConfig = () => {
  const base = readRepoStackConfig("b8t4-w2048");
  return { ...base, ...simHostConfig(hs[2]), "dflash-sglang:speculative": { ...(base["dflash-sglang:speculative"] as object), budget: 4 }, "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": { enabled: false } };
};
/** A second fleet on the same balancer host (its own replicas: replica 3's host and replica 2's). */
const secondFleet = (port: number) => ({ ...config(8), ...simHostConfig(hs[2]), "dflash-sglang:fleet": { replicas: [entry(hs[1])], loadBalancer: { host: entry(hs[3]), port } } });

before(async () => {
  hs = await Promise.all(NAMES.map((n) => hosts.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.5 } })));
  ws = simWorkspace({ [STACK]: config(8), sweep: sweepConfig(), fleet2: secondFleet(8080) });
});

after(async () => {
  await Promise.all(NAMES.map((n) => hosts.stop(n)));
  ws?.cleanup();
});

test("first up: HAProxy configured on its own host, every replica serving behind it", async () => {
  const stack = await ws.stack(STACK);
  const up = await stack.up();
  assert.equal(up.summary.result, "succeeded");
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  assert.deepEqual(await budgets(), [8, 8, 8]);
  assert.equal(up.outputs.fleetEndpoint.value, `http://${hs[3].address}:8080`);
  assert.deepEqual(up.outputs.fleetReplicas.value.map((r: { generation: number }) => r.generation), [1, 1, 1]);
  // The configuration HAProxy runs is the rendered one, with checks that generate.
  const cfg = (await hosts.ssh(hs[3], `cat ${balancerPaths(STACK).config}`)).stdout;
  assert.match(cfg, /http-check send meth GET uri \/health_generate/);
  for (const h of hs.slice(0, 3)) assert.ok(cfg.includes(`server ${serverName(h)} ${h.address}:${h.sglangPort}\n`), cfg);
  // Streamed answers pass through as they come: through HAProxy, the tokens arrive spread
  // over the answer as they do from a replica directly, not in one piece at the end.
  const ep = (baseUrl: string) => ({ baseUrl, model: deployment().model.path });
  const direct = await streamChat(ep(`http://${hs[0].address}:${hs[0].sglangPort}`), "Tell me about speculative decoding", 64, 60_000, true);
  const through = await streamChat(ep(`http://${hs[3].address}:8080`), "Tell me about speculative decoding", 64, 60_000, true);
  const spread = (r: { ttftMs: number; e2eMs: number }) => r.e2eMs - r.ttftMs;
  assert.ok(direct.itlMs.length > 5 && spread(direct) > 200, `the direct stream is too short to tell: ${JSON.stringify({ ttft: direct.ttftMs, e2e: direct.e2eMs, chunks: direct.itlMs.length })}`);
  assert.ok(spread(through) > 0.5 * spread(direct), `through HAProxy the answer came at once: first token ${through.ttftMs.toFixed(0)} ms, end ${through.e2eMs.toFixed(0)} ms (directly: ${direct.ttftMs.toFixed(0)} ms, ${direct.e2eMs.toFixed(0)} ms)`);
  // A no-op up changes nothing.
  const again = await stack.up();
  assert.deepEqual(again.summary.resourceChanges, { same: again.summary.resourceChanges?.same });
});

test("a new configuration rolls one replica at a time with clients sending through HAProxy: 0 failed, 0 cut", async () => {
  setBudget(16);
  const stack = await ws.stack(STACK);
  let out = "";
  const since = Date.now();
  const report = await underLoad(async () => {
    const up = await stack.up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  assert.ok(report.completed >= 10, `only ${report.completed} requests completed`);
  assert.deepEqual(await budgets(), [16, 16, 16]);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  // One at a time: each replica is back before the next leaves.
  out = alias(out);
  const events = [...out.matchAll(/(replica\d) (left the balancer|is back in the balancer)/g)].map((m) => `${m[1]} ${m[2].startsWith("left") ? "out" : "in"}`);
  const firsts = events.filter((e, k) => events.indexOf(e) === k);
  assert.deepEqual(firsts, ["replica1 out", "replica1 in", "replica2 out", "replica2 in", "replica3 out", "replica3 in"]);
  // Out of the balancer before its drain: from each old server's SIGTERM until its successor
  // started, HAProxy (its own request log) sent it no request. HAProxy's checks alone would
  // have kept sending until two checks failed (1 s apart here) into the drain.
  const routed = await routedWhileRestarting(since);
  assert.deepEqual(routed, { replica1: [], replica2: [], replica3: [] });
});

/** A host's journal entries (journalctl ARGS) since `since` (ms): when, and the message. */
async function journalSince(h: hosts.HostInfo, args: string, since: number): Promise<{ at: number; text: string }[]> {
  const r = await hosts.ssh(h, `journalctl ${args} --since @${Math.floor(since / 1000)} -o json --output-fields=MESSAGE --no-pager`);
  return r.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { MESSAGE: string; __REALTIME_TIMESTAMP: string })
    .map((e) => ({ at: Number(e.__REALTIME_TIMESTAMP) / 1000, text: String(e.MESSAGE) }));
}

/** Per replica: the requests HAProxy's log shows it routed there between the old server's SIGTERM and its successor's start (after `since`). */
async function routedWhileRestarting(since: number): Promise<Record<string, string[]>> {
  const journal = (h: hosts.HostInfo, args: string) => journalSince(h, args, since);
  // HAProxy's accept date, [06/Dec/2026:02:43:44.083] (the hosts' clock is UTC).
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const requests = (await journal(hs[3], "-t haproxy"))
    .map((e) => /\[(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d)\.(\d{3})\] \S+ \S+\/(replica\d) .*"POST /.exec(alias(e.text)))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ server: m[8], at: Date.UTC(Number(m[3]), MONTHS.indexOf(m[2]), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]), Number(m[7])), line: m[0] }));
  const out: Record<string, string[]> = {};
  for (const [k, h] of hs.slice(0, 3).entries()) {
    const lines = await journal(h, "-u sglang-k26.service");
    const sigterm = lines.find((e) => /SIGTERM received/.test(e.text));
    assert.ok(sigterm, `replica${k + 1}'s server logged no SIGTERM during the rollout`);
    const started = lines.find((e) => e.at > sigterm.at && /Starting sglang-k26\.service/.test(e.text));
    assert.ok(started, `replica${k + 1}: no start after its SIGTERM`);
    assert.ok(requests.some((r) => r.server === `replica${k + 1}`), `HAProxy's log shows no request to replica${k + 1} at all: the check would prove nothing`);
    out[`replica${k + 1}`] = requests.filter((r) => r.server === `replica${k + 1}` && r.at >= sigterm.at && r.at <= started.at).map((r) => r.line);
  }
  return out;
}

test("replica 2's new configuration crashes at load: the rollout halts, replica 2 rejoins on its known-good one, replica 3 is untouched, up names each; the next up completes", async () => {
  hosts.fault(NAMES[1], JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: 12 } }));
  setBudget(12);
  const stack = await ws.stack(STACK);
  let message = "";
  try {
    const report = await underLoad(async () => {
      message = alias(await failedUp(stack, "replica 2's new configuration crashes while loading"));
    });
    clean(report);
  } finally {
    hosts.fault(NAMES[1], "{}");
  }
  assert.deepEqual(await budgets(), [12, 16, 16]);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  assert.match(message, /replica2 is back in the balancer and serving/);
  assert.match(message, /The rollout stopped here/);
  assert.match(message, /replica1 \([\d.]+\): the new configuration \(generation 3\), active, serving in the balancer/);
  assert.match(message, /replica2 \([\d.]+\): its previous configuration \(generation 2; known-good 2\), active, serving in the balancer/);
  assert.match(message, /replica3 \([\d.]+\): its previous configuration \(generation 2; known-good 2\), active, serving in the balancer/);
  // Fixed (the fault cleared): the next up resumes and completes, clients unharmed.
  clean(
    await underLoad(async () => {
      const up = await stack.up();
      assert.equal(up.summary.result, "succeeded");
    }),
  );
  assert.deepEqual(await budgets(), [12, 12, 12]);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
});

test("pulumi killed mid-rollout: the next up finds every replica serving and in the balancer, none left drained, and completes", async () => {
  setBudget(16);
  const out = alias(await killUpWhen(ws, STACK, new RegExp(`${serverName(hs[1]).replaceAll(".", "\\.")} left the balancer`)));
  assert.match(out, /replica2 left the balancer/);
  // What the kill left: replica 2 out of the balancer (the state the next up must repair).
  assert.equal((await balancer()).replica2, "draining");
  const stack = await ws.stack(STACK);
  let next = "";
  const report = await underLoad(async () => {
    const up = await stack.up({ onOutput: (s) => (next += s) });
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  // The drained replica first: taking it out again costs nothing.
  assert.match(alias(next), /in this order, 1 at a time, never fewer than 2 serving; a leaving replica.s requests get 300 s to end, then are cut \(fleet.drainPolicy cut\):\s+1\. replica2 \([\d.:]+\): draining in the balancer/);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  assert.deepEqual(await budgets(), [16, 16, 16]);
});

test("a replica that serves nothing is rolled first (preview shows the order), then the others, clients unharmed", async () => {
  // Replica 3's server stopped by hand: HAProxy's checks take it out.
  const stop = await hosts.ssh(hs[2], "systemctl stop sglang-k26.service");
  assert.equal(stop.code, 0, stop.stderr);
  const deadline = Date.now() + 30_000;
  while ((await balancer()).replica3 !== "down") {
    assert.ok(Date.now() < deadline, "HAProxy did not mark the stopped replica 3 down within 30 s");
    await new Promise((r) => setTimeout(r, 250));
  }
  setBudget(8);
  const stack = await ws.stack(STACK);
  const preview = await stack.preview();
  assert.match(alias(preview.stdout), /up rolls them in this order, 1 at a time, never fewer than 2 serving; [^:]*:\s+1\. replica3 \([\d.:]+\): down in the balancer\s+2\. replica1 \([\d.:]+\): serving in the balancer\s+3\. replica2 /);
  let out = "";
  const report = await underLoad(async () => {
    const up = await stack.up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  out = alias(out);
  const left = [...out.matchAll(/(replica\d) left the balancer/g)].map((m) => m[1]);
  assert.deepEqual(left.filter((e, k) => left.indexOf(e) === k), ["replica3", "replica1", "replica2"]);
  assert.deepEqual(await budgets(), [8, 8, 8]);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
});

test("a replica removed from the list leaves HAProxy's configuration, then its unit is drained and removed; the others stay as they are", async () => {
  const since = Date.now();
  const before = await Promise.all(hs.slice(0, 2).map(async (h) => (await hosts.ssh(h, "systemctl show -p MainPID --value sglang-k26.service")).stdout.trim()));
  ws.setStackConfig(STACK, "fleet", { replicas: [entry(hs[1])], loadBalancer: { host: entry(hs[3]), port: 8080, checkSeconds: 0.5 } });
  const stack = await ws.stack(STACK);
  const report = await underLoad(async () => {
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving" });
  // Replica 3's unit is gone; replicas 1 and 2 were not restarted (names by address: nothing moved).
  assert.equal((await hosts.ssh(hs[2], "test -e /etc/systemd/system/sglang-k26.service")).code, 1);
  const after = await Promise.all(hs.slice(0, 2).map(async (h) => (await hosts.ssh(h, "systemctl show -p MainPID --value sglang-k26.service")).stdout.trim()));
  assert.deepEqual(after, before);
  // HAProxy reloaded without it before its server heard its SIGTERM.
  const reloaded = (await journalSince(hs[3], `-u ${balancerPaths(STACK).unitName}`, since)).find((e) => /^Reloaded /.test(e.text));
  const sigterm = (await journalSince(hs[2], "-u sglang-k26.service", since)).find((e) => /SIGTERM received/.test(e.text));
  assert.ok(reloaded && sigterm, `no reload of HAProxy (${reloaded?.text}) or no SIGTERM of replica 3's server (${sigterm?.text}) in their journals`);
  assert.ok(reloaded.at < sigterm.at, `replica 3's server was stopped ${((reloaded.at - sigterm.at) / 1000).toFixed(1)} s before HAProxy's configuration left it out`);
});

/** HAProxy's log of this stack's HAProxy since `since`: each request routed, to which replica (replica1..3), when. */
async function routed(since: number): Promise<{ server: string; at: number }[]> {
  // HAProxy's accept date, [06/Dec/2026:02:43:44.083] (the hosts' clock is UTC).
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  return (await journalSince(hs[3], "-t haproxy", since))
    .map((e) => /\[(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d)\.(\d{3})\] \S+ \S+\/(replica\d) .*"POST /.exec(alias(e.text)))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ server: m[8], at: Date.UTC(Number(m[3]), MONTHS.indexOf(m[2]), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]), Number(m[7])) }));
}

const mainPid = async (h: hosts.HostInfo, unit: string) => (await hosts.ssh(h, `systemctl show -p MainPID --value ${unit}`)).stdout.trim();
const otherService = (address: string) => ["global", "    stats socket /run/haproxy/admin.sock mode 660 level admin", "defaults", "    mode http", "    timeout connect 5s", "    timeout client 30s", "    timeout server 30s", "frontend other", `    bind ${address}:9000`, '    http-request return status 200 content-type text/plain string "other-service"', ""].join("\n");

test("the balancer host is shared: another service's HAProxy is never touched; a second fleet on the same port, and a port another service holds, are refused naming the holder, changing nothing", async () => {
  // Debian's own HAProxy serves another service on :9000, as a team's balancer host has it.
  const other = await hosts.ssh(hs[3], `cat >/etc/haproxy/haproxy.cfg <<'EOF'\n${otherService(hs[3].address)}EOF\nsystemctl restart haproxy && systemctl is-active haproxy`);
  assert.equal(other.code, 0, other.stdout + other.stderr);
  const otherAnswers = async () => (await hosts.ssh(hs[3], `curl -s -m 5 http://${hs[3].address}:9000/`)).stdout;
  assert.equal(await otherAnswers(), "other-service");
  const otherBefore = { pid: await mainPid(hs[3], "haproxy.service"), cfg: (await hosts.ssh(hs[3], "sha256sum /etc/haproxy/haproxy.cfg")).stdout };

  // A second fleet stack on the same balancer host and port: refused in preview and in up, naming the first.
  const second = await ws.stack("fleet2");
  const refusal = await second.preview().then(
    () => assert.fail("the second fleet's preview on the first one's port succeeded"),
    (e: Error) => e.message,
  );
  assert.match(refusal, new RegExp(`${hs[3].address.replaceAll(".", "\\.")}:8080 is taken by the HAProxy of the fleet of stack fleet \\(dflash-balancer-fleet\\.service, haproxy pid \\d+\\)`));
  assert.match(refusal, /Nothing was changed\. Choose another fleet\.loadBalancer\.port \(or listenAddress\) for stack fleet2/);
  const report = await underLoad(async () => {
    assert.match(await failedUp(second, "the second fleet took the first one's port"), /is taken by the HAProxy of the fleet of stack fleet/);
    // A port the other service holds.
    ws.setStackConfig("fleet2", "fleet", (secondFleet(9000) as Record<string, unknown>)["dflash-sglang:fleet"]);
    assert.match(await failedUp(await ws.stack("fleet2"), "the second fleet took the other service's port"), /:9000 is taken by haproxy pid \d+ of haproxy\.service/);
  });
  clean(report);
  assert.equal((await hosts.ssh(hs[2], "test -e /etc/systemd/system/sglang-k26.service")).code, 1, "the refused fleet installed a unit on its host");

  // The fleet itself moved onto a port sshd holds: refused before anything changed; it keeps serving on 8080.
  ws.setStackConfig(STACK, "fleet", { replicas: [entry(hs[1])], loadBalancer: { host: entry(hs[3]), port: 22, checkSeconds: 0.5 } });
  const stack = await ws.stack(STACK);
  const clients = await underLoad(async () => {
    assert.match(await failedUp(stack, "the fleet moved onto sshd's port"), new RegExp(`${hs[3].address.replaceAll(".", "\\.")}:22 is taken by sshd pid \\d+ of ssh\\.service`));
  });
  clean(clients);
  ws.setStackConfig(STACK, "fleet", { replicas: [entry(hs[1])], loadBalancer: { host: entry(hs[3]), port: 8080, checkSeconds: 0.5 } });

  // A rollout of the fleet: the other service's HAProxy is neither reloaded nor edited, and still answers.
  setBudget(16);
  clean(
    await underLoad(async () => {
      assert.equal((await stack.up()).summary.result, "succeeded");
    }),
  );
  assert.deepEqual(await budgets(2), [16, 16]);
  assert.deepEqual({ pid: await mainPid(hs[3], "haproxy.service"), cfg: (await hosts.ssh(hs[3], "sha256sum /etc/haproxy/haproxy.cfg")).stdout }, otherBefore);
  assert.equal(await otherAnswers(), "other-service");
});

test("a replica added while it serves another configuration (a sweep host) gets no client request until its rollout proved it runs the fleet's", async () => {
  const sweep = await ws.stack("sweep");
  assert.equal((await sweep.up()).summary.result, "succeeded");
  assert.equal((await budgets())[2], 4);
  const since = Date.now();
  ws.setStackConfig(STACK, "fleet", { replicas: [entry(hs[1]), entry(hs[2])], loadBalancer: { host: entry(hs[3]), port: 8080, checkSeconds: 0.5 } });
  const stack = await ws.stack(STACK);
  clean(
    await underLoad(async () => {
      assert.equal((await stack.up()).summary.result, "succeeded");
    }),
  );
  assert.deepEqual(await budgets(), [16, 16, 16]);
  assert.deepEqual(await balancer(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  // Replica 3 got requests only from its new server on: none before the sweep's server heard its SIGTERM and the fleet's started.
  const lines = await journalSince(hs[2], "-u sglang-k26.service", since);
  const sigterm = lines.find((e) => /SIGTERM received/.test(e.text));
  const started = sigterm && lines.find((e) => e.at > sigterm.at && /Starting sglang-k26\.service/.test(e.text));
  assert.ok(started, "replica 3's sweep server was not replaced");
  const requests = await routed(since);
  assert.ok(requests.some((r) => r.server === "replica3" && r.at > started.at), "HAProxy routed nothing to replica 3 after it joined: the check would prove nothing");
  assert.deepEqual(requests.filter((r) => r.server === "replica3" && r.at <= started.at), [], "requests reached replica 3 while it served the sweep's configuration");
});

test("an operator's maintenance is kept across up (preview and up say so), and comes back only by hand", async () => {
  const sock = balancerPaths(STACK).socket;
  const r = await hosts.ssh(hs[3], `echo 'set server sglang/${serverName(hs[1])} state maint' | socat - UNIX-CONNECT:${sock}`);
  assert.equal(r.code, 0, r.stderr);
  assert.equal((await balancer()).replica2, "held in maintenance");
  const stack = await ws.stack(STACK);
  let out = "";
  const up = await stack.up({ onOutput: (t) => (out += t) });
  assert.deepEqual(up.summary.resourceChanges, { same: up.summary.resourceChanges?.same }, "a no-change up changed something");
  assert.match(alias(out), /replica2 \([\d.:]+\): held in maintenance in the balancer: held by an operator, rolled but kept out \(operatorStates keep\)/);
  assert.equal((await balancer()).replica2, "held in maintenance");
  await hosts.ssh(hs[3], `echo 'set server sglang/${serverName(hs[1])} state ready' | socat - UNIX-CONNECT:${sock}`);
  await until(async () => (await balancer()).replica2 === "serving", "replica 2 back in the balancer by hand");
});

test("a balancer that drifted (its HAProxy stopped by hand, its file edited) shows in preview and is repaired by up, the replicas' states kept", async () => {
  const p = balancerPaths(STACK);
  const stack = await ws.stack(STACK);
  assert.equal((await hosts.ssh(hs[3], `echo '# edited by hand' >>${p.config} && systemctl stop ${p.unitName}`)).code, 0);
  const preview = await stack.preview();
  assert.match(preview.stdout, /which drifted \(not running; its configuration file differs\): up repairs it/);
  assert.equal(preview.changeSummary.update, 1, JSON.stringify(preview.changeSummary));
  assert.equal((await stack.up()).summary.result, "succeeded");
  assert.doesNotMatch((await hosts.ssh(hs[3], `cat ${p.config}`)).stdout, /edited by hand/);
  await until(async () => Object.values(await balancer()).every((st) => st === "serving"), "every replica serving after the repair");
  const again = await stack.up();
  assert.deepEqual(again.summary.resourceChanges, { same: again.summary.resourceChanges?.same });
});

/** HAProxy's throttle per replica (show stat's `throttle`: the share of its weight a slowstart gives it now, in %; "" when it is in none), by name (replica1..3). */
async function throttles(): Promise<Record<string, string>> {
  const r = await hosts.ssh(hs[3], `echo 'show stat' | socat stdio ${balancerPaths(STACK).socket}`);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split("\n");
  const header = lines.find((l) => l.startsWith("# "))?.slice(2).split(",") ?? [];
  const [px, sv, th] = ["pxname", "svname", "throttle"].map((c) => header.indexOf(c));
  assert.ok(px >= 0 && sv >= 0 && th >= 0, `show stat has no throttle column: ${lines[0]}`);
  const rows = lines.filter((l) => l && !l.startsWith("#")).map((l) => l.split(","));
  return Object.fromEntries(rows.filter((c) => /^replica\d$/.test(alias(c[sv]))).map((c) => [alias(c[sv]), c[th]]));
}

test("a replica back from its restart (its prefix cache empty) ramps up over fleet.loadBalancer.slowstartSeconds; with 0 it takes its full share at once", async () => {
  const fleet = (config(8) as Record<string, { loadBalancer: object }>)["dflash-sglang:fleet"];
  const slowstart = (seconds: number) => ws.setStackConfig(STACK, "fleet", { ...fleet, loadBalancer: { ...fleet.loadBalancer, slowstartSeconds: seconds } });
  try {
    // 120 s (the default is 30): long enough that a loaded machine still reads the ramp after `up` returns.
    // A budget the replicas do not run now, so that every replica rolls.
    const [now] = await budgets();
    const other = now === 8 ? 16 : 8;
    slowstart(120);
    setBudget(other);
    let stack = await ws.stack(STACK);
    assert.equal((await stack.up()).summary.result, "succeeded");
    // The last replica rolled (replica 3: every replica served, so the list's order) came back moments ago: HAProxy gives it part of its weight.
    const ramp = await throttles();
    assert.ok(ramp.replica3 !== undefined && ramp.replica3 !== "" && Number(ramp.replica3) < 100, `throttles right after the rollout: ${JSON.stringify(ramp)}`);
    slowstart(0);
    setBudget(now);
    stack = await ws.stack(STACK);
    assert.equal((await stack.up()).summary.result, "succeeded");
    assert.deepEqual(await throttles(), { replica1: "", replica2: "", replica3: "" });
  } finally {
    ws.setStackConfig(STACK, "fleet", fleet);
    assert.equal((await (await ws.stack(STACK)).up()).summary.result, "succeeded");
  }
});
