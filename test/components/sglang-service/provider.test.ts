// The readiness provider's diff (provider.ts), pure: `up` proves the configuration again when
// an input it depends on changed, or when the program found a node running anything but this
// stack's unit (observe.ts hostRunsOf), so that `up` does what `preview` said. Through the
// real engine: reconfigure.test.ts, "another stack took the host".
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { changedKeys, hostTakenOver } from "../../../components/sglang-service/provider";
import { hostRunsOf, RUNS_THIS_UNIT } from "../../../components/sglang-service/remote/observe";

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
