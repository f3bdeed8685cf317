import { test } from "node:test";
import * as assert from "node:assert/strict";
import { NO_FAULTS, parseFaults } from "../../../simhost/sim/faults";

test("a partial spec fills in the rest with no fault", () => {
  assert.deepEqual(parseFaults({ gpuReleaseDelaySeconds: 5 }), { ...NO_FAULTS, gpuReleaseDelaySeconds: 5 });
});

test("unknown faults and bad values are rejected with the name", () => {
  assert.throws(() => parseFaults({ gpuReleaseDelay: 5 }), /unknown fault "gpuReleaseDelay"; known faults: gpuReleaseDelaySeconds/);
  assert.throws(() => parseFaults({ crashDuringLoad: "segfault" }), /fault "crashDuringLoad" has an invalid value "segfault"/);
  assert.throws(() => parseFaults({ staleSeconds: -1 }), /fault "staleSeconds"/);
  assert.throws(() => parseFaults([]), /must be a JSON object/);
});
