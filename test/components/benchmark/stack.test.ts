// Benchmark numbers as stack outputs, through the real engine on a simulated host, and
// the report over two stacks. What the terminal shows of them is a short summary (issue 63).
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { REPO_ROOT } from "../../../lib/pulumi-env";
import { collectRows } from "../../../scripts/report";
import { renderMarkdown, renderSvg } from "../../../components/benchmark/report";
import { choose } from "../../../components/verdict/choose";

const HOST = `bench-${process.pid}`;
// Stack names of this file's own: a stack's kept raw records are bench/out/<stack>.jsonl in the
// project folder, which other test files running at the same time (the sweep's, the review's)
// write for the repository's stack names.
const S8 = "bm-b8t4-w2048";
const S16 = "bm-b16t4-w2048";
let host: hosts.HostInfo;
let ws: SimWorkspace;
const SETTINGS = { runs: 2, warmupRuns: 1, maxTokens: 96, longContextTokens: [4096], concurrency: [1, 4], codingMaxTokens: 400 };
const config = (stack: string) => ({
  ...readRepoStackConfig(stack.replace(/^bm-/, "")),
  ...simHostConfig(host),
  "dflash-sglang:safety": { stableSeconds: 1 },
  "dflash-sglang:benchmark": SETTINGS,
});
const mainPid = async () => Number((await hosts.ssh(host, "systemctl show -p MainPID --value sglang-k26.service")).stdout.trim());

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({ [S8]: config(S8), [S16]: config(S16) });
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

/** Pure: the lines of one top-level entry of the Outputs section of an `up`'s display (none: []). */
function outputLines(stdout: string, name: string): string[] {
  const section = stdout.split("\nOutputs:\n")[1]?.split("\nResources:\n")[0] ?? "";
  const lines = section.split("\n");
  const start = lines.findIndex((l) => new RegExp(`^ {2}[ +~-] ${name} +:|^ {4}${name} +:`).test(l));
  if (start < 0) return [];
  const end = lines.findIndex((l, k) => k > start && /^ {2}[ +~-] \S|^ {4}\S/.test(l));
  return lines.slice(start, end < 0 ? undefined : end);
}

test("after up, the stack's outputs hold the numbers, when and for which config they were taken; the terminal a few lines of them", async () => {
  const up = await (await ws.stack(S8)).up();
  const b = up.outputs.__benchmarkResult.value;
  assert.equal(b.format, 2);
  assert.ok(b.short.decode_tokens_per_s > 100, JSON.stringify(b.short));
  assert.ok(b.short.decode_tokens_per_s_min <= b.short.decode_tokens_per_s && b.short.decode_tokens_per_s <= b.short.decode_tokens_per_s_max);
  // Where it was measured: the host, its GPUs, SGLang's version, the server's main PID.
  assert.equal(b.measured_on.host, host.address);
  assert.equal(b.measured_on.mainPid, await mainPid());
  assert.ok(b.measured_on.gpu && b.measured_on.gpuCount >= 1 && b.measured_on.sglangVersion, JSON.stringify(b.measured_on));
  assert.equal(up.outputs.acceptLength.value, b.short.accept_length, "the stack output acceptLength is the benchmark's");
  assert.equal(b.long[0].context_tokens, 4096);
  assert.deepEqual(b.concurrency.map((c: { concurrency: number; completed: number }) => [c.concurrency, c.completed]), [[1, 4], [4, 16]]);
  assert.ok(b.accept_length > 1);
  assert.equal(b.coding.passed, 5);
  assert.match(up.outputs.benchmarkTakenAt.value, /^\d{4}-\d\d-\d\dT/);
  assert.equal(up.outputs.configuration.value.budget, 8);
  // Relative to the project folder: state names nobody's checkout.
  assert.equal(up.outputs.benchmarkResultsPath.value, `bench/out/${S8}.jsonl`);
  const raw = fs.readFileSync(path.join(REPO_ROOT, up.outputs.benchmarkResultsPath.value), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(raw.filter((r: { ok: boolean }) => r.ok).length, b.completed);
  assert.ok(raw.every((r: { unit_hash: string }) => r.unit_hash === up.outputs.unitHash.value));
  // `benchmark`: the summary, with where the full numbers are.
  const summary = up.outputs.benchmark.value;
  assert.match(summary.decodeTokensPerS, new RegExp(`^${b.short.decode_tokens_per_s.toFixed(1)} \\([\\d.]+-[\\d.]+\\) short, [\\d.]+ \\([\\d.]+-[\\d.]+\\) at 4096 tokens$`));
  assert.equal(summary.acceptLength, b.accept_length);
  assert.equal(summary.coding, "5/5 passed");
  assert.equal(summary.versusPrevious, null, "a first run");
  assert.equal(summary.fullNumbers, `npx pulumi stack output __benchmarkResult --json --stack ${S8}`);
  assert.equal(summary.rawRecords, `bench/out/${S8}.jsonl`);
  // The terminal: the summary, a line per field (it was about 300 lines); not the full numbers.
  const shown = outputLines(up.stdout, "benchmark");
  assert.ok(shown.length >= 10 && shown.length <= 12, shown.join("\n"));
  assert.doesNotMatch(up.stdout, /__benchmarkResult\s*:|median_itl_ms/);
  // Its progress is the benchmark step's (it was the stack's), and its last line is a status,
  // not a diagnostic: in a log it shows once, not again under Diagnostics.
  assert.match(up.stdout, new RegExp(`pulumi-nodejs:dynamic:Resource benchmark-run creating \\(\\d+s\\) sglang-k26 \\(stack ${S8}\\) benchmark: calibrating`));
  assert.match(up.stdout, new RegExp(`benchmark-run creating \\(\\d+s\\) sglang-k26 \\(stack ${S8}\\) benchmark: measured: decode tok/s ${b.short.decode_tokens_per_s.toFixed(1)} short, [\\d.]+ at 4096 tokens; accept length ${b.accept_length}; the rest: stack output \`benchmark\`\n`));
  assert.doesNotMatch(up.stdout.split("\nDiagnostics:\n")[1] ?? "", / benchmark: /);
  // The restart step's row ends with its line for people, not the host script's `@@result {...}`
  // (a log still lists that line once, as @pulumi/command streams the step's stdout).
  assert.match(up.stdout, /sglang-restart created \([\d.]+s\) sglang-k26 \(stack [^)]+\): (no server ran before|old server)/);
});

/** /health's status on the host's server, or "refused". */
async function status(port: number, p: string, address: string): Promise<number | "refused"> {
  return fetch(`http://${address}:${port}${p}`).then((r) => r.status, () => "refused" as const);
}

/** Polls `probe` while `work` runs; the values it saw. */
async function watchWhile<T>(work: Promise<unknown>, probe: () => Promise<T | undefined>): Promise<T[]> {
  let done = false;
  const settled = work.finally(() => (done = true)).catch(() => undefined);
  const seen: T[] = [];
  while (!done) {
    const v = await probe();
    if (v !== undefined) seen.push(v);
  }
  await settled;
  return seen;
}

test("a no-op up does not re-run it; a new runId does, without restarting the server, holding the host while it measures", async () => {
  const stack = await ws.stack(S8);
  const before = (await stack.outputs()).benchmarkTakenAt.value;
  const pid = await mainPid();
  const noop = await stack.up();
  assert.equal(noop.outputs.benchmarkTakenAt.value, before);
  assert.deepEqual(noop.summary.resourceChanges, { same: 9 }, "every resource unchanged");
  ws.setStackConfig(S8, "benchmark", { ...SETTINGS, runId: "again" });
  const up = stack.up();
  // While it measures, the host's deployment lock is held and its note names the benchmark:
  // another stack's restart waits (script.ts lock()) rather than replacing the server under it.
  const notes = await watchWhile(up, async () => (await hosts.ssh(host, "flock -n /run/dflash-sglang/host.lock true || cat /run/dflash-sglang/host.lock.note")).stdout.trim() || undefined);
  const rerun = await up;
  assert.notEqual(rerun.outputs.benchmarkTakenAt.value, before);
  // Measured again: its verdict against the run before it, of the same unit.
  assert.match(rerun.outputs.benchmark.value.versusPrevious, new RegExp(`^(equal within [\\d.]+ %|inconclusive|faster|slower): [\\d.]+x \\([\\d.]+-[\\d.]+\\) the short-context decode tok/s of the previous run \\(${before.slice(0, 16).replace("T", " ")} UTC, the same unit\\)$`));
  assert.equal(await mainPid(), pid, "measuring again does not restart anything");
  assert.ok(notes.some((n) => /^benchmark of stack bm-b8t4-w2048 \(since \d{4}-/.test(n)), `lock notes seen: ${JSON.stringify([...new Set(notes)])}`);
});

test("a server restarted while it is measured: its numbers are not stored, and its raw records are kept apart", async () => {
  const stack = await ws.stack(S8);
  const before = (await stack.outputs()).benchmarkTakenAt.value;
  const kept = path.join(REPO_ROOT, `bench/out/${S8}.jsonl`);
  const good = fs.readFileSync(kept, "utf8");
  // This run's raw records: a file of its own beside the kept ones (bench/out/<stack>.jsonl.<time>-<pid>.partial).
  const partials = () => fs.readdirSync(path.dirname(kept)).filter((f) => f.startsWith(`${S8}.jsonl.`) && f.endsWith(".partial"));
  for (const f of partials()) fs.rmSync(path.join(path.dirname(kept), f), { force: true });
  const rawNow = () => {
    const found = partials();
    return found.length === 1 ? path.join(path.dirname(kept), found[0]) : undefined;
  };
  ws.setStackConfig(S8, "benchmark", { ...SETTINGS, runId: "restarted" });
  const up = stack.up();
  // Once this run's first records are written (past calibration), the server restarts under it.
  let restarted = false;
  await watchWhile(up, async () => {
    await new Promise((r) => setTimeout(r, 100));
    const raw = rawNow();
    if (restarted || !raw || fs.readFileSync(raw, "utf8").trim() === "") return undefined;
    await hosts.ssh(host, "systemctl restart sglang-k26.service");
    restarted = true;
    return undefined;
  });
  assert.ok(restarted);
  // Either the run ends and the check after it finds another main PID, or a phase fails on the
  // restart and the error says why: either way, the server changed and nothing is stored.
  const raw = rawNow();
  assert.ok(raw, `one file of raw records for this run: ${JSON.stringify(partials())}`);
  await assert.rejects(up, new RegExp(`the server changed while it was measured \\(main PID \\d+ -> \\d+.*Raw records: bench/out/${path.basename(raw).replace(/[.]/g, "\\.")}`, "s"));
  assert.equal((await stack.outputs()).benchmarkTakenAt.value, before, "the outputs keep the last good numbers");
  assert.equal(fs.readFileSync(kept, "utf8"), good, "and their raw records");
  const records = fs.readFileSync(raw, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  // Written as they came: this run's records up to its end. (Whether a request was cut depends
  // on timing: SGLang keeps admitting and finishing requests while it drains to stop.)
  assert.ok(records.length > 0 && records.every((r) => r.taken_at > before), "this run's records, kept beside the good ones");
  // Measured again on the server as it now runs (once it serves): the same configuration.
  const deadline = Date.now() + 60_000;
  while ((await status(host.sglangPort, "/health", host.address)) !== 200) {
    assert.ok(Date.now() < deadline, "the restarted server serves within a minute");
    await new Promise((r) => setTimeout(r, 250));
  }
  ws.setStackConfig(S8, "benchmark", { ...SETTINGS, runId: "after-restart" });
  assert.equal((await stack.up()).summary.result, "succeeded");
});

test("the report compares two stacks in a table and a chart", async () => {
  // The new server's health check lags 5 s behind serving, so systemd marks the unit active
  // late: readiness waits for "active" (a benchmark started before it found the unit
  // "activating" and refused to measure).
  hosts.fault(HOST, JSON.stringify({ healthGenerateLagSeconds: 5, match: { speculative_ddtree_budget: 16 } }));
  const up = await (await ws.stack(S16)).up();
  hosts.fault(HOST, "{}");
  assert.equal(up.summary.result, "succeeded");
  assert.match(up.stdout, /serving; waiting for systemd to mark sglang-k26\.service active \(activating\/start-post/);
  const rows = await collectRows(ws.dir, ws.env, "bm-*");
  assert.deepEqual(rows.map((r) => r.stack), [S16, S8]);
  const md = renderMarkdown(rows);
  // They tie (their speeds are close), or neither is best: without a baseline none is (the rule's tests pin which).
  const name = (stack: string) => String.raw`(\*\*)?${stack}(\*\* \(best\)| \(tie\))?`;
  assert.match(md, new RegExp(String.raw`\| ${name(S8)} \| DDTREE, budget 8, topk 4, window 2048, compact cache \| [\d.]+ \([\d.]+-[\d.]+\) \|.* \| ${host.address} \| `));
  assert.match(md, new RegExp(String.raw`\| ${name(S16)} \| DDTREE, budget 16, topk 4, window 2048, compact cache \| [\d.]+ \([\d.]+-[\d.]+\) \|`));
  const choice = choose(rows);
  assert.notEqual(choice.kind, "winner", "no baseline was measured: nothing shows either beats no speculation");
  assert.equal((md.match(/\(best\)/g) ?? []).length, 0, md);
  assert.equal((md.match(/\(tie\)/g) ?? []).length, choice.kind === "tie" ? 2 : 0, md);
  const svg = renderSvg(rows);
  assert.equal((svg.match(/<\/title><\/rect>/g) ?? []).length, 2 * 4, "a bar per stack for short and long context, acceptance length and coding");
  assert.deepEqual((await collectRows(ws.dir, ws.env, "bm-b16*")).map((r) => r.stack), [S16], "a subset");
});

test("after a destroy, the report still shows the stack's last numbers, marked destroyed, and every run of a stack measured more than once", async () => {
  const measured = (await (await ws.stack(S16)).outputs()).__benchmarkResult.value.short.decode_tokens_per_s;
  const destroy = await (await ws.stack(S16)).destroy();
  assert.equal(destroy.summary.result, "succeeded");
  const rows = await collectRows(ws.dir, ws.env, "bm-*");
  const b16 = rows.find((r) => r.stack === S16)!;
  assert.equal(b16.status, "destroyed");
  assert.equal((b16.result?.short as { decode_tokens_per_s?: number }).decode_tokens_per_s, measured, "its last numbers, kept in bench/history");
  assert.equal(b16.configuration.budget, 16);
  const b8 = rows.find((r) => r.stack === S8)!;
  assert.equal(b8.status, "deployed");
  assert.equal(b8.runs?.length, 3, "measured three times (the runId tests; the run cut by a restart is not kept)");
  const md = renderMarkdown(rows);
  assert.match(md, /\| (\*\*)?bm-b16t4-w2048(\*\* \(best\)| \(tie\))? \(destroyed\) \|.* \| \d{4}-\d\d-\d\d \d\d:\d\d \|\n/);
  assert.match(md, /### Every run of the stacks measured more than once/);
});

test("with the benchmark turned off, no output names a measurement that never happened (issue 63)", async () => {
  ws.setStackConfig(S8, "benchmark", { ...SETTINGS, enabled: false });
  const up = await (await ws.stack(S8)).up();
  assert.equal(up.summary.result, "succeeded");
  for (const name of ["benchmark", "__benchmarkResult", "benchmarkTakenAt", "benchmarkResultsPath", "acceptLength"]) assert.equal(up.outputs[name].value, null, name);
});

