// What a stack shows of its benchmark where people read it (issue 63): the stack output
// `benchmark` is a short summary, one line per field in `up`'s Outputs, with the verdict against
// the stack's previous run and where the full numbers are; the full numbers are the output
// `__benchmarkResult`, which `up` and `preview` do not show; nothing of either when no benchmark
// ran; and no line of the host scripts' protocol (`@@result {...}`) in what progress shows.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { benchmarkStackOutputs, benchmarkSummary, headline, summaryLine, versusPrevious, versusText, type RunOf } from "../../../components/benchmark/summary";
import { FULL_RESULT_OUTPUT, storedResultOf, storedResultOfOutputs, type StoredResult } from "../../../components/benchmark/compare";
import { progress, shownText } from "../../../components/sglang-service/remote/progress";
import { formatOneResultOf, resultOf } from "../../support/benchmarkResults";

const RESULT = resultOf({ decode: 179.2, spread: 6, long: { 4096: 171.3 }, concurrency: { 1: 150.2, 4: 540.3 }, accept: 6.75 });
const run = (result: StoredResult = RESULT, extra: Partial<RunOf> = {}): RunOf => ({ result, takenAt: "2026-12-06T20:57:28.463Z", unitHash: "7906c08870f3".padEnd(64, "0"), configuration: { benchmark: "0c9ec840e591", benchmarkCode: "b835015fd5a3" }, ...extra });
const earlier = (result: StoredResult = RESULT, extra: Partial<RunOf> = {}) => run(result, { takenAt: "2026-12-06T20:56:45.649Z", ...extra });

test("the summary: a handful of named fields, each one line, the full numbers one command away", () => {
  const s = benchmarkSummary(RESULT, { stack: "b8t4-w2048", takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "bench/out/b8t4-w2048.jsonl", versusPrevious: null });
  assert.deepEqual(s, {
    decodeTokensPerS: "179.2 (173.2-185.2) short, 171.3 (165.3-177.3) at 4096 tokens",
    outputTokensPerS: "150.2 at 1 concurrent, 540.3 at 4 concurrent",
    ttftMs: "69 short, 69 at 4096 tokens",
    acceptLength: 6.75,
    coding: "5/5 passed",
    warnings: [],
    versusPrevious: null,
    takenAt: "2026-12-06T20:57:28.463Z",
    fullNumbers: "npx pulumi stack output __benchmarkResult --json --stack b8t4-w2048",
    rawRecords: "bench/out/b8t4-w2048.jsonl",
  });
  // Pulumi shows a nested object over several lines: none here, so each field is one line,
  // and `npx pulumi stack output` (one line per output) stays short.
  assert.ok(Object.values(s).every((v) => v === null || typeof v !== "object" || (Array.isArray(v) && v.every((w) => typeof w === "string"))));
  assert.ok(JSON.stringify(s).length < 500, `${JSON.stringify(s).length} characters`);
  assert.equal(
    summaryLine(s),
    "decode tok/s 179.2 (173.2-185.2) short, 171.3 (165.3-177.3) at 4096 tokens; output tok/s 150.2 at 1 concurrent, 540.3 at 4 concurrent; TTFT ms 69 short, 69 at 4096 tokens; accept length 6.75; coding 5/5 passed",
  );
  // Without speculation, concurrency levels or the coding check; with warnings; an older format.
  const plain = benchmarkSummary(resultOf({ decode: 75, spread: 1, accept: null, coding: null, warnings: ["short: 1 request failed"] }), { stack: "baseline", takenAt: "2026-12-06T20:00:00.000Z", resultsPath: "bench/out/baseline.jsonl" });
  assert.deepEqual([plain.acceptLength, plain.outputTokensPerS, plain.coding, plain.warnings], [null, null, null, ["short: 1 request failed"]]);
  assert.equal(summaryLine(plain), "decode tok/s 75.0 (74.0-76.0) short; TTFT ms 69 short; 1 warning(s)");
  assert.equal(benchmarkSummary(formatOneResultOf({ decode: 170, spread: 2, long: { 8192: 150 } }), { stack: "old", takenAt: "2026-01-01T00:00:00.000Z", resultsPath: "bench/out/old.jsonl" }).decodeTokensPerS, "170.0 (168.0-172.0) short, 150.0 (148.0-152.0) at 8192 tokens");
});

test("against the previous run: the rule's verdict first, or why the two do not compare", () => {
  assert.equal(versusPrevious(run(), undefined), null, "a first run");
  const same = versusPrevious(run(), earlier())!;
  assert.equal(versusText(same), "inconclusive: 1.00x (0.83-1.20) the short-context decode tok/s of the previous run (2026-12-06 20:56 UTC, the same unit)");
  const faster = versusPrevious(run(resultOf({ decode: 200, spread: 1 })), earlier(resultOf({ decode: 150, spread: 1 }), { unitHash: "5f2aa7b49af0".padEnd(64, "0") }))!;
  assert.equal(versusText(faster), "faster: 1.33x (1.17-1.52) the short-context decode tok/s of the previous run (2026-12-06 20:56 UTC, unit 5f2aa7b49af0)");
  assert.match(versusText(versusPrevious(run(resultOf({ decode: 150, spread: 1 })), earlier(resultOf({ decode: 200, spread: 1 })))!), /^slower: 0\.75x /);
  const why = (now: RunOf, before: RunOf) => versusText(versusPrevious(now, before)!).replace(/^not compared with the previous run \([^)]*\): /, "");
  assert.equal(why(run(), earlier(RESULT, { configuration: { benchmark: "111111111111", benchmarkCode: "b835015fd5a3" } })), "it was measured under other benchmark settings");
  assert.equal(why(run(), earlier(RESULT, { configuration: { benchmark: "0c9ec840e591", benchmarkCode: "222222222222" } })), "it was measured by other benchmark code");
  assert.equal(why(run(), earlier(resultOf({ decode: 179.2, spread: 6, on: { host: "10.0.0.6" } }))), "it was measured on another host (10.0.0.6)");
  assert.equal(why(run(), earlier(resultOf({ decode: 179.2, spread: 6, on: { gpu: "NVIDIA H100 80GB HBM3" } }))), "it was measured on other GPUs (8 x NVIDIA H100 80GB HBM3)");
  assert.equal(why(run(), earlier(formatOneResultOf({ decode: 170, spread: 2 }))), "it was measured by the older benchmark format");
  // In the summary and its progress line.
  const s = benchmarkSummary(RESULT, { stack: "b8t4-w2048", takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "bench/out/b8t4-w2048.jsonl", versusPrevious: faster });
  assert.equal(s.versusPrevious, versusText(faster));
  assert.match(summaryLine(s, faster), /; faster against the previous run \(1\.33x\)$/);
  assert.match(summaryLine(s, same), /; inconclusive against the previous run \(1\.00x\)$/);
  // The benchmark's last progress line: the headline, and where the rest is.
  assert.equal(headline(RESULT, faster), "measured: decode tok/s 179.2 short, 171.3 at 4096 tokens; accept length 6.75; faster against the previous run (1.33x); the rest: stack output `benchmark`");
  assert.equal(headline(resultOf({ decode: 75, spread: 1, accept: null, warnings: ["w"] })), "measured: decode tok/s 75.0 short; 1 warning(s); the rest: stack output `benchmark`");
});

test("the stack outputs: the summary and the full numbers when a benchmark ran, every one null when none did (issue 63: benchmarkTakenAt named a time of no measurement)", () => {
  const measured = benchmarkStackOutputs("b8t4-w2048", { result: RESULT, takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "bench/out/b8t4-w2048.jsonl", versusPrevious: null });
  assert.equal(measured.result, RESULT);
  assert.equal(measured.takenAt, "2026-12-06T20:57:28.463Z");
  assert.equal(measured.resultsPath, "bench/out/b8t4-w2048.jsonl");
  assert.equal(measured.benchmark?.decodeTokensPerS, "179.2 (173.2-185.2) short, 171.3 (165.3-177.3) at 4096 tokens");
  const none = { benchmark: null, result: null, takenAt: null, resultsPath: null };
  // benchmark.enabled false, as this version stores it and as an earlier one did (a time, no result).
  assert.deepEqual(benchmarkStackOutputs("b8t4-w2048", { result: null, takenAt: null, resultsPath: "bench/out/b8t4-w2048.jsonl", versusPrevious: null }), none);
  assert.deepEqual(benchmarkStackOutputs("b8t4-w2048", { result: null, takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "bench/out/b8t4-w2048.jsonl" }), none);
  // A state of an earlier version has no comparison: the summary has none.
  assert.equal(benchmarkStackOutputs("b8t4-w2048", { result: RESULT, takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "p", versusPrevious: undefined }).benchmark?.versusPrevious, null);
});

test("readers find the full numbers in __benchmarkResult, or in `benchmark` of a state written before it", () => {
  assert.equal(FULL_RESULT_OUTPUT, "__benchmarkResult");
  const summary = benchmarkSummary(RESULT, { stack: "s", takenAt: "2026-12-06T20:57:28.463Z", resultsPath: "p" });
  assert.equal(storedResultOf({ benchmark: summary, __benchmarkResult: RESULT }), RESULT);
  assert.equal(storedResultOf({ benchmark: null, __benchmarkResult: null }), null);
  assert.equal(storedResultOf({ benchmark: RESULT }), RESULT, "an earlier version's outputs");
  assert.equal(storedResultOf({ benchmark: summary }), null, "a summary alone holds no numbers");
  assert.equal(storedResultOf({}), null);
  assert.equal(storedResultOfOutputs({ benchmark: { value: summary }, __benchmarkResult: { value: RESULT }, host: undefined }), RESULT);
});

test("progress never shows the host scripts' protocol lines: `@@result {...}` and the like are dropped, a message of nothing else is not logged", async () => {
  assert.equal(shownText("sglang-k26 (stack b8): started the new unit\n@@result {\"applied\":true}"), "sglang-k26 (stack b8): started the new unit");
  assert.equal(shownText("@@phase stopping\nstopped the old server\n@@stopped\n  (pid 4121)"), "stopped the old server\n  (pid 4121)");
  assert.equal(shownText("@@result {\"applied\":false}"), undefined);
  assert.equal(shownText("@@keeping\n\n@@taken"), undefined);
  assert.equal(shownText("a line that mentions @@result inside"), "a line that mentions @@result inside", "only lines that begin with @@");
  // What progress() writes when no engine listens (a test, a script): the same.
  const written: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
  try {
    await progress(undefined, "removed sglang-k26 of stack b8t4-w2048\n@@result {\"applied\":true}", false);
    await progress(undefined, "@@keeping");
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(written, ["removed sglang-k26 of stack b8t4-w2048\n"]);
});
