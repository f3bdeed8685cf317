// Observing is not deciding (steps.ts observedUnit): a read of the host that did not complete
// is no unit state at all, never "main PID 0" (which readiness would take for a death).
// The same fault through the real engine: safety.test.ts, "the host unreachable over SSH".
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { observedUnit, poll } from "../../../../components/sglang-service/remote/steps";

test("systemctl show output is a unit state only when complete; an empty or cut read is unobserved", () => {
  const full = "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4121\nNRestarts=0\nExecMainStatus=0\nExecMainStartTimestampMonotonic=5\nInvocationID=ab\nResult=success\n";
  assert.equal(observedUnit(full)?.mainPid, 4121);
  assert.equal(observedUnit("LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\n")?.activeState, "inactive", "a unit that is not there is an observation");
  assert.equal(observedUnit(""), undefined, "ssh exit 255 prints nothing");
  assert.equal(observedUnit(undefined), undefined, "no show section");
  assert.equal(observedUnit("LoadState=loaded\n"), undefined, "cut before ActiveState");
  assert.equal(observedUnit("LoadState=loaded\nActiveState=active\n"), undefined, "cut before MainPID");
});

// Issue 60: the wall clock steps (an NTP correction, a resumed VM) while readiness waits. Its
// waits time themselves on the monotonic clock (lib/monotonic.ts): a step of Date.now() neither
// ends a wait at once nor holds it past its deadline.
test("poll: the wall clock stepping 2 h ahead does not end a wait early; 2 h back does not hold it past its deadline", async (t) => {
  const wallNow = Date.now;
  let step = 0;
  Date.now = () => wallNow() + step;
  t.after(() => {
    Date.now = wallNow;
  });
  const opts = (deadlineSeconds: number) => ({ status: () => "waiting", deadlineSeconds, intervalMs: 10, label: "clock test", onTimeout: () => new Error("its deadline") });
  let calls = 0;
  const served = await poll(opts(5), async () => {
    if (++calls === 1) step = 2 * 3600_000;
    return calls >= 3 ? "served" : undefined;
  });
  assert.equal(served, "served");
  assert.equal(calls, 3);
  // 2 h back, never served: its deadline (0.3 s) ends it, well before the test's own bound.
  step = 0;
  calls = 0;
  let stop = false;
  const started = performance.now();
  const back = poll(opts(0.3), async () => {
    if (stop) throw new Error("stopped by the test");
    if (++calls === 1) step = -2 * 3600_000;
    return undefined;
  });
  let bound: NodeJS.Timeout | undefined;
  const held = new Promise<never>((_, reject) => (bound = setTimeout(() => reject(new Error("held past its deadline")), 5000)));
  try {
    await assert.rejects(Promise.race([back, held]), { message: "its deadline" });
  } finally {
    clearTimeout(bound);
    stop = true;
    await back.catch(() => undefined);
  }
  assert.ok(performance.now() - started < 5000);
});
