// runWithHosts, the wiring between a program's signals and its simulated hosts, against a
// fake process: signals are delivered by hand, a boot lasts until the test ends it (or a
// stop kills it, as a real stop kills a booting systemd-nspawn), and exit is recorded.
// test/simhost/orphans.test.ts does the same with real signals and real hosts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import type { HostInfo } from "../../simhost/hosts";
import { ECHO_MS, runWithHosts, type OwnedHosts, type ProgramEnvironment, type StopSignal } from "../../simhost/owned-hosts";

function fakeProcess() {
  const handlers = new Map<StopSignal, () => void>();
  const boots = new Map<string, { booted: (host: HostInfo) => void; failed: (e: Error) => void }>();
  const events: string[] = [];
  const said: string[] = [];
  const unstoppable = new Set<string>();
  let clock = 0;
  let exited!: (code: number) => void;
  const exit = new Promise<number>((resolve) => (exited = resolve));
  const env: ProgramEnvironment = {
    onSignal: (signal, handler) => handlers.set(signal, handler),
    offSignal: (signal, handler) => {
      if (handlers.get(signal) === handler) handlers.delete(signal);
    },
    hosts: {
      start(name) {
        events.push(`start ${name}`);
        return new Promise<HostInfo>((booted, failed) => boots.set(name, { booted, failed }));
      },
      async stop(name) {
        events.push(`stop ${name}`);
        if (unstoppable.has(name)) throw new Error(`systemd-nspawn pid 4121 survived SIGKILL`);
        boots.get(name)?.failed(new Error(`host ${name}: systemd-nspawn exited during boot`));
      },
      async reclaimOrphans() {
        events.push("reclaim");
        return { reclaimed: [], failed: [] };
      },
    },
    exit(code) {
      events.push(`exit ${code}`);
      exited(code);
    },
    say: (line) => said.push(line.trim()),
    now: () => clock,
  };
  return {
    env,
    events,
    said,
    unstoppable,
    exit,
    /** Delivers `signal` at `atMs` on the fake clock. */
    signal(signal: StopSignal, atMs: number) {
      clock = atMs;
      handlers.get(signal)?.();
    },
    listening: () => [...handlers.keys()],
    boot(name: string) {
      boots.get(name)!.booted({ name } as HostInfo);
    },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A program that boots `names` one after the other, then ends as `then` does (by default, never). */
function booting(names: string[], then: () => Promise<number | void> = () => new Promise(() => undefined)) {
  return async (hosts: OwnedHosts) => {
    for (const name of names) await hosts.start(name);
    return then();
  };
}

test("SIGTERM while a host boots: that host is stopped, the next is never started, exit 143", async () => {
  const p = fakeProcess();
  const run = runWithHosts(booting(["h1", "h2"]), { name: "sweep" }, p.env);
  await settle();
  p.signal("SIGTERM", 1000);
  assert.equal(await p.exit, 143);
  await run;
  assert.deepEqual(p.events, ["reclaim", "start h1", "stop h1", "exit 143"]);
  assert.deepEqual(p.said, ["sweep: SIGTERM: stopping simulated host(s) h1, then exiting"]);
  assert.deepEqual(p.listening(), [], "the handlers are gone once it exits");
});

for (const [signal, code] of [["SIGHUP", 129], ["SIGINT", 130]] as const) {
  test(`${signal} with hosts up: every host is stopped, exit ${code}`, async () => {
    const p = fakeProcess();
    void runWithHosts(booting(["h1", "h2"]), { name: "demo" }, p.env);
    await settle();
    p.boot("h1");
    await settle();
    p.boot("h2");
    await settle();
    p.signal(signal, 1000);
    assert.equal(await p.exit, code);
    assert.deepEqual(p.events, ["reclaim", "start h1", "start h2", "stop h1", "stop h2", `exit ${code}`]);
  });
}

test("a first Ctrl-C is the program's to finish (npm's echo of it counts once); the hosts are stopped at the end, exit 130", async () => {
  const p = fakeProcess();
  let finish!: (code: number) => void;
  const interrupts: number[] = [];
  void runWithHosts(booting(["h1"], () => new Promise((resolve) => (finish = resolve))), { name: "sweep", onInterrupt: () => interrupts.push(Date.now()) }, p.env);
  await settle();
  p.boot("h1");
  await settle();
  p.signal("SIGINT", 1000);
  p.signal("SIGINT", 1000 + ECHO_MS - 1);
  await settle();
  assert.equal(interrupts.length, 1);
  assert.deepEqual(p.events, ["reclaim", "start h1"], "nothing is stopped while the program finishes");
  finish(0);
  assert.equal(await p.exit, 130);
  assert.deepEqual(p.events, ["reclaim", "start h1", "stop h1", "exit 130"]);
});

test("a second Ctrl-C, or a SIGTERM, after the first aborts at once: the program's work in other processes is cancelled first", async () => {
  for (const [second, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    const p = fakeProcess();
    let interrupts = 0;
    void runWithHosts(booting(["h1"]), { name: "sweep", onInterrupt: () => interrupts++, onAbort: () => p.events.push("cancel the updates") }, p.env);
    await settle();
    p.boot("h1");
    await settle();
    p.signal("SIGINT", 1000);
    assert.deepEqual(p.events, ["reclaim", "start h1"], "the first Ctrl-C cancels nothing");
    p.signal(second, 1000 + ECHO_MS);
    assert.equal(await p.exit, code);
    assert.equal(interrupts, 1);
    assert.deepEqual(p.events, ["reclaim", "start h1", "cancel the updates", "stop h1", `exit ${code}`]);
  }
});

test("signals while the hosts are being stopped stop nothing twice, and say so once", async () => {
  const p = fakeProcess();
  void runWithHosts(booting(["h1"]), { name: "demo" }, p.env);
  await settle();
  p.signal("SIGTERM", 1000);
  p.signal("SIGINT", 1001);
  p.signal("SIGINT", 5000);
  p.signal("SIGHUP", 6000);
  assert.equal(await p.exit, 143);
  assert.deepEqual(p.events, ["reclaim", "start h1", "stop h1", "exit 143"]);
  assert.deepEqual(p.said.slice(1), ["demo: still stopping the simulated hosts; they would be left running if this process were killed now"]);
});

test("a program that returns or fails: its hosts are stopped, then it exits with its code, or 1 and its error", async () => {
  const ok = fakeProcess();
  void runWithHosts(booting(["h1"], async () => 3), { name: "bench" }, ok.env);
  await settle();
  ok.boot("h1");
  assert.equal(await ok.exit, 3);
  assert.deepEqual(ok.events, ["reclaim", "start h1", "stop h1", "exit 3"]);

  const failing = fakeProcess();
  void runWithHosts(booting(["h1"], async () => {
    throw new Error("pulumi up failed: sglang exited");
  }), { name: "demo" }, failing.env);
  await settle();
  failing.boot("h1");
  assert.equal(await failing.exit, 1);
  assert.deepEqual(failing.said, ["demo failed: pulumi up failed: sglang exited"]);
  assert.deepEqual(failing.events.slice(-2), ["stop h1", "exit 1"]);
});

test("a host that cannot be stopped is named with the command that stops it; the others are still stopped", async () => {
  const p = fakeProcess();
  p.unstoppable.add("h1");
  void runWithHosts(booting(["h1", "h2"], async () => undefined), { name: "sweep" }, p.env);
  await settle();
  p.boot("h1");
  await settle();
  p.boot("h2");
  assert.equal(await p.exit, 0);
  assert.deepEqual(p.events, ["reclaim", "start h1", "start h2", "stop h1", "stop h2", "exit 0"]);
  assert.deepEqual(p.said, ["sweep: could not stop simulated host h1: systemd-nspawn pid 4121 survived SIGKILL; stop it with npm run simhost -- stop h1"]);
});
