// A node's state is read, not guessed (handlers.ts parseNodeState): a read that did not
// complete is unobserved, never "the unit is not installed" (which would restart a healthy
// group, or report drift to `refresh` that is not there).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { droppedOut, groupFailures, killedRollbackWords, loadToReady, parseNodeState, parseRestartResult } from "../../../../components/sglang-service/remote/handlers";
import { LOST_MARK, lostAfterGo } from "../../../../components/sglang-service/remote/group-restart";

const HASH = "a".repeat(64);

test("a node's state needs the whole read; without its end it is unobserved", () => {
  assert.deepEqual(parseNodeState(`@@hash ${HASH}\n@@state active\n@@note b8t4 sglang-k26.service\n@@end\n`, "sglang-k26"), { hash: HASH, state: "active", proving: "b8t4", groupFailed: null });
  assert.deepEqual(parseNodeState("@@hash \n@@state inactive\n@@note \n@@end\n", "sglang-k26"), { hash: null, state: "inactive", proving: null, groupFailed: null }, "not installed is an observation");
  assert.equal(parseNodeState("", "sglang-k26"), undefined, "ssh exit 255 prints nothing");
  assert.equal(parseNodeState(`@@hash ${HASH}\n@@state active\n`, "sglang-k26"), undefined, "cut before its end");
  assert.equal(parseNodeState("@@hash \n@@state \n@@note \n@@end\n", "sglang-k26"), undefined, "systemctl gave no answer");
});

test("a group restart failed on a node only while its mark is there: an earlier up's failure, already rolled back, is retried", () => {
  const marked = parseNodeState(`@@hash ${HASH}\n@@state inactive\n@@note \n@@groupfailed ${HASH} 1764600000\n@@end\n`, "sglang-k26")!;
  const clean = parseNodeState(`@@hash ${HASH}\n@@state active\n@@note \n@@groupfailed \n@@end\n`, "sglang-k26")!;
  assert.equal(marked.groupFailed, HASH);
  const failedOut = "u node 1: waiting for GPU memory\nFAILED: GPU memory on h1 was not released within 3 s\nu node 1: FAILED; the group rolls back as one\n@@failed\n";
  assert.deepEqual(groupFailures(["@@result {}\n", failedOut], [clean, marked], [HASH, HASH]), [{ rank: 1, why: "FAILED: GPU memory on h1 was not released within 3 s" }]);
  assert.deepEqual(groupFailures(["@@result {}\n", failedOut], [clean, clean], [HASH, HASH]), [], "rolled back by an earlier up: not a failure of this one");
  assert.deepEqual(groupFailures(["@@result {}\n", failedOut], [clean, marked], [HASH, "b".repeat(64)]), [], "a mark for another unit");
});

test("load to ready counts from the start of the process the restart started, not from the readiness step's own start", () => {
  const at = 1_764_600_000;
  // The restart started the unit at `at`; the engine took 7 s to begin the readiness step, which waited 100 s.
  assert.equal(loadToReady(at, { loadToReadySeconds: 100.4, mainStartedAt: at + 1, mainAgeSeconds: 107 }), 107);
  assert.equal(loadToReady(at, { loadToReadySeconds: 0.3, mainStartedAt: at - 86_400, mainAgeSeconds: 86_400 }), 0.3, "a server proven again without a restart: no load");
  assert.equal(loadToReady(at, { loadToReadySeconds: 0.3, mainStartedAt: at, mainAgeSeconds: 900 }), 0.3, "the restart's process, started long before this step: proven again, not loaded now");
  assert.equal(loadToReady(undefined, { loadToReadySeconds: 12, mainStartedAt: at, mainAgeSeconds: 20 }), 12, "no restart result");
  assert.equal(loadToReady(at, { loadToReadySeconds: 12 }), 12, "ps or the clock could not be read");
  assert.equal(loadToReady(at, { loadToReadySeconds: 12.6, mainStartedAt: at, mainAgeSeconds: 12 }), 12.6, "whole seconds never lower the wait");
  assert.equal(loadToReady(at, { loadToReadySeconds: 60.3, mainStartedAt: at + 0.8, mainAgeSeconds: 61.4 }), 61.4, "an age to a tenth of a second (host/ready-probe.sh) is the load");
  assert.equal(loadToReady(at, { loadToReadySeconds: 100, mainStartedAt: at + 20, mainAgeSeconds: 104 }), 104, "the unit's GPU check took 20 s before the main process started");
  assert.equal(loadToReady(at, { loadToReadySeconds: 100, mainStartedAt: at + 300, mainAgeSeconds: 104 }), 100, "a process started long after the restart is another one");
});

// Issue 41, item 3: the stack's own note, left by a killed `up` whose readiness step had taken
// it up, made a unit that died since read as "being proven", so the next `up` did not restart it.
test("a rollout note another readiness step took up (prove TOKEN) is not a restart for this step to prove", () => {
  const read = (proved: string, token?: string) => parseNodeState(`@@hash ${HASH}\n@@state failed\n@@note b16 sglang-k26.service 1999999999 stack\n@@proved ${proved}\n@@end\n`, "sglang-k26", token)?.proving;
  assert.equal(read(""), "b16", "nobody took it up yet: this up's own restart");
  assert.equal(read("b16 sglang-k26.service aaaa", "aaaa"), "b16", "taken up by this very step");
  assert.equal(read("b16 sglang-k26.service aaaa", "bbbb"), null, "taken up by an earlier step: stale");
  assert.equal(read("b8 sglang-k26.service aaaa", "bbbb"), "b16", "a mark of another note does not count");
});

test("a node whose session dropped after the group's go is handed to readiness, not failed; its transaction's own last word is never read as a drop", () => {
  const draining = "l: stopping: draining\n";
  assert.equal(lostAfterGo({ code: 255, stdout: draining, stderr: "Connection to 127.0.0.10 closed by remote host.\n" }), true);
  assert.equal(lostAfterGo({ code: 255, stdout: draining, stderr: "" }), true);
  assert.equal(lostAfterGo({ code: 255, stdout: `${draining}@@failed\n`, stderr: "" }), false, "a failure the transaction said");
  assert.equal(lostAfterGo({ code: 255, stdout: `${draining}@@result {}\n`, stderr: "" }), false, "a restart that ended");
  assert.equal(lostAfterGo({ code: 1, stdout: draining, stderr: "" }), false, "the transaction's own exit");
  assert.equal(droppedOut(`${draining}${LOST_MARK} its SSH session ended with exit 255`), true);
  assert.equal(droppedOut(`${draining}@@result {}`), false);
  assert.equal(droppedOut(`l: a line that mentions ${LOST_MARK} in passing`), false);
  // Its restart went on on the host and failed there (the mark): a failure of the group, though it never printed @@failed.
  const lost = `${draining}${LOST_MARK} its SSH session ended with exit 255`;
  const state = (groupFailed: string | null) => ({ hash: "h1", state: "inactive", proving: null, groupFailed }) as unknown as Parameters<typeof groupFailures>[1][number];
  assert.deepEqual(groupFailures([lost, "@@result {}"], [state("h1"), state(null)], ["h1", "h1"]).map((f) => f.rank), [0]);
  assert.match(groupFailures([lost], [state("h1")], ["h1"])[0].why, /session dropped after the group's go/);
  assert.deepEqual(groupFailures([lost], [state(null)], ["h1"]), [], "no mark: it did not fail there");
});

// Issue 60: a host whose locale writes 0,2 for 0.2 made the restart's result line invalid JSON,
// and its parse threw before readiness, past the rollback.
test("a restart result that does not parse is unknown (null), never an exception", () => {
  assert.deepEqual(parseRestartResult('x\n@@result {"applied":true,"drainSeconds":0.2,"requestsCut":0}\nlast line'), { applied: true, drainSeconds: 0.2, requestsCut: 0 });
  assert.equal(parseRestartResult('@@result {"applied":true,"drainSeconds":0,2,"requestsCut":0}'), null);
  assert.equal(parseRestartResult("@@result null"), null);
  assert.equal(parseRestartResult("no result"), null);
});

// Issue 60: a rollback's host step SIGKILLed (the OOM killer, an operator) said nothing of what
// the node ran then; the unit failed 30 s later, nothing serving, and `up` did not say so.
test("a rollback step that ended without its verdict: what the node runs, read from it, in words", () => {
  const failed = "f".repeat(64);
  const good = "a".repeat(64);
  const say = (state: { hash: string | null; state: string } | undefined) => killedRollbackWords("u (stack s)", "10.0.0.5", 137, "u", state, failed, "ssh: connect timed out");
  assert.match(say({ hash: failed, state: "failed" }), /^ROLLBACK FAILED, HOST DOWN: u \(stack s\): the rollback's host step on 10\.0\.0\.5 ended before it finished \(exit status 137: killed.*\); the configuration that failed \(ffffffffffff\) is still installed and u is failed: nothing serves\. Run `pulumi up` again/);
  assert.match(say({ hash: good, state: "inactive" }), /^ROLLBACK FAILED, HOST DOWN: .*the previous configuration \(aaaaaaaaaaaa\) is installed and u is inactive: nothing serves/);
  assert.match(say({ hash: good, state: "activating" }), /^ROLLBACK INTERRUPTED: .*the previous configuration \(aaaaaaaaaaaa\) is installed and u is still starting \(activating\), so nothing serves yet/);
  assert.match(say({ hash: good, state: "active" }), /^ROLLBACK INTERRUPTED: .*u is active \(serving; not proven by this run\)/);
  assert.match(say({ hash: null, state: "inactive" }), /no unit of it is installed and u is inactive: nothing serves/);
  assert.match(say(undefined), /^ROLLBACK FAILED, HOST DOWN\?: .*could not be read since \(ssh: connect timed out\)/);
});
