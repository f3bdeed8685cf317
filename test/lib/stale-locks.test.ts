// Which stack locks are stale, read from a file:// backend folder or from psql's rows of a
// postgres:// backend's table (test/lib/team-state.test.ts reads a real one), and what is
// said where locks cannot be read. A lock is stale only when its owner is proven gone: a
// pulumi this project started on this machine, in this boot, that left an owner record
// (lib/lock-owners.ts) and no longer runs; never from a hostname and a dead pid alone
// (issue 60: machines can share a hostname).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { judgeLock, parseLock, parseLockRows, removeTornMetadata, StackLock, stackLocks, staleLocks } from "../../lib/stale-locks";
import { backendKey, Machine, OwnerRecord, parseProcStat, pruneOwnerRecords, thisMachine, USER_HZ } from "../../lib/lock-owners";
import { psqlTarget } from "../../lib/postgres";

const PROJECT = "dflash-sglang";
/** A pid no process can have: above 2^22, the largest pid_max Linux allows. */
const DEAD = 2 ** 22 + 1;
const content = (pid: number, hostname = os.hostname()) => JSON.stringify({ pid, username: "someone", hostname, timestamp: "2026-01-01T00:00:00Z" });

test("a lock is one of the project's stack locks only by its key's layout, and needs a pid and a host", () => {
  const key = `.pulumi/locks/organization/${PROJECT}/b8t4-w2048/0b1c.json`;
  assert.deepEqual(parseLock(key, content(42, "gpu-box"), PROJECT), { project: PROJECT, stack: "b8t4-w2048", pid: 42, hostname: "gpu-box", username: "someone", timestamp: "2026-01-01T00:00:00Z", where: key });
  assert.equal(parseLock(`.pulumi/locks/organization/other-project/b8/0b1c.json`, content(42), PROJECT), null);
  assert.equal(parseLock(`.pulumi/locks/b8/0b1c.json`, content(42), PROJECT), null, "the layout without projects is not ours");
  assert.equal(parseLock(`.pulumi/locks/organization/${PROJECT}/b8/0b1c.tmp`, content(42), PROJECT), null);
  assert.equal(parseLock(key, "{not json", PROJECT), null);
  assert.equal(parseLock(key, JSON.stringify({ hostname: "x" }), PROJECT), null);
});

test("psql's zero-separated rows: keys carry the database's prefix; other prefixes and projects are left out", () => {
  const rows = [
    `pulumi/.pulumi/locks/organization/${PROJECT}/alpha/1.json`,
    content(7, "a"),
    `pulumi/.pulumi/locks/organization/other/beta/2.json`,
    content(8, "b"),
    `elsewhere/.pulumi/locks/organization/${PROJECT}/gamma/3.json`,
    content(9, "c"),
  ];
  assert.deepEqual(parseLockRows(rows.join("\0") + "\0", "pulumi/", PROJECT), [
    { project: PROJECT, stack: "alpha", pid: 7, hostname: "a", username: "someone", timestamp: "2026-01-01T00:00:00Z", where: `pulumi/.pulumi/locks/organization/${PROJECT}/alpha/1.json` },
  ]);
  assert.deepEqual(parseLockRows(rows.join("\0") + "\0", "pulumi/", null).map((l) => `${l.project}/${l.stack}`), [`${PROJECT}/alpha`, "other/beta"], "every project's, with null");
  assert.deepEqual(parseLockRows("", "pulumi/", PROJECT), []);
});

// The pure judgement, against a machine of the test's own.
const BOOT = "3f1c2a9e-0000-4000-8000-000000000001";
const NS = "pid:[4026531836]";
const HOST = "gpu-box";
const TAKEN = "2026-03-01T10:00:05.123456789Z";
/** The machine booted at 10:00:00; `procs` are its processes now (pid to start ticks). */
const machine = (procs: Record<number, number | "zombie"> = {}): Machine => ({
  hostname: HOST,
  bootId: BOOT,
  pidNs: NS,
  bootTimeMs: Date.parse("2026-03-01T10:00:00Z"),
  process: (pid) => {
    const p = procs[pid];
    return p === undefined ? undefined : p === "zombie" ? { startTicks: 300, zombie: true } : { startTicks: p, zombie: false };
  },
});
const lockOf = (over: Partial<StackLock> = {}): StackLock => ({ project: PROJECT, stack: "alpha", pid: 4242, hostname: HOST, username: "ops", timestamp: TAKEN, where: "k", ...over });
/** pulumi pid 4242 started here 3 s into the boot (tick 300), 2 s before it took the lock. */
const recordOf = (over: Partial<OwnerRecord> = {}): OwnerRecord => ({ pid: 4242, bootId: BOOT, pidNs: NS, startTicks: 300, startedAt: "2026-03-01T10:00:03Z", hostname: HOST, username: "ops", backend: "", ...over });

test("a lock of this hostname whose pid runs nowhere here is NOT stale without an owner record: it may be another machine's with the same hostname", () => {
  const judged = judgeLock(lockOf(), undefined, machine());
  assert.equal(judged.stale, false);
  assert.match((judged as { why: string }).why, /may be running on another machine with the same hostname \(no pulumi this project started here left a record as pid 4242\)/);
});

test("with a record of this boot whose process is gone, the lock is stale; while it runs, or a zombie, it is judged by its start ticks", () => {
  assert.deepEqual(judgeLock(lockOf(), recordOf(), machine()), { stale: true }, "no process has the pid");
  assert.deepEqual(judgeLock(lockOf(), recordOf(), machine({ 4242: "zombie" })), { stale: true }, "a zombie holds no lock it will release");
  assert.deepEqual(judgeLock(lockOf(), recordOf(), machine({ 4242: 300 })), { stale: false, why: "it still runs on this machine" });
  assert.deepEqual(judgeLock(lockOf(), recordOf({ backend: backendKey("postgres://db/x") }), machine(), backendKey("postgres://db/x")), { stale: true }, "same backend");
});

test("a record of another boot, another pid namespace, another host, user or backend proves nothing", () => {
  const notStale = (record: OwnerRecord, lock = lockOf(), here = machine(), backend?: string) => assert.equal(judgeLock(lock, record, here, backend).stale, false, JSON.stringify({ record, lock }));
  notStale(recordOf({ bootId: "another-boot" }));
  notStale(recordOf(), lockOf(), { ...machine(), bootId: undefined });
  notStale(recordOf({ pidNs: "pid:[4026532203]" }));
  notStale(recordOf({ hostname: "other" }));
  notStale(recordOf({ username: "someone-else" }));
  notStale(recordOf({ backend: backendKey("postgres://db/x") }), lockOf(), machine(), backendKey("postgres://db/y"));
  notStale(recordOf(), lockOf({ hostname: "not-gpu-box" }));
  notStale(recordOf(), lockOf({ timestamp: "" }));
  assert.equal(judgeLock(lockOf({ hostname: "other-box" }), recordOf(), machine()).stale, false, "another hostname is never judged from here");
});

test("a pid reused since: gone only where the process that has it now is not the recorded one and started after the lock was taken", () => {
  // Tick 300 + 100 per second: the recorded one started 10:00:03, the lock was taken 10:00:05.
  assert.deepEqual(judgeLock(lockOf(), recordOf(), machine({ 4242: 2000 })), { stale: true }, "pid now held by a process started at 10:00:20");
  assert.equal(judgeLock(lockOf(), recordOf(), machine({ 4242: 450 })).stale, false, "a process started at 10:00:04.5 (before the lock) may be the holder, a pulumi that left no record");
  assert.equal(judgeLock(lockOf(), recordOf(), { ...machine({ 4242: 2000 }), bootTimeMs: undefined }).stale, false, "with no boot time, its start cannot be told");
  assert.equal(USER_HZ, 100);
});

test("a lock older than the record is not that process's", () => {
  // Killed pulumi pid 4242 took the lock at 10:00:05; pid 4242 was later given to another
  // recorded pulumi (10:05:00), which ended: the record is the later one's.
  assert.equal(judgeLock(lockOf(), recordOf({ startedAt: "2026-03-01T10:05:00Z", startTicks: 30000 }), machine()).stale, false);
  // Within a second of slack (the record's time is rounded down to whole seconds).
  assert.deepEqual(judgeLock(lockOf({ timestamp: "2026-03-01T10:00:02.5Z" }), recordOf(), machine()), { stale: true });
});

test("/proc/<pid>/stat: state and start ticks past a command name with spaces and parentheses", () => {
  const fields = (state: string) => `4242 (pul (um) i) ${state} 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 123456 1000 10 18446744073709551615`;
  assert.deepEqual(parseProcStat(fields("S")), { startTicks: 123456, zombie: false });
  assert.deepEqual(parseProcStat(fields("Z")), { startTicks: 123456, zombie: true });
  const self = parseProcStat(fs.readFileSync("/proc/self/stat", "utf8"));
  assert.ok(self && self.startTicks > 0 && thisMachine().process(process.pid)?.startTicks === self.startTicks);
});

/** A record, as the wrappers write it, of `pid` with its real start ticks here (or `ticks`). */
function writeRecord(dir: string, pid: number, over: Partial<OwnerRecord> = {}): void {
  const here = thisMachine();
  const ticks = here.process(pid)?.startTicks ?? 1;
  const record: OwnerRecord = { pid, bootId: here.bootId!, pidNs: here.pidNs!, startTicks: ticks, startedAt: "2020-01-01T00:00:00Z", hostname: os.hostname(), username: "someone", backend: "", ...over };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${pid}.json`), JSON.stringify(record));
}

test("in a file:// backend, a lock is stale when a recorded pulumi of this machine took it and is gone; live ones, unrecorded ones and other machines' are kept", () => {
  const backend = fs.mkdtempSync(path.join(os.tmpdir(), "stale-locks-"));
  const owners = path.join(backend, "owners");
  try {
    const dir = (stack: string, project = PROJECT) => {
      const d = path.join(backend, ".pulumi", "locks", "organization", project, stack);
      fs.mkdirSync(d, { recursive: true });
      return d;
    };
    fs.writeFileSync(path.join(dir("killed"), "a.json"), content(DEAD));
    writeRecord(owners, DEAD);
    fs.writeFileSync(path.join(dir("running"), "b.json"), content(process.pid));
    writeRecord(owners, process.pid);
    fs.writeFileSync(path.join(dir("colleague"), "c.json"), content(DEAD, `not-${os.hostname()}`));
    // Same hostname, pid not alive here, no record: another machine of the same name, maybe.
    fs.writeFileSync(path.join(dir("twin"), "d.json"), content(DEAD + 1));
    // Another project's lock names a pid whose record stays.
    fs.writeFileSync(path.join(dir("elsewhere", "other-project"), "e.json"), content(DEAD + 2));
    writeRecord(owners, DEAD + 2);
    // Records that prove nothing any more: gone and named by no lock, of another boot; a record
    // of another backend is kept a day.
    writeRecord(owners, DEAD + 3);
    writeRecord(owners, DEAD + 4, { bootId: "another-boot" });
    writeRecord(owners, DEAD + 5, { backend: backendKey("file:///elsewhere"), startedAt: new Date().toISOString() });
    const url = `file://${backend}`;
    writeRecord(owners, DEAD + 3, { backend: backendKey(url) });
    const reading = stackLocks(url, PROJECT);
    assert.ok("locks" in reading);
    assert.deepEqual(reading.locks.map((l) => l.stack).sort(), ["colleague", "killed", "running", "twin"]);
    const judged = staleLocks(url, PROJECT, { ownersDir: owners });
    assert.deepEqual(judged.stale, [{ project: PROJECT, stack: "killed", pid: DEAD, hostname: os.hostname(), username: "someone", timestamp: "2026-01-01T00:00:00Z", where: path.join(dir("killed"), "a.json") }]);
    assert.deepEqual(judged.held.map((l) => [l.stack, l.why.replace(/ \(.*/, "")]).sort(), [
      ["colleague", "it runs, or was killed, on that machine"],
      ["running", "it still runs on this machine"],
      ["twin", "it may be running on another machine with the same hostname"],
    ]);
    assert.equal(judged.unreadable, undefined);
    assert.deepEqual(fs.readdirSync(owners).sort(), [`${DEAD + 2}.json`, `${DEAD + 5}.json`, `${DEAD}.json`, `${process.pid}.json`].sort(), "pruned: the gone ones no lock names, the other boot's");
    // Without records (another operator's folder), nothing is stale.
    assert.deepEqual(staleLocks(url, PROJECT, { ownersDir: path.join(backend, "nobody") }).stale, []);
  } finally {
    fs.rmSync(backend, { recursive: true, force: true });
  }
});

test("records are pruned only when gone: a live process's record stays, also unnamed", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "owners-"));
  try {
    writeRecord(dir, process.pid);
    writeRecord(dir, DEAD, { backend: "b" });
    fs.writeFileSync(path.join(dir, "notes.txt"), "not a record");
    assert.deepEqual(pruneOwnerRecords(dir, new Set(), "b"), [path.join(dir, `${DEAD}.json`)]);
    assert.deepEqual(fs.readdirSync(dir).sort(), [`${process.pid}.json`, "notes.txt"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a backend whose locks cannot be read clears nothing and says why", () => {
  assert.deepEqual(staleLocks("s3://team-bucket/state", PROJECT), { stale: [], held: [], unreadable: "locks are looked for only in file:// and postgres:// backends, not in s3://" });
  assert.match(staleLocks("postgres://pulumi@db.example.invalid/pulumi?table=x;drop", PROJECT).unreadable ?? "", /table parameter "x;drop" is not a plain SQL name/);
});

test("psql reaches a postgres:// backend without Pulumi's table parameter and without the password on its command line", () => {
  assert.deepEqual(psqlTarget("postgres://pulumi:s%3Acret%40x@db.example:5433/pulumi?sslmode=verify-full&table=team.state"), {
    uri: "postgres://pulumi@db.example:5433/pulumi?sslmode=verify-full",
    env: { PGPASSWORD: "s:cret@x" },
    table: "team.state",
    keyPrefix: "pulumi/",
  });
  assert.deepEqual(psqlTarget("postgres://db.example/"), { uri: "postgres://db.example/", env: {}, table: "pulumi_state", keyPrefix: "" });
  assert.throws(() => psqlTarget("postgresql://db.example/pulumi"), /postgresql:\/\/ is not Pulumi's PostgreSQL backend \(postgres:\/\/\)/);
});

// A pulumi SIGKILLed while gocloud's fileblob rewrote an object's `.attrs` sidecar left it
// empty: `pulumi cancel` then failed with "failed to load checkpoint: EOF" (the fault
// campaign's case rename-and-kill-then-destroy, under load).
test("a torn metadata sidecar of a file:// backend is removed, a whole one and the objects are kept", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "torn-attrs-"));
  try {
    const stacks = path.join(dir, ".pulumi", "stacks", "dflash-sglang");
    fs.mkdirSync(stacks, { recursive: true });
    fs.writeFileSync(path.join(stacks, "a.json"), "{}");
    fs.writeFileSync(path.join(stacks, "a.json.attrs"), "");
    fs.writeFileSync(path.join(stacks, "b.json"), "{}");
    fs.writeFileSync(path.join(stacks, "b.json.attrs"), '{"user.content_type":"application/json"}\n');
    fs.writeFileSync(path.join(stacks, "c.json.attrs"), '{"user.cont');
    assert.deepEqual(removeTornMetadata(`file://${dir}`).sort(), [path.join(stacks, "a.json.attrs"), path.join(stacks, "c.json.attrs")]);
    assert.deepEqual(fs.readdirSync(stacks).sort(), ["a.json", "b.json", "b.json.attrs"]);
    assert.deepEqual(removeTornMetadata("postgres://db/pulumi"), []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
