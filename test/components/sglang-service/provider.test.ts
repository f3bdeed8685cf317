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
  assert.match(hostRunsOf({ host: "h", live: UNIT_B }, UNIT_A), /^stack b's unit \([0-9a-f]{12}\)$/);
  assert.equal(hostRunsOf({ host: "h", live: null }, UNIT_A), "no unit");
  assert.match(hostRunsOf({ host: "h", live: "[Service]\nExecStart=/bin/true\n" }, UNIT_A), /^a unit of no stack \([0-9a-f]{12}\)$/);
});

test("a node running anything but this stack's unit is a change; state written before hostRuns existed is not", () => {
  assert.equal(hostTakenOver({ hostRuns: [RUNS_THIS_UNIT, RUNS_THIS_UNIT] }), false);
  assert.equal(hostTakenOver({ hostRuns: [RUNS_THIS_UNIT, hostRunsOf({ host: "h", live: UNIT_B }, UNIT_A)] }), true);
  assert.equal(hostTakenOver({}), false);
  assert.deepEqual(changedKeys({ target: { port: 1 }, hostRuns: ["x"] }, { target: { port: 2 }, hostRuns: [RUNS_THIS_UNIT] }, ["target.port", "nodes"]), ["target.port"]);
});
