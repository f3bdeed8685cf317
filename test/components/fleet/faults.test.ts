// A fleet in a team's world, end to end: streams longer than the drain bound at a replica's
// leave (fleet.drainPolicy cut and halt), a replica whose answers turn to garbage (HAProxy's
// agent check), a replica whose host is dead (rolled past, then removed without reaching it),
// and a balancer an earlier version configured (taken over). Three replicas on
// simulated hosts behind a real HAProxy (Debian's 2.6, on a simulated host of its own), rolled
// by the real engine with clients sending through the balancer. Tests run in order and share
// the hosts.
import { after, before, test } from "node:test";
import * as net from "node:net";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { mergedConfig, readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { agentPortOf, parseDeployment } from "../../../components/sglang-service/schema";
import { bashCommand } from "../../../components/sglang-service/hostScript";
import { balancerPaths, parseServers, renderBalancerStep, serverName, standing } from "../../../components/fleet/render";
import { oneRequest } from "../../../components/fleet/ledger";
import { failedUp } from "../../support/failedUp";
import { assertClean, budgetsOf, underLoadAt, until } from "../../support/fleet";

const NAMES = ["r1", "r2", "r3", "lb"].map((n) => `ffault-${n}-${process.pid}`);
const STACK = "fleet";
/** timeouts.drainSeconds: the bound a leaving replica's requests get at the balancer (and again in the server). */
const DRAIN_SECONDS = 3;
let hs: hosts.HostInfo[];
let ws: SimWorkspace;

const entry = (h: hosts.HostInfo) => ({ address: h.address, port: h.port, user: h.user, privateKeyPath: h.privateKeyPath, hostKey: h.hostKey });
function fleetSection(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { replicas: [entry(hs[1]), entry(hs[2])], loadBalancer: { host: entry(hs[3]), port: 8080, checkSeconds: 0.5 }, ...extra };
}
function config(budget: number): Record<string, unknown> {
  const base = readRepoStackConfig("b8t4-w2048");
  return {
    ...base,
    ...simHostConfig(hs[0]),
    "dflash-sglang:speculative": { ...(base["dflash-sglang:speculative"] as object), budget },
    "dflash-sglang:safety": { stableSeconds: 1 },
    "dflash-sglang:benchmark": { enabled: false },
    "dflash-sglang:timeouts": { ...((base["dflash-sglang:timeouts"] as object) ?? {}), drainSeconds: DRAIN_SECONDS },
    "dflash-sglang:fleet": fleetSection(),
  };
}
const setBudget = (budget: number) => ws.setStackConfig(STACK, "speculative", (config(budget) as Record<string, unknown>)["dflash-sglang:speculative"]);
const setFleet = (extra: Record<string, unknown>) => ws.setStackConfig(STACK, "fleet", fleetSection(extra));
const deployment = () => parseDeployment(mergedConfig(ws.stackConfig(STACK)), STACK);

/** A text with each replica's HAProxy name written as replica1..3, the order of `hs`. */
function alias(text: string): string {
  const names = hs.slice(0, 3).map((h, k) => [serverName(h), `replica${k + 1}`]);
  return names.sort((a, b) => b[0].length - a[0].length).reduce((t, [name, short]) => t.replaceAll(name, short), text);
}

/** The balancer's servers as HAProxy sees them, by name (replica1..3): standing and open sessions. */
async function balancer(): Promise<Record<string, { standing: string; sessions: number }>> {
  const r = await hosts.ssh(hs[3], bashCommand(renderBalancerStep(deployment(), STACK, "show")));
  assert.equal(r.code, 0, r.stderr);
  const servers = parseServers(r.stdout);
  assert.ok(servers && servers.length > 0, `HAProxy shows no servers: ${r.stdout}${r.stderr}`);
  return Object.fromEntries(servers.map((s) => [alias(s.server), { standing: standing(s), sessions: s.sessions }]));
}
const standings = async () => Object.fromEntries(Object.entries(await balancer()).map(([k, v]) => [k, v.standing]));

/** Budgets the replicas' servers run, from each server's own /server_info. */
const budgets = (replicas = 3) => budgetsOf(hs.slice(0, replicas));

/** Runs `fn` with clients sending short requests through the balancer (2 per second, every third streaming); the ledger. */
const underLoad = (fn: () => Promise<void>) => underLoadAt(`http://${hs[3].address}:8080`, deployment().model.path, fn);
const clean = assertClean;

/**
 * Long streams through the balancer, one on each replica (HAProxy's leastconn spreads them):
 * each `tokens` long, far longer than the drain bound. Resolves once HAProxy holds one on each.
 */
async function longStreams(tokens: number, signal?: AbortSignal): Promise<{ ended: Promise<{ result: string; why?: string }[]> }> {
  const o = { baseUrl: `http://${hs[3].address}:8080`, model: deployment().model.path, maxTokens: tokens, timeoutMs: 900_000, signal };
  const streams: Promise<{ result: string; why?: string }>[] = [];
  for (let k = 0; k < 3; k++) {
    streams.push(oneRequest(o, true));
    await until(async () => Object.values(await balancer()).filter((s) => s.sessions > 0).length > k, `HAProxy to hold ${k + 1} stream(s) on as many replicas`);
  }
  // Wrapped: an async function's promise would wait for these to end.
  return { ended: Promise.all(streams) };
}

before(async () => {
  hs = await Promise.all(NAMES.map((n) => hosts.start(n, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.5 } })));
  ws = simWorkspace({ [STACK]: config(8) });
});

after(async () => {
  await Promise.all(NAMES.map((n) => hosts.stop(n).catch(() => undefined)));
  ws?.cleanup();
});

test("first up: every replica serving behind HAProxy", async () => {
  const up = await (await ws.stack(STACK)).up();
  assert.equal(up.summary.result, "succeeded");
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving", replica3: "serving" });
});

test("streams longer than the drain bound, fleet.drainPolicy cut (the default): every replica is rolled, each cuts its stream after the bound and up counts them; short requests unharmed", async () => {
  setBudget(16);
  // About 5 min at the simulator's speed: still running when the last replica's drain ends, however loaded the machine.
  const streams = await longStreams(80_000);
  let out = "";
  const report = await underLoad(async () => {
    const up = await (await ws.stack(STACK)).up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
    const cut = up.outputs.fleetReplicas.value.map((r: { requestsCut: number | null }) => r.requestsCut);
    // At least its stream: SGLang's count at the cut also holds any request sent to the replica
    // directly (the agent check's own probe, when one is in flight).
    assert.ok(cut.every((c: number | null) => c !== null && c >= 1), `requestsCut per replica: ${JSON.stringify(cut)}; what up said of the balancer and the drains:\n${alias(out).split("\n").filter((l) => /balancer|drain|cutting/.test(l)).join("\n")}`);
  });
  clean(report);
  assert.deepEqual(await budgets(), [16, 16, 16]);
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  const ended = await streams.ended;
  assert.deepEqual(ended.map((s) => s.result), ["cut", "cut", "cut"], JSON.stringify(ended));
  out = alias(out);
  for (const r of ["replica1", "replica2", "replica3"]) {
    // One wait, not two: HAProxy sends it nothing more, and its open stream ends in the server's own drain (timeouts.drainSeconds, then cut).
    assert.match(out, new RegExp(`${r} left the balancer: HAProxy sends it no new request \\(\\d+ s\\); [1-9]\\d* request\\(s\\) through HAProxy still run there and end in its server's own drain`));
  }
});

test('fleet.drainPolicy halt: the first replica with a stream past the bound goes back as it was and up stops there, nothing restarted or cut (each replica still holds its stream); once the streams end, up completes', async () => {
  setFleet({ drainPolicy: "halt" });
  setBudget(8);
  const stack = await ws.stack(STACK);
  const preview = await stack.preview();
  assert.match(preview.stdout, new RegExp(`requests get ${DRAIN_SECONDS} s to end, then the rollout halts there \\(fleet.drainPolicy halt\\)`));
  // About 5 min: open through the whole `up`, however loaded the machine; ended by the client afterwards.
  const client = new AbortController();
  const streams = await longStreams(80_000, client.signal);
  let failure = "";
  const report = await underLoad(async () => {
    failure = alias(await failedUp(stack, "streams were open past the bound with fleet.drainPolicy halt"));
  });
  clean(report);
  // Nothing was cut: each replica still holds its stream.
  assert.deepEqual(Object.values(await balancer()).map((s) => s.sessions >= 1), [true, true, true]);
  client.abort();
  assert.match(failure, /the rollout halted at replica\d: \d+\+\d+ request\(s\) through HAProxy were still open after \d+ s \(timeouts.drainSeconds\), and fleet.drainPolicy is "halt": replica\d is back in the balancer as it was, nothing was restarted there or after it, and nothing was cut/);
  assert.match(failure, /The fleet now:\n\s+- replica1 \([\d.]+\): its previous configuration \(generation \d+; known-good \d+\), active, serving in the balancer/);
  assert.deepEqual(await budgets(), [16, 16, 16]);
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving", replica3: "serving" });
  await streams.ended;
  await until(async () => Object.values(await balancer()).every((s) => s.sessions === 0), "the streams to end once their client gave up");
  const again = await underLoad(async () => {
    const up = await stack.up();
    assert.equal(up.summary.result, "succeeded");
  });
  clean(again);
  assert.deepEqual(await budgets(), [8, 8, 8]);
});

/** What HAProxy's agent check on a replica answers (fleet/host/agent.sh): one line. */
function agentAnswer(h: hosts.HostInfo): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const c = net.connect({ host: h.address, port: agentPortOf(deployment()) }, () => undefined);
    c.setTimeout(30_000, () => c.destroy(new Error("the agent did not answer in 30 s")));
    c.on("data", (b) => (got += b.toString("utf8")));
    c.on("end", () => resolve(got.trim()));
    c.on("error", reject);
  });
}

test("a replica whose answers turn to garbage is taken out by HAProxy's agent check (SGLang's own health check still passes there), kept out by a no-change up, and back once it answers text; no client gets garbage", async () => {
  setFleet({});
  // fleet.drainPolicy back to cut: the replicas' staged transactions change (their server drain proceeds).
  assert.equal((await (await ws.stack(STACK)).up()).summary.result, "succeeded");
  for (const h of hs.slice(0, 3)) assert.equal(await agentAnswer(h), "up #answered");
  hosts.fault(NAMES[1], JSON.stringify({ corruptOutput: true }));
  try {
    await until(async () => (await standings()).replica2 === "down", "HAProxy to take replica 2 out on its agent's word");
    assert.match(await agentAnswer(hs[1]), /^down #the answer is garbage/);
    // /health_generate passes on any scheduler output: it alone would have kept replica 2 in.
    assert.equal((await fetch(`http://${hs[1].address}:${hs[1].sglangPort}/health_generate`)).status, 200);
    const report = await underLoad(async () => {
      const up = await (await ws.stack(STACK)).up();
      assert.equal(up.summary.result, "succeeded");
      assert.deepEqual(up.summary.resourceChanges, { same: up.summary.resourceChanges?.same });
      await new Promise((r) => setTimeout(r, 5000));
    });
    clean(report);
    assert.ok(report.completed >= 8, `only ${report.completed} requests completed`);
    assert.equal((await standings()).replica2, "down");
  } finally {
    hosts.fault(NAMES[1], "{}");
  }
  await until(async () => (await standings()).replica2 === "serving", "replica 2 back once its answers are text");
});

test("a replica whose host is down does not hold the fleet: preview names it with what it last ran, up rolls the others within minHealthy and changes nothing there", async () => {
  setFleet({ minHealthy: 1 });
  setBudget(8);
  const stack = await ws.stack(STACK);
  assert.equal((await stack.up()).summary.result, "succeeded");
  const before = (await stack.outputs()).fleetReplicas.value as { unitHash: string; generation: number }[];
  // Replica 3's host goes dark: its server stops and its sshd refuses every connection. (The
  // simulated host keeps its address: stopped, another test's host could take it, with another
  // host key, which is a refusal of another kind.)
  assert.equal((await hosts.ssh(hs[2], "systemctl stop sglang-k26")).code, 0);
  await hosts.sshOutage(hs[2], 3600);
  await until(async () => (await standings()).replica3 === "down", "HAProxy to call replica 3 down");
  setBudget(12);
  const preview = alias((await stack.preview()).stdout);
  assert.match(preview, /replica3 \([\d.:]+\): down in the balancer; cannot be reached over SSH: not rolled, and up changes nothing there \(it last joined the balancer at \d{4}-\d\d-\d\dT[\d:]+Z, running another configuration \(unit ([0-9a-f]{12})\)\)/);
  assert.equal(/running another configuration \(unit ([0-9a-f]{12})\)/.exec(preview)?.[1], before[2].unitHash.slice(0, 12));
  assert.match(preview, /cannot be read \(cannot reach [\d.]+:22 over SSH: connection refused/);
  let out = "";
  const report = await underLoad(async () => {
    const up = await stack.up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
    const after = up.outputs.fleetReplicas.value as { unitHash: string; generation: number }[];
    // What the dead replica last ran stays on record, unchanged.
    assert.deepEqual([after[2].unitHash, after[2].generation], [before[2].unitHash, before[2].generation]);
    assert.match(String((after[2] as { unreachable?: string }).unreachable), /cannot reach [\d.]+:22 over SSH: connection refused/);
    assert.deepEqual(after.slice(0, 2).map((r) => (r as { unreachable?: string }).unreachable), [null, null]);
  });
  clean(report);
  assert.deepEqual(await budgets(2), [12, 12]);
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving", replica3: "down" });
});

test("removing the dead replica works without reaching it: it leaves the balancer, up names what stays on its host", async () => {
  ws.setStackConfig(STACK, "fleet", { ...fleetSection({ minHealthy: 1 }), replicas: [entry(hs[1])] });
  let out = "";
  const report = await underLoad(async () => {
    const up = await (await ws.stack(STACK)).up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving" });
  assert.match(out, /sglang-k26 \(stack fleet\) on [\d.]+ was not removed: cannot reach [\d.]+:22 over SSH: connection refused[^\n]*The replica is out of the fleet and its balancer; its unit and this stack's files stay on that host/);
});

/** The HAProxy configuration an earlier version of this tool wrote for the fleet (its renderHaproxyConfig before 588f74a): Debian's own haproxy.cfg, replaced whole. */
function legacyConfig(): string {
  const d = deployment();
  const f = d.fleet!;
  return [
    `# HAProxy for the SGLang fleet of stack ${STACK} (${d.service.unitName} on ${f.replicas.length + 1} replicas).`,
    "# Rendered by dflash-sglang (components/fleet/render.ts); `pulumi up` replaces it: do not edit.",
    "global",
    "    log /dev/log local0",
    "    chroot /var/lib/haproxy",
    "    stats socket /run/haproxy/admin.sock mode 660 level admin",
    "    stats timeout 30s",
    "    user haproxy",
    "    group haproxy",
    "    server-state-file /var/lib/haproxy/dflash-server-state",
    "",
    "defaults",
    "    log global",
    "    mode http",
    "    option httplog",
    "    option dontlognull",
    "    option http-no-delay",
    "    option redispatch",
    "    retries 3",
    "    timeout connect 5s",
    "    timeout client 600s",
    "    timeout server 600s",
    "    timeout queue 60s",
    "    timeout check 20s",
    "    load-server-state-from-file global",
    "",
    "frontend sglang",
    `    bind ${hs[3].address}:8080`,
    "    default_backend sglang",
    "",
    "backend sglang",
    "    balance leastconn",
    "    option httpchk",
    "    http-check send meth GET uri /health_generate",
    "    http-check expect status 200",
    "    default-server check inter 500ms fall 2 rise 2",
    ...hs.slice(0, 2).map((h) => `    server ${serverName(h)} ${h.address}:${h.sglangPort}`),
    "",
  ].join("\n");
}

test("a balancer an earlier version configured (Debian's haproxy.service running its haproxy.cfg) is taken over by up: preview says so, the old one stops once its requests end and is disabled, its file renamed; clients keep being served", async () => {
  const p = balancerPaths(STACK);
  // As an earlier version left the balancer host: its configuration in Debian's haproxy.cfg, served by haproxy.service.
  const setUp = await hosts.ssh(
    hs[3],
    [
      `systemctl disable -q --now ${p.unitName}`,
      `rm -rf ${p.unit} ${p.config} ${p.stateDir}`,
      "systemctl daemon-reload",
      `cat >/etc/haproxy/haproxy.cfg <<'EOF'\n${legacyConfig()}EOF`,
      "systemctl enable -q haproxy && systemctl restart haproxy && systemctl is-active haproxy",
    ].join("\n"),
  );
  assert.equal(setUp.code, 0, setUp.stdout + setUp.stderr);
  await until(async () => (await fetch(`http://${hs[3].address}:8080/v1/models`).then((r) => r.status).catch(() => 0)) === 200, "the earlier version's HAProxy to serve");
  const stack = await ws.stack(STACK);
  const preview = await stack.preview();
  assert.match(preview.stdout, /up takes over from Debian's haproxy\.service, which runs the \/etc\/haproxy\/haproxy\.cfg an earlier version wrote for this stack/);
  let out = "";
  const report = await underLoad(async () => {
    const up = await stack.up({ onOutput: (s) => (out += s) });
    assert.equal(up.summary.result, "succeeded");
  });
  clean(report);
  assert.match(out, /took over from haproxy\.service, which ran the configuration an earlier version wrote: stopped it after its requests ended/);
  const after = await hosts.ssh(hs[3], `systemctl is-active haproxy; systemctl is-enabled haproxy; test -e /etc/haproxy/haproxy.cfg && echo cfg; test -e /etc/haproxy/haproxy.cfg.dflash-sglang-${STACK} && echo renamed; systemctl is-active ${p.unitName}`);
  assert.deepEqual(after.stdout.trim().split("\n"), ["inactive", "disabled", "renamed", "active"]);
  // The replicas the old HAProxy had in are in, without a restart.
  assert.deepEqual(await standings(), { replica1: "serving", replica2: "serving" });
  assert.doesNotMatch(out, /restarting \(drain, stop, GPU release, start\)/);
  assert.equal((await (await ws.stack(STACK)).up()).summary.resourceChanges?.update ?? 0, 0);
});
