// The comparison table and chart, from recorded results.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { bestStack, globMatcher, renderMarkdown, renderSvg, ReportRow } from "../../../components/benchmark/report";
import type { BenchmarkResult } from "../../../components/benchmark/run";

function result(tps: number, spread: number, accept: number): BenchmarkResult {
  const lat = { prompt_tokens: 128, runs: 3, output_throughput: tps, output_throughput_min: tps - spread, output_throughput_max: tps + spread, mean_ttft_ms: 70, median_ttft_ms: 69, p99_ttft_ms: 80, mean_itl_ms: 30, median_itl_ms: 29, p99_itl_ms: 40 };
  return {
    short: lat,
    long: [{ ...lat, context_tokens: 8192, output_throughput: tps - 15 }],
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
});

test("the chart is well-formed SVG with one bar and whisker per measured stack, the best highlighted", () => {
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
  assert.ok(svg.includes("a&lt;b&amp;c"));
  assert.equal((svg.match(/<rect /g) ?? []).length, 3, "stacks without results get no bar");
  assert.equal((svg.match(/<line x1=/g) ?? []).length, 3 + 1, "a whisker per bar plus the axis");
  assert.match(svg, /fill="#2e7d32"><title>b16t4-w2048: 181\.7 tok\/s<\/title>/);
});

test("stack globs select subsets the way a shell would", () => {
  const m = globMatcher("b*-w2048");
  assert.deepEqual(["b8t4-w2048", "b8t4-wnone", "b16t4-w2048", "xb8-w2048"].filter(m), ["b8t4-w2048", "b16t4-w2048"]);
  assert.equal(globMatcher("b?t4-*")("b8t4-wnone"), true);
  assert.equal(globMatcher("b.t4")("b8t4"), false, "dots are literal");
});
