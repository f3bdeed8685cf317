// The fault campaign's regression cases (test/campaign/cases/*.json): sequences of operations
// and faults that once left a host down, or serving something no `up` proved, or broke
// another invariant of bench/campaign/runner.ts. Each is replayed on fresh simulated hosts
// through the real engine, with every invariant checked after every step. Two run at once
// (each on its own hosts): the cases wait on simulated loads far more than on the CPU.
// New seeds are the campaign's job (`npm run campaign`, a benchmark), not npm test's.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import * as hosts from "../../simhost/hosts";
import { describe as describeStep, readCases, runSequence } from "../../bench/campaign/runner";

const CASES = readCases(path.join(__dirname, "cases"));

test("the cases folder holds the six sequences of issue 18", () => {
  assert.deepEqual(
    CASES.map((c) => /^issue-18-seq(\d)/.exec(path.basename(c.file))?.[1]).filter(Boolean),
    ["1", "2", "3", "4", "5", "6"],
  );
});

describe("regression cases", { concurrency: 2 }, () => {
  for (const [i, { file, case: c }] of CASES.entries()) {
    test(`${path.basename(file, ".json")}: ${c.name}`, async () => {
      const log: string[] = [];
      const r = await runSequence(hosts.start, hosts.stop, `case${i}`, c.group, c.steps, (l) => log.push(l));
      assert.deepEqual(r.violations, [], `${c.source}\n${c.steps.map(describeStep).join("\n")}\n${log.join("\n")}`);
      assert.equal(r.steps.length, c.steps.length);
    });
  }
});
