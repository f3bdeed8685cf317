// The comparison table and chart, from recorded results: figures of either benchmark format,
// where and when each was measured, speedup over the baseline on the same host, the best
// named only beyond noise, rows measured under other settings marked.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { globMatcher, niceTicks, renderMarkdown, renderSvg, textWidth } from "../../../components/benchmark/report";
import type { ReportRow } from "../../../components/verdict/rows";
import { choose, speedups } from "../../../components/verdict/choose";
import { ddtree, formatOneResultOf, noSpeculation, resultOf, ResultSpec } from "../../support/benchmarkResults";

const at = (stack: string, configuration: Record<string, unknown>, spec: ResultSpec | null, extra: Partial<ReportRow> = {}): ReportRow => ({
  stack,
  configuration,
  result: spec ? resultOf(spec) : null,
  takenAt: spec ? "2026-12-02T10:05:00.000Z" : undefined,
  ...extra,
});

const B8 = at("b8t4-w2048", ddtree("b8t4-w2048", 8), { decode: 170.2, spread: 2.1, long: { 8192: 155.2 }, concurrency: { 1: 165, 4: 560 }, accept: 6.84 }, { restartSeconds: 421.5 });
const B16 = at("b16t4-w2048", ddtree("b16t4-w2048", 16), { decode: 260, spread: 1.4, long: { 8192: 166.7 }, concurrency: { 1: 175, 4: 620 }, accept: 7.4 }, { restartSeconds: 419 });
const BASE = at("baseline", noSpeculation(), { decode: 75, spread: 1, long: { 8192: 70 }, concurrency: { 1: 70, 4: 250 }, accept: null }, { takenAt: "2026-12-02T09:30:00.000Z", restartSeconds: 300 });
const WNONE = at("b8t4-wnone", ddtree("b8t4-wnone", 8, { draftWindowSize: "none", compactCache: false }), null);
const ROWS: ReportRow[] = [B8, B16, BASE, WNONE];

/** Rows of a short-prompt decode rate and spread only, for the choice. */
const speed = (stack: string, decode: number, spread: number, extra: Partial<ResultSpec> = {}, configuration = ddtree(stack, 8)): ReportRow => at(stack, configuration, { decode, spread, ...extra });
const table = (md: string) => md.split("\n").filter((l) => l.startsWith("| "));

test("the table has a row per stack: decode rate and spread, per long context and concurrency level with the speedup, and where, on what and when it was measured", () => {
  const lines = table(renderMarkdown(ROWS));
  assert.equal(
    lines[0],
    "| stack | configuration | decode tok/s short (min-max) | decode tok/s 8192 ctx | output tok/s 1 concurrent | output tok/s 4 concurrent | TTFT ms (median) | accept length | coding | restart s | host | GPU | SGLang | measured (UTC) |",
  );
  assert.equal(lines[1], "| b8t4-w2048 | DDTREE, budget 8, topk 4, window 2048, compact cache | 170.2 (168.1-172.3), 2.27x (1.98-2.61) | 155.2, 2.22x (1.93-2.55) | 165.0, 2.36x (2.07-2.68) | 560.0, 2.24x (1.97-2.55) | 69 | 6.84 | 5/5 | 421.5 | 10.0.0.5 | NVIDIA H200 × 8 | 0.5.4.post1 | 2026-12-02 10:05 |");
  assert.equal(lines[2], "| **b16t4-w2048** (best) | DDTREE, budget 16, topk 4, window 2048, compact cache | 260.0 (258.6-261.4), 3.47x (3.03-3.97) | 166.7, 2.38x (2.08-2.73) | 175.0, 2.50x (2.20-2.85) | 620.0, 2.48x (2.18-2.82) | 69 | 7.40 | 5/5 | 419.0 | 10.0.0.5 | NVIDIA H200 × 8 | 0.5.4.post1 | 2026-12-02 10:05 |");
  assert.equal(lines[3], "| baseline | no speculation | 75.0 (74.0-76.0) | 70.0 | 70.0 | 250.0 | 69 | - | 5/5 | 300.0 | 10.0.0.5 | NVIDIA H200 × 8 | 0.5.4.post1 | 2026-12-02 09:30 |", "the baseline has no speedup of its own");
  assert.equal(lines[4], "| b8t4-wnone | DDTREE, budget 8, topk 4, window none | no benchmark | - | - | - | - | - | - | - | - | - | - | - |");
  assert.match(renderMarkdown([{ stack: "b4t4-w2048", configuration: {}, result: null }]), /\n\| b4t4-w2048 \| never deployed \| no benchmark \|/, "a stack whose first up failed");
  assert.match(renderMarkdown([{ stack: "plain", configuration: { stack: "plain", algorithm: null }, result: null }]), /\n\| plain \| no speculation \|/);
});

test("host, GPU, SGLang version and date are '-' where the result does not say", () => {
  const row = at("b8t4-w2048", ddtree("b8t4-w2048", 8), { decode: 170, spread: 1, on: null }, { takenAt: undefined });
  assert.match(table(renderMarkdown([row]))[1], / \| - \| - \| - \| - \| - \|$/, "restart, host, GPU, version, date");
  const oneGpu = at("b8t4-w2048", ddtree("b8t4-w2048", 8), { decode: 170, spread: 1, on: { gpu: "NVIDIA H100 80GB HBM3", gpuCount: null, sglangVersion: null } });
  assert.match(table(renderMarkdown([oneGpu]))[1], / \| 10\.0\.0\.5 \| NVIDIA H100 80GB HBM3 \| - \| 2026-12-02 10:05 \|$/);
});

test("the best is named only when the rule finds it faster than every other eligible configuration and than the baseline; otherwise the configurations it cannot separate tie", () => {
  const c = choose(ROWS);
  assert.equal(c.kind, "winner");
  assert.equal(c.kind === "winner" && c.stack, "b16t4-w2048");
  assert.deepEqual(c.kind === "winner" && [c.runnerUp?.stack, c.baseline.stack], ["b8t4-w2048", "baseline"]);
  const md = renderMarkdown(ROWS);
  assert.match(
    md,
    /\n\*\*Best: b16t4-w2048\*\*: faster by the rule than every other eligible configuration \(the closest, b8t4-w2048: 1\.53x \(1\.34-1\.75\)\) and than baseline \(the baseline, no speculation: 3\.47x \(3\.03-3\.97\)\), in short-context decode tok\/s\. Estimates \(short-context decode tok\/s, the mean of each launch's median\): b8t4-w2048 170\.2 ±10\.1 % \(1 launch, 3 requests\); b16t4-w2048 260\.0 ±9\.7 % \(1 launch, 3 requests\)\. The baseline \(no speculation\) is never best\. A is faster than B only when the whole 95 % interval of A\/B lies above 1\.005 \(a difference under 0\.5 % is none\); "equal within 2 %" when it lies inside ±2 %, "inconclusive" otherwise\. Every interval is always valid: it holds however often the benchmark is re-run and this report read again\. Each server launch of a configuration counts once; the launch-to-launch spread is measured from the relaunches of every row, pooled with an assumed 3 % \(twice verdict\.launchSd, 1\.5 %\), never below 1\.5 %; where nothing was relaunched, 3 % is assumed \(settings: components\/verdict\/schema\.ts\)\.\n/,
  );

  // 171.0 (168.0-174.0) on top; 170.2 (168.1-172.3) and 160.0 (151.0-169.0), wide, are inconclusive against it (one launch each); 120.0 is slower.
  const close = [speed("b8t4-w2048", 170.2, 2.1), speed("b16t4-w2048", 171, 3), speed("b4t4-w2048", 160, 9), speed("b12t6-w2048", 120, 2), BASE];
  const tie = choose(close);
  assert.deepEqual(tie.kind === "tie" && tie.stacks, ["b16t4-w2048", "b8t4-w2048", "b4t4-w2048"]);
  const text = renderMarkdown(close);
  assert.match(text, /\n\*\*Tie: b16t4-w2048, b8t4-w2048, b4t4-w2048 \(inconclusive\)\*\*: the rule does not find b16t4-w2048 faster than each of the others \(b16t4-w2048 against b8t4-w2048: 1\.00x \(0\.87-1\.16\), inconclusive; it could detect 20\.4 %; b16t4-w2048 against b4t4-w2048: 1\.07x \(0\.87-1\.32\), inconclusive; it could detect 31\.2 %\), so none is named best\. b16t4-w2048 is faster than baseline \(the baseline: 2\.28x \(1\.98-2\.63\)\)\./);
  assert.deepEqual(table(text).slice(1, 5).map((l) => l.split(" | ")[0]), ["| b8t4-w2048 (tie)", "| b16t4-w2048 (tie)", "| b4t4-w2048 (tie)", "| b12t6-w2048"]);
  assert.doesNotMatch(text, /\(best\)|Best:/);
  // Far apart, the faster is best; 1 % apart over 3 requests each is inconclusive.
  assert.equal(choose([speed("a", 180, 2), speed("b", 178.2, 2), BASE]).kind, "tie");
  const far = choose([speed("a", 180, 2), speed("b", 150, 2), BASE]);
  assert.equal(far.kind === "winner" && far.stack, "a");
});

test("a configuration that fails a coding task is never best, nor is the baseline; both are said", () => {
  const rows = [speed("b32t4-w2048", 250, 1, { coding: [4, 5, 1] }), speed("b16t4-w2048", 260, 1.4), speed("b8t4-w2048", 170.2, 2.1), speed("baseline", 100, 1, {}, noSpeculation())];
  const c = choose(rows);
  assert.equal(c.kind === "winner" && c.stack, "b16t4-w2048");
  assert.deepEqual(c.excluded, [{ stack: "b32t4-w2048", why: "coding check 4/5 passed" }]);
  const md = renderMarkdown(rows);
  assert.match(table(md)[1], /^\| b32t4-w2048 \| .* \| 4\/5 \(1 unextractable\) \|/);
  assert.match(md, /\*\*Best: b16t4-w2048\*\*: .* Not eligible: b32t4-w2048 \(coding check 4\/5 passed\)\. Estimates .* The baseline \(no speculation\) is never best\./);
  const none = choose([rows[0], rows[3]]);
  assert.deepEqual([none.kind, none.kind === "none" && none.why, none.excluded], ["none", "every measured speculative configuration is excluded", [{ stack: "b32t4-w2048", why: "coding check 4/5 passed" }]]);
  assert.match(renderMarkdown([rows[0], rows[3]]), /\n\*\*No best configuration\*\*: every measured speculative configuration is excluded\. Not eligible: b32t4-w2048/);
  const nothing = choose([rows[3], WNONE]);
  assert.deepEqual([nothing.kind, nothing.kind === "none" && nothing.why], ["none", "no speculative configuration has a benchmark"]);
  const off = choose([speed("a", 180, 2, { coding: null }), rows[3]]);
  assert.equal(off.kind === "winner" && off.stack, "a", "a check that was off is no failure");
});

test("speedup divides by the baseline measured on the same host only, and the note says which baseline each row used", () => {
  const onB = { on: { host: "10.0.0.6" } };
  const rows = [
    B8,
    at("b16t4-w2048", ddtree("b16t4-w2048", 16), { decode: 260, spread: 1.4, long: { 8192: 166.7 }, concurrency: { 4: 620 }, ...onB }),
    at("b4t4-w2048", ddtree("b4t4-w2048", 4), { decode: 150, spread: 1, concurrency: { 4: 500 }, on: { host: "10.0.0.7" } }),
    BASE,
    // On 10.0.0.6, but under other benchmark settings: not a baseline for b16t4-w2048.
    at("baseline-b", noSpeculation("baseline-b", { benchmark: "aaaaaaaaaaaa" }), { decode: 60, spread: 1, concurrency: { 4: 200 }, accept: null, ...onB }),
    // An older baseline on 10.0.0.5: the newest is used.
    at("baseline-old", noSpeculation("baseline-old"), { decode: 10, spread: 1, accept: null }, { takenAt: "2026-11-01T00:00:00.000Z" }),
  ];
  const g = speedups(rows);
  assert.equal(g.get("b8t4-w2048")?.baseline?.stack, "baseline", "the newest usable one (baseline-old is a month older)");
  assert.equal(g.get("b8t4-w2048")?.short?.ratio.toFixed(3), (170.2 / 75).toFixed(3));
  assert.equal(g.get("b8t4-w2048")?.short?.verdict, "better");
  assert.equal(g.get("b16t4-w2048")?.baseline, undefined, "the baseline on 10.0.0.5 is not used for a row measured on 10.0.0.6");
  assert.equal(g.get("b16t4-w2048")?.why, "the baseline on 10.0.0.6 (baseline-b) was measured under other benchmark settings");
  assert.equal(g.get("b4t4-w2048")?.why, "no baseline measured on 10.0.0.7");
  const md = renderMarkdown(rows);
  const lines = table(md);
  assert.match(lines[1], /^\| b8t4-w2048 \| .* \| 170\.2 \(168\.1-172\.3\), 2\.27x \(1\.98-2\.61\) \| 155\.2, 2\.22x \(1\.93-2\.55\) \|/);
  assert.match(lines[2], /^\| b16t4-w2048 \| .* \| 260\.0 \(258\.6-261\.4\) \| 166\.7 \| - \| 620\.0 \|/, "no speedup");
  // Rows of three hosts: their raw rates are not ranked against each other.
  assert.match(md, /the configurations were measured on different hosts or GPUs \(10\.0\.0\.5\/NVIDIA H200 × 8, 10\.0\.0\.6\/NVIDIA H200 × 8, 10\.0\.0\.7\/NVIDIA H200 × 8\)/);
  assert.match(lines[3], /^\| b4t4-w2048 \| .* \| 150\.0 \(149\.0-151\.0\) \| - \| - \| 500\.0 \|/);
  assert.match(md, /\n- b8t4-w2048: against baseline \(no speculation\) on 10\.0\.0\.5, measured 2026-12-02 09:30\.\n/);
  assert.match(md, /\n- b16t4-w2048: no speedup: the baseline on 10\.0\.0\.6 \(baseline-b\) was measured under other benchmark settings\.\n/);
  assert.match(md, /\n- b4t4-w2048: no speedup: no baseline measured on 10\.0\.0\.7\.\n/);
  assert.doesNotMatch(md, /\n- baseline[^:]*: (against|no speedup)/, "baselines have no speedup of their own");
});

test("format-1 results are read (their output_throughput was the decode rate) and marked as not comparable", () => {
  const old: ReportRow = {
    stack: "b12t6-w2048",
    configuration: { stack: "b12t6-w2048", algorithm: "DDTREE", budget: 12, topk: 6, draftWindowSize: 2048, compactCache: true, sglangBuild: "ddtree-fork", model: "/models/Kimi-K2.6" },
    result: formatOneResultOf({ decode: 190, spread: 2, long: { 8192: 171 }, concurrency: { 4: 610 } }),
    takenAt: "2026-11-20T08:00:00.000Z",
    // Its host comes from the kept record of the same run.
    runs: [{ format: 1, stack: "b12t6-w2048", backend: "", takenAt: "2026-11-20T08:00:00.000Z", unitHash: "c".repeat(64), host: "10.0.0.5", configuration: {}, result: resultOf({ decode: 0 }) }],
  };
  const rows = [B8, B16, BASE, old];
  const md = renderMarkdown(rows);
  assert.equal(table(md)[4], "| b12t6-w2048 † | DDTREE, budget 12, topk 6, window 2048, compact cache | 190.0 (188.0-192.0) | 171.0 | - | 610.0 | 69 | 6.50 | 5/5 | - | 10.0.0.5 | - | - | 2026-11-20 08:00 |");
  assert.match(md, /\n† Measured under other settings than the other rows; not compared:\n\n- b12t6-w2048: measured by an older benchmark \(format 1\): not comparable\.\n/);
  assert.match(md, /\n- b12t6-w2048: no speedup: the baseline on 10\.0\.0\.5 \(baseline\) was measured by another benchmark format\.\n/);
  const c = choose(rows);
  assert.equal(c.kind === "winner" && c.stack, "b16t4-w2048", "b12t6-w2048 is faster, but not comparable");
  assert.deepEqual(c.excluded, [{ stack: "b12t6-w2048", why: "measured by an older benchmark (format 1): not comparable" }]);
});

test("rows measured under other benchmark settings or benchmark code than most are marked, and never best", () => {
  const rows = [
    speed("b8t4-w2048", 170.2, 2.1),
    speed("b16t4-w2048", 260, 1.4),
    speed("b4t4-w2048", 200, 1, {}, ddtree("b4t4-w2048", 4, { benchmark: "111111111111" })),
    speed("b12t6-w2048", 210, 1, {}, ddtree("b12t6-w2048", 12, { benchmarkCode: "222222222222" })),
    speed("baseline", 75, 1, {}, noSpeculation()),
  ];
  const md = renderMarkdown(rows);
  assert.deepEqual(table(md).slice(1).map((l) => l.split(" | ")[0]), ["| b8t4-w2048", "| **b16t4-w2048** (best)", "| b4t4-w2048 †", "| b12t6-w2048 †", "| baseline"]);
  assert.match(md, /\n- b4t4-w2048: other benchmark settings \(111111111111; most rows: 6afe5e8f6155\)\.\n- b12t6-w2048: other benchmark code \(222222222222; most rows: 00fecfdfc67e\)\.\n/);
  assert.deepEqual(choose(rows).excluded.map((e) => e.stack), ["b4t4-w2048", "b12t6-w2048"]);
});

test("each result's warnings are listed under the table", () => {
  const rows = [speed("b8t4-w2048", 170, 1, { warnings: ["long-8192: prompts measured 8000 tokens, not the 8192 asked", "concurrency-4: 1 request(s) failed 3 times (raw records)"] }), speed("b16t4-w2048", 180, 1)];
  assert.match(renderMarkdown(rows), /\n‡ Warnings of the benchmark \(such a row is neither best nor a baseline\):\n\n- b8t4-w2048: long-8192: prompts measured 8000 tokens, not the 8192 asked\n- b8t4-w2048: concurrency-4: 1 request\(s\) failed 3 times \(raw records\)\n/);
  assert.doesNotMatch(renderMarkdown(rows.slice(1)), /Warnings/);
});

/** The chart's text elements: where they are anchored, how they are set, what they say. */
function texts(svg: string): { x: number; anchor: string; size: number; bold: boolean; text: string }[] {
  const root = Number(/<svg [^>]*font-size="(\d+)"/.exec(svg)![1]);
  return [...svg.matchAll(/<text ([^>]*)>([^<]*)<\/text>/g)].map(([, attrs, content]) => {
    const attr = (name: string) => new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1];
    const text = content.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&amp;/g, "&");
    return { x: Number(attr("x")), anchor: attr("text-anchor") ?? "start", size: Number(attr("font-size") ?? root), bold: attr("font-weight") === "bold", text };
  });
}

const svgWidth = (svg: string) => Number(/<svg [^>]*width="(\d+)"/.exec(svg)![1]);

test("axis ticks are round numbers from 0 past the largest value", () => {
  assert.deepEqual(niceTicks(183.1), [0, 50, 100, 150, 200]);
  assert.deepEqual(niceTicks(150), [0, 50, 100, 150]);
  assert.deepEqual(niceTicks(7.4), [0, 2, 4, 6, 8]);
  assert.deepEqual(niceTicks(0.37), [0, 0.1, 0.2, 0.3, 0.4]);
  assert.deepEqual(niceTicks(1840), [0, 500, 1000, 1500, 2000]);
  assert.deepEqual(niceTicks(90), [0, 25, 50, 75, 100]);
  assert.deepEqual(niceTicks(100, 2), [0, 50, 100]);
  assert.deepEqual(niceTicks(0), [0, 1], "nothing measured still gives an axis");
});

test("the chart shows, for every measured stack, decode tokens/s at short and long context with their spread and speedup, acceptance length and coding", () => {
  const svg = renderSvg(ROWS);
  const said = texts(svg).map((t) => t.text);
  for (const heading of ["Decode tokens/s", "short prompt (128 tokens)", "at 8192-token context", "Acceptance length", "Coding check"]) assert.ok(said.includes(heading), heading);
  for (const value of ["170.2 (168.1–172.3) 2.27x", "155.2 (153.1–157.3) 2.22x", "6.84", "260.0 (258.6–261.4) 3.47x", "166.7 (165.3–168.1) 2.38x", "7.40", "5/5", "75.0 (74.0–76.0)", "not reported"]) {
    assert.ok(said.includes(value), `${value} on the chart`);
  }
  assert.match(svg, /<title>b8t4-w2048, short prompt: 170\.2 tok\/s decode, median of 3 requests \(min 168\.1, max 172\.3\); 2\.27x \(1\.98-2\.61\) the no-speculation baseline \(baseline on 10\.0\.0\.5\)<\/title>/);
  assert.match(svg, /<title>b16t4-w2048, 8192-token context: 166\.7 tok\/s decode, median of 3 requests \(min 165\.3, max 168\.1\); 2\.38x \(2\.08-2\.73\)/);
  assert.match(svg, /<title>b8t4-w2048: 5 of 5 coding tasks passed<\/title>/);
  assert.equal((svg.match(/<\/title><\/rect>/g) ?? []).length, 4 + 4 + 3, "a bar per measured stack and metric (the baseline reports no acceptance length), none for b8t4-wnone");
  assert.equal((svg.match(/stroke-width="1\.5"/g) ?? []).length, 3 * 2 * 3, "a whisker with two caps per measured stack and context");
  assert.equal(said.filter((t) => t === "no benchmark").length, 2, "b8t4-wnone says it has no numbers");
  assert.ok(said.includes("Bars: median of 3 requests, single stream; whiskers: min to max; 2.41x: speedup over the no-speculation baseline on the same host (~: neither faster nor slower)."));
  // Both tokens/s panels share one scale, in round steps.
  assert.equal(said.join(" ").match(/\b0 100 200 300\b/g)?.length, 2, said.join(" "));
  assert.ok(said.join(" ").includes("0 2 4 6 8"), "acceptance length axis");
  assert.ok(said.join(" ").includes("0% 50% 100%"), "coding axis");
});

test("the best stack is highlighted, tagged and drawn in its own color; a tie tags every tied stack and names none best", () => {
  const svg = renderSvg(ROWS);
  assert.match(svg, /<text x="16" y="\d+" font-weight="bold" fill="#2e7d32">b16t4-w2048<\/text>/);
  assert.deepEqual(texts(svg).filter((t) => t.text === "best").length, 1);
  assert.ok(texts(svg).some((t) => t.text === "Best: b16t4-w2048 (faster by the rule than every other eligible configuration and the baseline baseline, 3.47x (3.03-3.97))."));
  assert.equal((svg.match(/fill="#e8f5e9"/g) ?? []).length, 1, "one highlighted row");
  assert.equal((svg.match(/fill="#2e7d32"><title>b16t4-w2048/g) ?? []).length, 4, "all its bars");
  assert.equal((svg.match(/fill="#2e7d32"><title>b8t4-w2048/g) ?? []).length, 0);

  const tie = renderSvg([speed("b8t4-w2048", 170.2, 2.1), speed("b16t4-w2048", 171, 3), speed("b12t6-w2048", 120, 2), BASE]);
  assert.equal(texts(tie).filter((t) => t.text === "tie").length, 2);
  assert.equal(texts(tie).filter((t) => t.text === "best").length, 0);
  assert.ok(texts(tie).some((t) => t.text === "Tie: b16t4-w2048, b8t4-w2048 (inconclusive); none is named best."));
  assert.equal((tie.match(/fill="#fff3e0"/g) ?? []).length, 2, "two highlighted rows");
  assert.equal((tie.match(/fill="#2e7d32"/g) ?? []).length, 0, "no bar in the best's color");
});

test("the chart marks rows measured under other settings", () => {
  const svg = renderSvg([B16, { ...B8, result: formatOneResultOf({ decode: 170, spread: 2 }) }]);
  assert.ok(texts(svg).some((t) => t.text === "DDTREE, budget 8, topk 4, window 2048, compact cache († other settings)"));
  assert.ok(texts(svg).some((t) => t.text === "170.0 (168.0–172.0)"), "its decode rate, from format 1's output_throughput");
});

test("no text runs past the chart's edges, whatever the names and numbers", () => {
  const long = "b128t16-w131072-an-unusually-long-stack-name-for-a-wide-label";
  const rows: ReportRow[] = [
    { ...B8, stack: long, result: resultOf({ decode: 9876.5, spread: 120, long: { 8192: 9000, 131072: 7000 }, accept: 12.345 }) },
    { ...B16, configuration: ddtree("b128t16-w131072", 128, { topk: 16, draftWindowSize: 131072 }) },
    { ...speed("b4t4-w2048", 176, 3), stack: "b4t4-w2048-ties-with-b16" },
    BASE,
    { stack: "x", configuration: {}, result: resultOf({ decode: 1, spread: 0.5, accept: 1 }) },
  ];
  for (const chart of [renderSvg(rows), renderSvg(ROWS), renderSvg([WNONE])]) {
    const width = svgWidth(chart);
    for (const t of texts(chart)) {
      const w = textWidth(t.text, t.size, t.bold);
      const [left, right] = t.anchor === "middle" ? [t.x - w / 2, t.x + w / 2] : t.anchor === "end" ? [t.x - w, t.x] : [t.x, t.x + w];
      assert.ok(left >= 0 && right <= width, `"${t.text}" spans ${left.toFixed(0)}-${right.toFixed(0)} of a chart ${width} wide`);
    }
    for (const m of chart.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/g)) assert.ok(Number(m[1]) + Number(m[2]) <= width, m[0]);
  }
  // The estimate errs wide: DejaVu Sans (the usual widest sans-serif) sets these narrower.
  assert.ok(textWidth("b16t4-w2048", 12) >= 80, "79.9 px in DejaVu Sans 12 px");
  assert.ok(textWidth("DDTREE, budget 16, topk 4, window 2048, compact cache", 11) >= 323, "322.4 px in DejaVu Sans 11 px");
  assert.ok(textWidth("Decode tokens/s", 12, true) >= 109, "108.1 px in DejaVu Sans Bold 12 px");
  assert.ok(textWidth("181.7 (180.3–183.1) 2.42x", 11) >= 142, "141.6 px in DejaVu Sans 11 px");
});

test("the chart is well-formed SVG, its text escaped, and the same rows always give the same bytes", () => {
  const svg = renderSvg([...ROWS, { stack: "a<b&c", configuration: {}, result: resultOf({ decode: 100, spread: 1, accept: 2 }) }]);
  assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" /);
  // Tags balance and nest; attributes are quoted; text is escaped.
  const stack: string[] = [];
  let tags = 0;
  for (const m of svg.matchAll(/<(\/?)([a-z]+)((?:\s+[A-Za-z0-9:_-]+="[^"<]*")*)\s*(\/?)>/g)) {
    tags++;
    if (m[1]) assert.equal(stack.pop(), m[2]);
    else if (!m[4]) stack.push(m[2]);
  }
  assert.deepEqual(stack, []);
  assert.equal(tags, (svg.match(/</g) ?? []).length, "every tag is well-formed");
  assert.equal(svg.replace(/<[^>]*>/g, "").includes("<"), false);
  assert.ok(svg.includes(">a&lt;b&amp;c</text>"));
  // Outputs read back from state come with their keys in another order.
  const reordered = JSON.parse(JSON.stringify(ROWS), (_k, v: unknown) => (v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v));
  assert.equal(renderSvg(reordered), renderSvg(ROWS));
  assert.notEqual(renderSvg(ROWS.slice(1)), renderSvg(ROWS), "and other rows other bytes");
  assert.equal(renderMarkdown(reordered), renderMarkdown(ROWS), "the table too");
});

test("stack globs select subsets the way a shell would", () => {
  const m = globMatcher("b*-w2048");
  assert.deepEqual(["b8t4-w2048", "b8t4-wnone", "b16t4-w2048", "xb8-w2048"].filter(m), ["b8t4-w2048", "b16t4-w2048"]);
  assert.equal(globMatcher("b?t4-*")("b8t4-wnone"), true);
  assert.equal(globMatcher("b.t4")("b8t4"), false, "dots are literal");
});
