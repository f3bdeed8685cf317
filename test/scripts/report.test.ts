// Which stacks `npm run report` reports on, and what it says when there are none. Reading a
// source's stacks is the Automation API's (test/components/benchmark/stack.test.ts reads
// real ones); what is chosen from them, and the message, are plain functions.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { chooseSource, nothingToReport, stackSource } from "../../scripts/report";
import type { ReportRow } from "../../components/verdict/rows";

const row = (stack: string, takenAt?: string): ReportRow => ({ stack, configuration: {}, result: null, takenAt });

test("the project's own stacks come first, measured or not", () => {
  const chosen = chooseSource([
    { source: "project", rows: [row("b16t4-w2048")] },
    { source: "demo", rows: [row("b8t4-w2048", "2026-12-01T10:00:00.000Z")] },
  ]);
  assert.equal(chosen?.source, "project");
});

test("without them, the demo's or the sweep's stacks, whichever took the newest benchmark", () => {
  const demo = { source: "demo" as const, rows: [row("b8t4-w2048", "2026-12-01T10:00:00.000Z"), row("b16t4-w2048", "2026-12-01T10:05:00.000Z")] };
  const sweep = { source: "sweep" as const, rows: [row("b4t4-w2048", "2026-12-01T10:03:00.000Z"), row("b12t6-w2048")] };
  const project = { source: "project" as const, rows: [] };
  assert.equal(chooseSource([project, demo, sweep])?.source, "demo");
  assert.equal(chooseSource([project, { ...demo, rows: demo.rows.slice(0, 1) }, sweep])?.source, "sweep");
  assert.equal(chooseSource([project, { ...demo, rows: [] }, sweep])?.source, "sweep");
  assert.equal(chooseSource([project, { ...demo, rows: [] }, { ...sweep, rows: [] }]), undefined);
});

test("with nothing anywhere, it says where it looked and what to run", () => {
  assert.equal(
    nothingToReport("*", ["the project's backend (file:///p/.pulumi-state)", "the demo's workspace (.demo/)", "the sweep's workspace (.sweep/)"]),
    [
      "report: nothing to report: no stack in the project's backend (file:///p/.pulumi-state), the demo's workspace (.demo/) or the sweep's workspace (.sweep/).",
      "Run `npm run demo` (a simulated 8-GPU host, two configurations measured, a few minutes) or `npm run sweep`,",
      "or deploy a configuration of your own (`npx pulumi up --stack b16t4-w2048`, see the README), then `npm run report` again.",
    ].join("\n"),
  );
  assert.match(nothingToReport("b9*", ["the demo's workspace (.demo/)"]), /^report: nothing to report: no stack matching "b9\*" in the demo's workspace \(\.demo\/\)\.\n/);
});

test("the project's stacks are not read with an empty passphrase; the demo's and the sweep's throwaway ones are", () => {
  const saved = process.env.PULUMI_CONFIG_PASSPHRASE;
  process.env.PULUMI_CONFIG_PASSPHRASE = "";
  try {
    assert.throws(() => stackSource("project"), /^Error: refused: PULUMI_CONFIG_PASSPHRASE is set but empty\./);
    assert.equal(stackSource("demo").env.PULUMI_CONFIG_PASSPHRASE, "simulated-hosts");
  } finally {
    if (saved === undefined) delete process.env.PULUMI_CONFIG_PASSPHRASE;
    else process.env.PULUMI_CONFIG_PASSPHRASE = saved;
  }
});
