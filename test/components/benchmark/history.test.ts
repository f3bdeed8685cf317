// Benchmark results that outlive their stack (components/benchmark/history.ts): kept per
// stack and run, read back per backend, and merged into the report's rows (report.ts
// withHistory): a destroyed stack shows its last numbers, marked as such, and a stack
// measured several times shows every run. The provider writing them through the real
// engine: test/components/benchmark/stack.test.ts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { backendName, forgetBackend, historyFile, HistoryRecord, keepResult, readHistory } from "../../../components/benchmark/history";
import { renderMarkdown, withHistory } from "../../../components/benchmark/report";
import type { ReportRow } from "../../../components/verdict/rows";
import type { StoredResult } from "../../../components/benchmark/compare";
import { ddtree, formatOneResultOf, resultOf } from "../../support/benchmarkResults";
import { figuresOf } from "../../../components/benchmark/compare";

// Kept by the provider with where it was measured; records of an older benchmark (format 1) have no measured_on.
const result = (tps: number) => resultOf({ decode: tps, spread: 2, accept: 6.5, coding: null, on: { host: "127.0.0.10" } });
const record = (stack: string, takenAt: string, tps: number, backend = "file:///srv/state", kept: StoredResult = result(tps)): HistoryRecord => ({
  format: 1,
  stack,
  backend,
  takenAt,
  unitHash: `${tps}`.padEnd(64, "a"),
  host: "127.0.0.10",
  configuration: ddtree(stack, 8),
  result: kept,
});

test("a backend is named without its credentials", () => {
  assert.equal(backendName("postgres://deploy:s3cret@db.internal:5432/pulumi"), "postgres://db.internal:5432/pulumi");
  assert.equal(backendName("postgres://db.internal/pulumi?user=deploy&password=s3cret&sslmode=require"), "postgres://db.internal/pulumi");
  assert.equal(backendName("file:///srv/state"), "file:///srv/state");
  assert.equal(backendName(undefined), "");
});

test("records are kept per stack and run, read back oldest first for their backend only, and forgotten with a throwaway backend", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-history-"));
  try {
    keepResult(root, record("b8t4-w2048", "2026-12-02T10:05:00.000Z", 175));
    keepResult(root, record("b8t4-w2048", "2026-12-01T09:00:00.000Z", 170));
    keepResult(root, record("b8t4-w2048", "2026-12-02T11:00:00.000Z", 1, "file:///tmp/dflash-ws-x/state"));
    assert.equal(historyFile("b8t4-w2048", "2026-12-01T09:00:00.000Z", "ab".repeat(32)), path.join("bench", "history", "b8t4-w2048", "2026-12-01T09-00-00.000Z-abababababab.json"));
    fs.writeFileSync(path.join(root, "bench", "history", "b8t4-w2048", "broken.json"), "{");
    const { records, unreadable } = readHistory(root, "file:///srv/state");
    assert.deepEqual(records.map((r) => figuresOf(r.result).short.median), [170, 175]);
    assert.deepEqual(unreadable, [path.join("bench", "history", "b8t4-w2048", "broken.json")]);
    forgetBackend(root, "file:///tmp/dflash-ws-x/state");
    assert.equal(readHistory(root, "file:///tmp/dflash-ws-x/state").records.length, 0);
    assert.equal(readHistory(root, "file:///srv/state").records.length, 2, "the project's records stay");
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test("after a destroy the report shows the stack's last kept numbers, marked destroyed, with where and when they were measured; a stack never measured says so; runs of a stack measured twice are listed", () => {
  const live: ReportRow[] = [
    { stack: "b16t4-w2048", configuration: ddtree("b16t4-w2048", 16), result: result(181), takenAt: "2026-12-02T12:00:00.000Z" },
    // Destroyed: the stack is still there, its outputs are empty.
    { stack: "b8t4-w2048", configuration: {}, result: null },
    { stack: "b4t4-w2048", configuration: {}, result: null },
  ];
  // The oldest run of b8t4-w2048 was measured by the older benchmark; its numbers still read.
  const oldRun = record("b8t4-w2048", "2026-12-01T09:00:00.000Z", 170, "file:///srv/state", formatOneResultOf({ decode: 170, spread: 2 }));
  const records = [oldRun, record("b8t4-w2048", "2026-12-02T10:05:00.000Z", 175), record("b12t6-w2048", "2026-11-30T08:00:00.000Z", 160), record("x-other", "2026-11-30T08:00:00.000Z", 1)];
  const rows = withHistory(live, records, "b*");
  assert.deepEqual(rows.map((r) => [r.stack, r.status, r.result?.format === 2 ? r.result.short.decode_tokens_per_s : null]), [
    ["b12t6-w2048", "destroyed", 160],
    ["b16t4-w2048", "deployed", 181],
    ["b4t4-w2048", "never deployed", null],
    ["b8t4-w2048", "destroyed", 175],
  ]);
  const md = renderMarkdown(rows);
  assert.match(md, /\n\| b8t4-w2048 \(tie\) \(destroyed\) \| DDTREE, budget 8, topk 4, window 2048, compact cache \| 175\.0 \(173\.0-177\.0\) \| [^\n]* \| 127\.0\.0\.10 \| NVIDIA H200 × 8 \| 0\.5\.4\.post1 \| 2026-12-02 10:05 \|\n/);
  // 160 against 181 tok/s, one launch each: inconclusive by the rule (the launch offset not measured), so it is in the tie.
  assert.match(md, /\n\| b12t6-w2048 \(tie\) \(destroyed\) \| [^\n]* \| 2026-11-30 08:00 \|\n/, "a stack removed from the backend too");
  assert.match(md, /\n\| b4t4-w2048 \(never deployed\) \| never deployed \| no benchmark \|/);
  assert.match(md, /### Every run of the stacks measured more than once[\s\S]*\| b8t4-w2048 \| 2026-12-01 09:00:00 \| 170aaaaaaaaa \| 127\.0\.0\.10 \|[^\n]*\| 170\.0 \(format 1\) \|[\s\S]*\| b8t4-w2048 \| 2026-12-02 10:05:00 \|[^\n]*\| 175\.0 \|/);
  assert.doesNotMatch(md, /x-other/, "outside the pattern");
});

test("a kept run of the older benchmark names its host from the record, and is marked as not comparable", () => {
  const old = record("b8t4-w2048", "2026-12-01T09:00:00.000Z", 170, "file:///srv/state", formatOneResultOf({ decode: 170, spread: 2 }));
  const md = renderMarkdown(withHistory([{ stack: "b8t4-w2048", configuration: {}, result: null }], [old], "*"));
  assert.match(md, /\n\| b8t4-w2048 \(destroyed\) † \| DDTREE, budget 8, topk 4, window 2048, compact cache \| 170\.0 \(168\.0-172\.0\) \| [^\n]* \| 127\.0\.0\.10 \| - \| - \| 2026-12-01 09:00 \|\n/);
  assert.match(md, /\n- b8t4-w2048: measured by an older benchmark \(format 1\): not comparable\.\n/);
});
