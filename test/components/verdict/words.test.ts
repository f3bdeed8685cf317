// Issue 63: one verdict vocabulary. The report said "Tie", the adaptive sweep "A tie" and, beside
// its "Best", "Within noise of it" (which the report's words call a tie); the words are now
// defined once (components/verdict/words.ts) and the report, the full sweep (the report's
// table) and the adaptive sweep all say them.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { BEST, bestHeading, chartWords, comparisonWord, EQUAL_WITHIN, INCONCLUSIVE, NO_BEST_HEADING, TIE, tieHeading, tieWord } from "../../../components/verdict/words";
import { renderMarkdown, renderSvg } from "../../../components/benchmark/report";
import { renderAdaptiveMarkdown } from "../../../components/sweep/adaptive/report";
import { gridPoints } from "../../../components/sweep/adaptive/space";
import { conclude, DEFAULT_STRATEGY, type LaunchRecord } from "../../../components/sweep/adaptive/strategy";
import { compare } from "../../../components/verdict/rule";
import { ddtree, noSpeculation, resultOf } from "../../support/benchmarkResults";
import type { ReportRow } from "../../../components/verdict/rows";

test("the words: best, tie (equal within X % or inconclusive), no best configuration; a comparison is faster, slower, equal within X % or inconclusive", () => {
  assert.deepEqual([BEST, TIE, EQUAL_WITHIN, INCONCLUSIVE], ["best", "tie", "equal within", "inconclusive"]);
  assert.equal(bestHeading("b16t4-w2048"), "**Best: b16t4-w2048**");
  assert.equal(tieHeading(["b16t4-w2048", "b8t4-w2048"], INCONCLUSIVE), "**Tie: b16t4-w2048, b8t4-w2048 (inconclusive)**");
  assert.equal(NO_BEST_HEADING, "**No best configuration**");
  assert.deepEqual(chartWords, { best: "Best", tie: "Tie", none: "No best configuration" });
  // The rule decides; only its words come from here. Two words a user can tell apart: an interval inside +-2 % is equal, a wide one inconclusive.
  const e = (value: number, relSe = 0.001) => ({ value, relSe, launches: 1, requests: 30 });
  const s = { threshold: 0.005, confidence: 0.95, equalWithin: 0.02 };
  const said = [compare(e(110), e(100), s), compare(e(90), e(100), s), compare(e(100.1), e(100), s), compare(e(100.1, 0.03), e(100, 0.03), s)];
  assert.deepEqual(said.map(comparisonWord), ["faster", "slower", "equal within 2 %", "inconclusive"]);
  assert.equal(tieWord([said[2], said[2]]), "equal within 2 %");
  assert.equal(tieWord([said[2], said[3]]), "inconclusive");
});

const row = (stack: string, decode: number, spread: number): ReportRow => ({ stack, configuration: ddtree(stack, 8), result: resultOf({ decode, spread }), takenAt: "2026-12-02T10:05:00.000Z" });
const BASE: ReportRow = { stack: "baseline", configuration: noSpeculation("baseline"), result: resultOf({ decode: 75, spread: 1, accept: null }), takenAt: "2026-12-02T09:30:00.000Z" };

const POINTS = gridPoints({ budgets: [4, 8, 16], topks: [2, 4], windows: [2048], compactCache: "auto" });
const STRATEGY = { ...DEFAULT_STRATEGY, objective: { kind: "short" as const, longWeight: 0 }, budget: {}, seed: 1 };
const launch = (point: string, short: number, long = 170): LaunchRecord => ({
  point,
  host: "gpu-1",
  launchSeconds: 400,
  passes: [
    { kind: "short", figures: { short: { median: short, min: short - 1, max: short + 1, requests: 3 }, long: { median: long, min: long - 1, max: long + 1, requests: 3 }, acceptLength: 7, codingPassed: null, benchmarkSeconds: 6 }, heldSeconds: 6 },
    { kind: "full", figures: { short: { median: short, min: short - 1, max: short + 1, requests: 6 }, long: { median: long, min: long - 1, max: long + 1, requests: 6 }, acceptLength: 7, codingPassed: true, benchmarkSeconds: 20 }, heldSeconds: 30 },
  ],
});
const adaptive = (records: LaunchRecord[]) => renderAdaptiveMarkdown({ points: POINTS, records, conclusion: conclude(POINTS, records, STRATEGY), objective: STRATEGY.objective, longContextTokens: 8192, why: "done", resumed: [] });

test("the report and the adaptive sweep say a best, a tie and no best in the same words", () => {
  const best = renderMarkdown([row("b16t4-w2048", 181.7, 1.4), row("b8t4-w2048", 150, 1), BASE]);
  assert.ok(best.includes(`${bestHeading("b16t4-w2048")}: `));
  assert.ok(best.includes("| **b16t4-w2048** (best) |"));
  assert.ok(adaptive([launch("b8t4-w2048", 190), launch("b16t4-w2048", 150)]).includes(`${bestHeading("b8t4-w2048")}, `));

  const tie = renderMarkdown([row("b16t4-w2048", 171, 3), row("b8t4-w2048", 170.2, 2.1), BASE]);
  assert.ok(tie.includes(`${tieHeading(["b16t4-w2048", "b8t4-w2048"], INCONCLUSIVE)}: `), tie);
  assert.ok(tie.includes("none is named best"));
  const tied = adaptive([launch("b8t4-w2048", 190, 170), launch("b16t4-w2048", 189, 176), launch("b4t2-w2048", 180, 165)]);
  assert.ok(tied.includes(`${tieHeading(["b8t4-w2048", "b16t4-w2048"], INCONCLUSIVE)}: `), tied);
  assert.ok(tied.includes("none is named best"));

  assert.ok(renderMarkdown([BASE]).includes(`${NO_BEST_HEADING}: `));
  assert.ok(adaptive([]).includes(`${NO_BEST_HEADING}: `));
  assert.ok(renderSvg([row("b16t4-w2048", 171, 3), row("b8t4-w2048", 170.2, 2.1), BASE]).includes(`${chartWords.tie}: b16t4-w2048, b8t4-w2048`));

  // Nothing the adaptive report says beside a best calls another configuration "within noise" of it.
  for (const md of [adaptive([launch("b8t4-w2048", 190), launch("b16t4-w2048", 150)]), tied]) assert.doesNotMatch(md, /Within noise of it|A tie|No configuration chosen|\*\*chosen\*\*/);
});
