// The readiness provider's diff (provider.ts), pure: `up` proves the configuration again when
// an input it depends on changed, or when the program found a node running anything but this
// stack's unit (observe.ts hostRunsOf), so that `up` does what `preview` said. Through the
// real engine: reconfigure.test.ts, "another stack took the host".
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { changedKeys, hostTakenOver } from "../../../components/sglang-service/provider";
import { describeHostChange, hostRunsOf, parseLiveUnit, RUNS_THIS_UNIT } from "../../../components/sglang-service/remote/observe";
import { effectOf } from "../../../components/review/record";

const UNIT_A = "[Unit]\nX-DFlash-Stack=a\n";
const UNIT_B = "[Unit]\nX-DFlash-Stack=b\n";

test("what a node runs, as the program hands it to the readiness resource", () => {
  assert.equal(hostRunsOf({ host: "h", live: UNIT_A }, UNIT_A), RUNS_THIS_UNIT);
  assert.match(hostRunsOf({ host: "h", live: UNIT_B, installedAt: 1764600000 }, UNIT_A), /^stack b's unit \([0-9a-f]{12}, installed at 1764600000\)$/);
  assert.equal(hostRunsOf({ host: "h", live: null }, UNIT_A), "no unit");
  // Removed by a teardown since: not the reading of a first install.
  assert.equal(hostRunsOf({ host: "h", live: null, removedAt: 1764600300 }, UNIT_A), "no unit (removed at 1764600300)");
  assert.equal(hostTakenOver({ hostRuns: ["no unit"] }, { hostRuns: ["no unit (removed at 1764600300)"] }), true, "first install recorded, unit removed since");
  assert.match(hostRunsOf({ host: "h", live: "[Service]\nExecStart=/bin/true\n" }, UNIT_A), /^a unit of no stack \([0-9a-f]{12}, installed at \?\)$/);
});

test("a node running anything but this stack's unit is a change, unless it is the reading recorded at the last proven up (refresh passes that again)", () => {
  const taken = [RUNS_THIS_UNIT, hostRunsOf({ host: "h", live: UNIT_B, installedAt: 1764600000 }, UNIT_A)];
  const recorded = { hostRuns: [RUNS_THIS_UNIT, RUNS_THIS_UNIT] };
  assert.equal(hostTakenOver(recorded, { hostRuns: [RUNS_THIS_UNIT, RUNS_THIS_UNIT] }), false);
  assert.equal(hostTakenOver(recorded, { hostRuns: taken }), true);
  assert.equal(hostTakenOver({ hostRuns: taken }, { hostRuns: taken }), false, "refresh: the recorded reading again");
  const again = [RUNS_THIS_UNIT, hostRunsOf({ host: "h", live: UNIT_B, installedAt: 1764600900 }, UNIT_A)];
  assert.equal(hostTakenOver({ hostRuns: taken }, { hostRuns: again }), true, "the same unit installed again later");
  assert.equal(hostTakenOver({}, {}), false, "state written before hostRuns existed");
  assert.deepEqual(changedKeys({ target: { port: 1 }, hostRuns: ["x"] }, { target: { port: 2 }, hostRuns: [RUNS_THIS_UNIT] }, ["target.port", "nodes"]), ["target.port"]);
});

// Issue 36: the host as it serves. A unit that is installed but stopped (by hand, or failed)
// used to read as this stack's unit, "no change", while the model was offline.
test("a node whose unit is this stack's but stopped: preview says so and up starts it (a new reading each stop)", () => {
  const read = parseLiveUnit(`1764600000\ninactive\nFri 2026-12-04 10:00:00 UTC\n \n${UNIT_A}`);
  assert.deepEqual(read, { live: UNIT_A, installedAt: 1764600000, state: "inactive", stoppedSince: "Fri 2026-12-04 10:00:00 UTC" });
  assert.deepEqual(parseLiveUnit(`1764600000\nactive\nn/a\n \n${UNIT_A}`), { live: UNIT_A, installedAt: 1764600000, state: "active" });
  const stopped = hostRunsOf({ host: "h", ...read }, UNIT_A);
  assert.equal(stopped, `${RUNS_THIS_UNIT}, stopped since Fri 2026-12-04 10:00:00 UTC`);
  assert.equal(hostTakenOver({ hostRuns: [RUNS_THIS_UNIT] }, { hostRuns: [stopped] }), true, "up proves (and so starts) it");
  assert.equal(hostTakenOver({ hostRuns: [stopped] }, { hostRuns: [RUNS_THIS_UNIT] }), false, "once it runs again, nothing to do");
  assert.equal(hostRunsOf({ host: "h", live: UNIT_A, state: "failed", stoppedSince: "x" }, UNIT_A), `${RUNS_THIS_UNIT}, failed since x`);
  for (const running of ["active", "activating", "deactivating", "reloading", undefined]) assert.equal(hostRunsOf({ host: "h", live: UNIT_A, ...(running ? { state: running } : {}) }, UNIT_A), RUNS_THIS_UNIT, String(running));
  const words = describeHostChange("u", "a", { host: "h", ...read }, UNIT_A, "");
  assert.match(words, /^u on h runs the unit of this stack \([0-9a-f]{12}\), stopped since Fri 2026-12-04 10:00:00 UTC: it serves nothing now; `up` starts it\.$/);
  assert.equal(effectOf([{ resource: "sglang-ready", op: "update", keys: ["hostRuns"] }], words), "restart");
  // Another stack's unit, stopped: said too, and still replaced.
  assert.match(describeHostChange("u", "a", { host: "h", live: UNIT_B, state: "failed" }, UNIT_A, ""), /runs the unit of stack b \([0-9a-f]{12}\), failed: it serves nothing now; `up` replaces it/);
});

// Issue 38, item 2: the preview names the generation serving (host/read-unit.sh reads the
// `current` and `known-good` links), and the one readiness proved last when they differ.
test("the host view names the generation installed, and the known-good one when it differs", () => {
  const same = parseLiveUnit(`1764600000\nactive\nn/a\n13 13\n${UNIT_A}`);
  assert.deepEqual(same, { live: UNIT_A, installedAt: 1764600000, state: "active", generation: 13, knownGood: 13 });
  assert.match(describeHostChange("u", "a", { host: "h", ...same }, UNIT_A, ""), /^u on h runs the unit of this stack \([0-9a-f]{12}\) as generation 13; `up` changes nothing there\.$/);
  const apart = parseLiveUnit(`1764600000\nfailed\nFri 2026-12-04 10:00:00 UTC\n14 13\n${UNIT_B}`);
  assert.match(describeHostChange("u", "a", { host: "h", ...apart }, UNIT_A, ""), /^u on h runs the unit of stack b \([0-9a-f]{12}\) as generation 14 \(known-good: 13\), failed since Fri 2026-12-04 10:00:00 UTC: it serves nothing now; `up` replaces it/);
  assert.deepEqual(parseLiveUnit(`1764600000\nactive\nn/a\n 2\n${UNIT_A}`), { live: UNIT_A, installedAt: 1764600000, state: "active", knownGood: 2 });
});
