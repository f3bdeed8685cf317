// Observing is not deciding (steps.ts observedUnit): a read of the host that did not complete
// is no unit state at all, never "main PID 0" (which readiness would take for a death).
// The same fault through the real engine: safety.test.ts, "the host unreachable over SSH".
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { observedUnit } from "../../../../components/sglang-service/remote/steps";

test("systemctl show output is a unit state only when complete; an empty or cut read is unobserved", () => {
  const full = "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4121\nNRestarts=0\nExecMainStatus=0\nExecMainStartTimestampMonotonic=5\nInvocationID=ab\nResult=success\n";
  assert.equal(observedUnit(full)?.mainPid, 4121);
  assert.equal(observedUnit("LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\n")?.activeState, "inactive", "a unit that is not there is an observation");
  assert.equal(observedUnit(""), undefined, "ssh exit 255 prints nothing");
  assert.equal(observedUnit(undefined), undefined, "no show section");
  assert.equal(observedUnit("LoadState=loaded\n"), undefined, "cut before ActiveState");
  assert.equal(observedUnit("LoadState=loaded\nActiveState=active\n"), undefined, "cut before MainPID");
});
