// Which stacks `npm run report` reports on, and what it says when there are none. Reading a
// source's stacks is the Automation API's (test/components/benchmark/stack.test.ts reads
// real ones); what is chosen from them, and the message, are plain functions.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { chooseSource, nothingToReport, stackSource } from "../../scripts/report";
import type { ReportRow } from "../../components/verdict/rows";
import * as fs from "node:fs";
import * as path from "node:path";
import { renderMarkdown, ruleText } from "../../components/benchmark/report";
import { DEFAULT_VERDICT } from "../../components/verdict/schema";
import { ddtree, noSpeculation, resultOf } from "../support/benchmarkResults";
import { REPO_ROOT } from "../../lib/pulumi-env";

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

// Issue 63: the legend explained a speedup without saying what it divides by, and the example
// report in docs/ was stale (an old SGLang version, the old "Best" line and legend).
const measuredRow = (stack: string, configuration: Record<string, unknown>, decode: number, takenAt: string): ReportRow => ({ stack, configuration, result: resultOf({ decode, spread: 1, accept: configuration.algorithm ? 7 : null }), takenAt });
const LEGEND_ROWS = [measuredRow("b16t4-w2048", ddtree("b16t4-w2048", 16), 181.7, "2026-12-02T10:05:00.000Z"), measuredRow("b8t4-w2048", ddtree("b8t4-w2048", 8), 150, "2026-12-02T10:00:00.000Z"), measuredRow("baseline", noSpeculation(), 75, "2026-12-02T09:30:00.000Z")];
const legendOf = (md: string) => md.split("\n").find((l) => l.startsWith("Speedup"));

test("the legend says what every figure it explains is relative to", () => {
  const legend = legendOf(renderMarkdown(LEGEND_ROWS));
  assert.ok(legend, "a legend under the table");
  assert.match(legend, /^Speedup, as in `2\.41x \(2\.30-2\.52\)` after a figure: the row's figure divided by the same figure of its baseline \(the no-speculation stack named for the row below\)/);
  assert.match(legend, /in parentheses the 95 % interval of that ratio \(always valid: it holds however often the benchmark is re-run and this report read again\); "equal within 2 %" where the whole interval lies inside ±2 % of 1\.00x, "inconclusive" where it is neither beyond the 0\.5 % threshold nor inside ±2 % \(this benchmark cannot tell\)\./);
  assert.match(legend, /In the verdict above, a ratio is the short-context decode estimate of the best \(in a tie, the first listed\) divided by that of the configuration named with it, and ± beside an estimate is half its 95 % interval, as a share of the estimate\./);
});

test("docs/report-example.md is the report in its current words", () => {
  const example = fs.readFileSync(path.join(REPO_ROOT, "docs", "report-example.md"), "utf8");
  assert.equal(legendOf(example), legendOf(renderMarkdown(LEGEND_ROWS)), "the legend as the report writes it now");
  assert.ok(example.includes(ruleText(DEFAULT_VERDICT)), "the rule's settings in words");
  assert.match(example, /\n\*\*(Best: [^*]+|Tie: [^*]+ \((equal within [0-9.]+ %|inconclusive)\)|No best configuration)\*\*: /);
});
