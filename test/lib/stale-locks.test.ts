// Which stack locks are stale, read from a file:// backend folder or from psql's rows of a
// postgres:// backend's table (test/lib/team-state.test.ts reads a real one), and what is
// said where locks cannot be read.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseLock, parseLockRows, removeTornMetadata, stackLocks, staleLocks } from "../../lib/stale-locks";
import { psqlTarget } from "../../lib/postgres";

const PROJECT = "dflash-sglang";
/** A pid no process can have: above 2^22, the largest pid_max Linux allows. */
const DEAD = 2 ** 22 + 1;
const content = (pid: number, hostname = os.hostname()) => JSON.stringify({ pid, username: "someone", hostname, timestamp: "2026-01-01T00:00:00Z" });

test("a lock is one of the project's stack locks only by its key's layout, and needs a pid and a host", () => {
  const key = `.pulumi/locks/organization/${PROJECT}/b8t4-w2048/0b1c.json`;
  assert.deepEqual(parseLock(key, content(42, "gpu-box"), PROJECT), { stack: "b8t4-w2048", pid: 42, hostname: "gpu-box", where: key });
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
    { stack: "alpha", pid: 7, hostname: "a", where: `pulumi/.pulumi/locks/organization/${PROJECT}/alpha/1.json` },
  ]);
  assert.deepEqual(parseLockRows("", "pulumi/", PROJECT), []);
});

test("in a file:// backend, a lock is stale when its pulumi ran here and is gone; live ones and other machines' are kept", () => {
  const backend = fs.mkdtempSync(path.join(os.tmpdir(), "stale-locks-"));
  try {
    const dir = (stack: string) => {
      const d = path.join(backend, ".pulumi", "locks", "organization", PROJECT, stack);
      fs.mkdirSync(d, { recursive: true });
      return d;
    };
    fs.writeFileSync(path.join(dir("killed"), "a.json"), content(DEAD));
    fs.writeFileSync(path.join(dir("running"), "b.json"), content(process.pid));
    fs.writeFileSync(path.join(dir("colleague"), "c.json"), content(DEAD, `not-${os.hostname()}`));
    const url = `file://${backend}`;
    const reading = stackLocks(url, PROJECT);
    assert.ok("locks" in reading);
    assert.deepEqual(reading.locks.map((l) => l.stack).sort(), ["colleague", "killed", "running"]);
    assert.deepEqual(staleLocks(url, PROJECT), { stale: [{ stack: "killed", pid: DEAD, hostname: os.hostname(), where: path.join(dir("killed"), "a.json") }] });
  } finally {
    fs.rmSync(backend, { recursive: true, force: true });
  }
});

test("a backend whose locks cannot be read clears nothing and says why", () => {
  assert.deepEqual(staleLocks("s3://team-bucket/state", PROJECT), { stale: [], unreadable: "locks are looked for only in file:// and postgres:// backends, not in s3://" });
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
