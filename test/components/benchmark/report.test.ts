// The comparison table and chart, from recorded results.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { bestStack, globMatcher, niceTicks, renderMarkdown, renderSvg, ReportRow, textWidth } from "../../../components/benchmark/report";
import type { BenchmarkResult } from "../../../components/benchmark/run";

function result(tps: number, spread: number, accept: number): BenchmarkResult {
  const lat = { prompt_tokens: 128, runs: 3, output_throughput: tps, output_throughput_min: tps - spread, output_throughput_max: tps + spread, mean_ttft_ms: 70, median_ttft_ms: 69, p99_ttft_ms: 80, mean_itl_ms: 30, median_itl_ms: 29, p99_itl_ms: 40 };
  return {
    short: lat,
    long: [{ ...lat, context_tokens: 8192, output_throughput: tps - 15, output_throughput_min: tps - 15 - spread, output_throughput_max: tps - 15 + spread }],
    concurrency: [],
    accept_length: accept,
    accept_length_source: "test",
    coding: { tasks: 5, passed: 4, failed: 0, extraction_failed: 1, timeouts: 0, results: [] },
    completed: 10,
    total_output_tokens: 1000,
    duration: 12,
  };
}

const ROWS: ReportRow[] = [
  { stack: "b8t4-w2048", configuration: { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048, compactCache: true }, result: result(170.2, 2.1, 6.84), restartSeconds: 421.5 },
  { stack: "b16t4-w2048", configuration: { algorithm: "DDTREE", budget: 16, topk: 4, draftWindowSize: 2048, compactCache: true }, result: result(181.7, 1.4, 7.4), restartSeconds: 419 },
  { stack: "b8t4-wnone", configuration: { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: "none" }, result: null },
];

test("the table has a row per stack with configuration, tokens/s and spread, and marks the best", () => {
  const md = renderMarkdown(ROWS);
  const lines = md.trim().split("\n");
  assert.equal(lines[0], "| stack | configuration | tok/s short (min-max) | tok/s 8192 ctx | TTFT ms (median) | accept length | coding | restart s |");
  assert.equal(lines[2], "| b8t4-w2048 | DDTREE, budget 8, topk 4, window 2048, compact cache | 170.2 (168.1-172.3) | 155.2 | 69 | 6.84 | 4/5 (1 unextractable) | 421.5 |");
  assert.match(lines[3], /^\| \*\*b16t4-w2048\*\* \(best\) \| .* \| 181\.7 \(180\.3-183\.1\) \|/);
  assert.match(lines[4], /^\| b8t4-wnone \| DDTREE, budget 8, topk 4, window none \| no benchmark \|/);
  assert.equal(bestStack(ROWS), "b16t4-w2048");
  assert.match(renderMarkdown([{ stack: "b4t4-w2048", configuration: {}, result: null }]), /\n\| b4t4-w2048 \| never deployed \| no benchmark \|/, "a stack whose first up failed");
  assert.match(renderMarkdown([{ stack: "plain", configuration: { stack: "plain", algorithm: null }, result: null }]), /\n\| plain \| no speculation \|/);
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

test("the chart shows, for every measured stack, tokens/s at short and long context with their spread, acceptance length and coding", () => {
  const svg = renderSvg(ROWS);
  const said = texts(svg).map((t) => t.text);
  for (const heading of ["Decode tokens/s", "short prompt (128 tokens)", "at 8192-token context", "Acceptance length", "Coding check"]) assert.ok(said.includes(heading), heading);
  for (const value of ["170.2 (168.1–172.3)", "155.2 (153.1–157.3)", "6.84", "181.7 (180.3–183.1)", "166.7 (165.3–168.1)", "7.40", "4/5"]) {
    assert.ok(said.includes(value), `${value} on the chart`);
  }
  assert.match(svg, /<title>b8t4-w2048, short prompt: 170\.2 tok\/s, median of 3 runs \(min 168\.1, max 172\.3\)<\/title>/);
  assert.match(svg, /<title>b16t4-w2048, 8192-token context: 166\.7 tok\/s, median of 3 runs \(min 165\.3, max 168\.1\)<\/title>/);
  assert.match(svg, /<title>b8t4-w2048: 4 of 5 coding tasks passed \(1 without extractable code\)<\/title>/);
  assert.equal((svg.match(/<\/title><\/rect>/g) ?? []).length, 2 * 4, "a bar per measured stack and metric, none for b8t4-wnone");
  assert.equal((svg.match(/stroke-width="1\.5"/g) ?? []).length, 2 * 2 * 3, "a whisker with two caps per measured stack and context");
  assert.equal(said.filter((t) => t === "no benchmark").length, 2, "b8t4-wnone says it has no numbers");
  // Both tokens/s panels share one scale, in round steps.
  assert.equal(said.join(" ").match(/\b0 50 100 150 200\b/g)?.length, 2, said.join(" "));
  assert.ok(said.join(" ").includes("0 2 4 6 8"), "acceptance length axis");
  assert.ok(said.join(" ").includes("0% 50% 100%"), "coding axis");
});

test("the best stack (highest median short-context tokens/s) is highlighted, tagged and drawn in its own color", () => {
  const svg = renderSvg(ROWS);
  assert.match(svg, /<text x="16" y="\d+" font-weight="bold" fill="#2e7d32">b16t4-w2048<\/text>/);
  assert.deepEqual(texts(svg).filter((t) => t.text === "best").length, 1);
  assert.equal((svg.match(/fill="#e8f5e9"/g) ?? []).length, 1, "one highlighted row");
  assert.equal((svg.match(/fill="#2e7d32"><title>b16t4-w2048/g) ?? []).length, 4, "all its bars");
  assert.equal((svg.match(/fill="#2e7d32"><title>b8t4-w2048/g) ?? []).length, 0);
});

test("no text runs past the chart's edges, whatever the names and numbers", () => {
  const long = "b128t16-w131072-an-unusually-long-stack-name-for-a-wide-label";
  const rows: ReportRow[] = [
    { ...ROWS[0], stack: long, result: result(9876.5, 120, 12.345) },
    { ...ROWS[1], configuration: { algorithm: "DDTREE", budget: 128, topk: 16, draftWindowSize: 131072, compactCache: true } },
    { stack: "x", configuration: {}, result: result(1, 0.5, 1) },
  ];
  for (const chart of [renderSvg(rows), renderSvg(ROWS), renderSvg([ROWS[2]])]) {
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
  assert.ok(textWidth("181.7 (180.3–183.1)", 11) >= 109, "108.5 px in DejaVu Sans 11 px");
});

test("the chart is well-formed SVG, its text escaped, and the same rows always give the same bytes", () => {
  const svg = renderSvg([...ROWS, { stack: "a<b&c", configuration: {}, result: result(100, 1, 2) }]);
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
});

test("stack globs select subsets the way a shell would", () => {
  const m = globMatcher("b*-w2048");
  assert.deepEqual(["b8t4-w2048", "b8t4-wnone", "b16t4-w2048", "xb8-w2048"].filter(m), ["b8t4-w2048", "b16t4-w2048"]);
  assert.equal(globMatcher("b?t4-*")("b8t4-wnone"), true);
  assert.equal(globMatcher("b.t4")("b8t4"), false, "dots are literal");
});
