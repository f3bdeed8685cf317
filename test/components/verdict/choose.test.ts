// The report's verdicts by the one rule: best only when faster than every other eligible
// configuration and than its baseline; a baseline only when deployed alike, young enough and
// without warnings, every refusal named; rows with warnings never best; a row's launches.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { baselineFor, choose, estimateOf, offsetOf, speedups } from "../../../components/verdict/choose";
import { launchesOf, shortRate, type Measured, type ReportRow } from "../../../components/verdict/rows";
import { verdictSchema } from "../../../components/verdict/schema";
import type { HistoryRecord } from "../../../components/benchmark/history";
import { DEPLOYED, ddtree, noSpeculation, resultOf, ResultSpec } from "../../support/benchmarkResults";

const TAKEN = "2026-12-02T10:05:00.000Z";
const row = (stack: string, configuration: Record<string, unknown>, spec: ResultSpec, takenAt = TAKEN): Measured => ({ stack, configuration, result: resultOf(spec), takenAt });
const spec = (stack: string, decode: number, extra: Partial<ResultSpec> = {}) => row(stack, ddtree(stack, 8), { decode, spread: 2, ...extra });
const base = (decode: number, extra: Record<string, unknown> = {}, takenAt = "2026-12-02T09:30:00.000Z", result: Partial<ResultSpec> = {}) => row("baseline", noSpeculation("baseline", extra), { decode, spread: 1, accept: null, ...result }, takenAt);
const whyNone = (rows: ReportRow[]) => {
  const c = choose(rows);
  assert.equal(c.kind, "none", JSON.stringify(c));
  return c.kind === "none" ? c.why : "";
};

test("a lone configuration is not best for being alone: only when the rule finds it faster than its baseline", () => {
  assert.equal(whyNone([spec("b8t4-w2048", 180)]), "b8t4-w2048 is the only eligible configuration, but no baseline shows that it beats no speculation: no baseline measured on 10.0.0.5");
  assert.equal(whyNone([spec("b8t4-w2048", 180), base(181)]), "b8t4-w2048, the fastest eligible configuration, is not faster than baseline (the baseline: 0.99x (0.87-1.14), inconclusive)");
  assert.equal(whyNone([spec("b8t4-w2048", 130), base(181)]), "b8t4-w2048, the fastest eligible configuration, is slower than baseline (the baseline: 0.72x (0.63-0.82), slower)");
  const c = choose([spec("b8t4-w2048", 180), base(75)]);
  assert.equal(c.kind, "winner");
  assert.deepEqual(c.kind === "winner" && [c.stack, c.runnerUp, c.baseline.stack, c.baseline.comparison.verdict], ["b8t4-w2048", undefined, "baseline", "better"]);
});

test("the fastest of several is not best when its baseline cannot be used, and says why", () => {
  assert.equal(
    whyNone([spec("b8t4-w2048", 180), spec("b16t4-w2048", 140), base(75, { benchmark: "aaaaaaaaaaaa" })]),
    "b8t4-w2048 is faster than every other eligible configuration, but no baseline shows that it beats no speculation: the baseline on 10.0.0.5 (baseline) was measured under other benchmark settings",
  );
});

test("a stale or differently deployed baseline is refused by name: the setting with both values, or the age", () => {
  const b8 = spec("b8t4-w2048", 180);
  const why = (baseline: Measured, s = verdictSchema.parse({})) => speedups([b8, baseline], s).get("b8t4-w2048")?.why;
  assert.equal(why(base(75, {}, "2026-11-22T10:05:00.000Z")), "the baseline on 10.0.0.5 (baseline) was measured 10.0 days before b8t4-w2048 (more than verdict.maxAgeDays, 7)");
  assert.equal(why(base(75, {}, "2026-11-22T10:05:00.000Z"), verdictSchema.parse({ maxAgeDays: 14 })), undefined, "younger than a longer limit");
  assert.equal(why(base(75, {}, "2026-12-12T10:05:00.000Z")), "the baseline on 10.0.0.5 (baseline) was measured 10.0 days after b8t4-w2048 (more than verdict.maxAgeDays, 7)");
  assert.equal(
    why(base(75, { deploymentSettings: { ...DEPLOYED, "model.quantization": "fp8" } })),
    'the baseline on 10.0.0.5 (baseline) was deployed with another model.quantization ("fp8"; b8t4-w2048: null)',
  );
  assert.equal(
    why(base(75, { deploymentSettings: { ...DEPLOYED, "model.memFractionStatic": 0.7, "service.environment": "sha256 0123456789ab" } })),
    'the baseline on 10.0.0.5 (baseline) was deployed with another model.memFractionStatic (0.7; b8t4-w2048: 0.85), another service.environment ("sha256 0123456789ab"; b8t4-w2048: "none")',
  );
  assert.equal(
    why(base(75, { deploymentSettings: undefined })),
    "the baseline on 10.0.0.5 (baseline) does not record its deployment settings (measured before the report compared them): measure it again",
  );
  // Every baseline on the host is named with its reason; a usable one is used, the newest first.
  const old = { ...base(70, {}, "2026-11-01T00:00:00.000Z"), stack: "baseline-old" };
  assert.equal(speedups([b8, old, base(75, { deploymentSettings: { ...DEPLOYED, "model.contextLength": 65536 } })]).get("b8t4-w2048")?.why, 'the baseline on 10.0.0.5 (baseline) was deployed with another model.contextLength (65536; b8t4-w2048: null); the baseline on 10.0.0.5 (baseline-old) was measured 31.4 days before b8t4-w2048 (more than verdict.maxAgeDays, 7)');
  assert.equal(baselineFor(b8, [b8, old, base(75)]).baseline?.stack, "baseline");
  // The report says which baseline it used, or why none.
  assert.equal(speedups([b8, base(75)]).get("b8t4-w2048")?.baseline?.stack, "baseline");
});

test("a row whose benchmark warned (a prefix-cache hit) is not best, and a baseline that warned is not used", () => {
  const cached = "short: 3000 of 3100 prompt tokens came from the prefix cache";
  const rows = [spec("b16t4-w2048", 200, { warnings: [cached] }), spec("b8t4-w2048", 170), base(75)];
  const c = choose(rows);
  assert.equal(c.kind === "winner" && c.stack, "b8t4-w2048");
  assert.deepEqual(c.excluded, [{ stack: "b16t4-w2048", why: `its benchmark warned: ${cached}` }]);
  assert.deepEqual(c.estimates.map((e) => e.stack), ["b8t4-w2048"]);
  const warnedBase = base(75, {}, undefined, { warnings: ["concurrency-4: 1 request(s) failed 3 times (raw records)"] });
  assert.equal(speedups([spec("b8t4-w2048", 170), warnedBase]).get("b8t4-w2048")?.why, "the baseline on 10.0.0.5 (baseline) is not used: its benchmark warned: concurrency-4: 1 request(s) failed 3 times (raw records)");
});

test("speedups carry their always-valid interval; one the benchmark cannot decide is inconclusive, with the difference it could detect", () => {
  const g = speedups([spec("b8t4-w2048", 76), base(75)]).get("b8t4-w2048")!;
  assert.equal(g.short?.verdict, "inconclusive");
  // One launch each: the offset is not measured, so twice the assumed 1.5 % is taken; this benchmark detects about 22 %.
  assert.ok(g.short!.detectable > 0.15 && g.short!.detectable < 0.3, JSON.stringify(g.short));
  assert.ok(g.short!.low < 1 && g.short!.high > 1, JSON.stringify(g.short));
  assert.equal(speedups([spec("b8t4-w2048", 170), base(75)]).get("b8t4-w2048")?.short?.verdict, "better");
});

/** A kept run of b8t4-w2048 on the server start `pid`. */
const run = (takenAt: string, decode: number, pid: number, extra: Partial<HistoryRecord> = {}): HistoryRecord => ({
  format: 1,
  stack: "b8t4-w2048",
  backend: "",
  takenAt,
  unitHash: "a".repeat(64),
  host: "10.0.0.5",
  configuration: ddtree("b8t4-w2048", 8),
  result: resultOf({ decode, spread: 2, on: { mainPid: pid } }),
  ...extra,
});

test("each server start of a row's unit is a launch; runs on one server start are one launch, their requests pooled", () => {
  const runs = [run("2026-12-01T10:00:00.000Z", 170, 11), run("2026-12-01T11:00:00.000Z", 172, 11), run("2026-12-02T09:00:00.000Z", 176, 12), run(TAKEN, 174, 13)];
  const last = runs[3];
  const r: Measured = { stack: "b8t4-w2048", configuration: last.configuration, result: last.result, takenAt: TAKEN, runs };
  const l = launchesOf(r, shortRate, verdictSchema.parse({}))!;
  assert.equal(l.runs, 4);
  assert.deepEqual(l.launches.map((x) => [x.value, x.requests]), [[174, 3], [171, 6], [176, 3]]);
  assert.equal(estimateOf(r, shortRate, offsetOf([r], shortRate))?.estimate.launches, 3);
  // Its relaunches measured the offset (their spread, 2 degrees of freedom), pooled with the assumed twice 1.5 %.
  const offset = offsetOf([r], shortRate);
  assert.equal(offset.dof, 2);
  assert.ok(offset.measuredSd !== undefined && offset.sd >= 0.015, JSON.stringify(offset));
  // Another unit, another host, a run that warned, or one older than maxAgeDays is not a launch of this row.
  const others = [run(TAKEN.replace("10:05", "08:00"), 150, 21, { unitHash: "b".repeat(64) }), run("2026-12-02T08:00:00.000Z", 150, 22, { host: "10.0.0.6" }), run("2026-12-02T07:00:00.000Z", 150, 23, { result: resultOf({ decode: 150, spread: 2, on: { mainPid: 23 }, warnings: ["short: prompts measured 90 tokens, not the 128 asked"] }) }), run("2026-11-20T07:00:00.000Z", 150, 24), last];
  assert.equal(launchesOf({ ...r, runs: others }, shortRate, verdictSchema.parse({}))!.launches.length, 1);
  // Without a kept record of its own run, a row is one launch.
  assert.equal(launchesOf({ ...r, runs: undefined }, shortRate, verdictSchema.parse({}))!.launches.length, 1);
});
