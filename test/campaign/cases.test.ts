// The fault campaign's regression cases (test/campaign/cases/*.json): sequences of operations
// and faults that once left a host down, or serving something no `up` proved, or broke
// another invariant of bench/campaign/runner.ts. Each is replayed on fresh simulated hosts
// through the real engine, with every invariant checked after every step. Two run at once
// (each on its own hosts): the cases wait on simulated loads far more than on the CPU.
// Plus a short seeded campaign (two steps); new seeds and long runs are `npm run campaign`'s.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import * as hosts from "../../simhost/hosts";
import { describe as describeStep, readCases, runSequence } from "../../bench/campaign/runner";
import { planCampaignSequence } from "../../bench/campaign/plan";

/** A seed whose first sequence (through sudo) renames the unit with every SSH session dropped 9.4 s into the up, then moves to b8t4-wnone with an API key set, whose start dies of CUDA OOM (the plan with the fault kinds of issue 41; seed 27 drew one of those now). */
const SHORT_CAMPAIGN = { seed: 405, steps: 2 };

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
      const r = await runSequence(hosts.start, hosts.stop, `case${i}`, c, c.steps, (l) => log.push(l));
      assert.deepEqual(r.violations, [], `${c.source}\n${c.steps.map(describeStep).join("\n")}\n${log.join("\n")}`);
      assert.equal(r.steps.length, c.steps.length);
    });
  }
  // The same sequence on every run; a failure says how to shrink it into a case.
  const { seed, steps } = SHORT_CAMPAIGN;
  test(`a short seeded campaign: seed ${seed}, one sequence of ${steps} steps`, async () => {
    const plan = planCampaignSequence(seed, 0, steps);
    const log: string[] = [];
    const r = await runSequence(hosts.start, hosts.stop, `seed${seed}`, plan, plan.steps, (l) => log.push(l));
    assert.deepEqual(r.violations, [], `npm run campaign -- --seed ${seed} --sequences 1 --steps ${steps} --shrink reproduces it\n${log.join("\n")}`);
    assert.equal(r.steps.length, steps);
  });
});
