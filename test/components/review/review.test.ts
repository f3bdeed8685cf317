// The review of a change and the apply of what was reviewed, end to end: a git repository made
// for the test (the workspace's Pulumi.yaml and stack files, a base commit and change commits),
// the real engine with update plans, and a simulated host.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { ReviewMoved, runApply, runReview } from "../../../components/review/review";
import { secretForms } from "../../../lib/secret-forms";

const HOST = `review-${process.pid}`;
const A = "b8t4-w2048";
const B = "b16t4-w2048";
const KEYS = ["sk-review-first-0123456789", "sk-review-second-9876543210"];
let host: hosts.HostInfo;
let ws: SimWorkspace;
let plans: string;
const BENCH = { runs: 1, warmupRuns: 0, maxTokens: 16, longContextTokens: [], concurrency: [1], coding: false };
const config = (stack: string) => ({ ...readRepoStackConfig(stack), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": BENCH });
const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@example.invalid", ...args], { cwd: ws.dir, encoding: "utf8" });
const commit = (message: string) => git("commit", "-qam", message);
const liveUnit = async () => (await hosts.ssh(host, "cat /etc/systemd/system/sglang-k26.service")).stdout;
const stackOfUnit = async () => /^X-DFlash-Stack=(.*)$/m.exec(await liveUnit())?.[1];
const review = () => runReview({ dir: ws.dir, env: ws.env, base: "HEAD~1", plansDir: plans });
const apply = () => runApply({ dir: ws.dir, env: ws.env, plansDir: plans });
const setSpeculative = (stack: string, budget: number) => ws.setStackConfig(stack, "speculative", { algorithm: "DDTREE", budget, topk: 4, draftWindowSize: 2048, compactCache: true });

/** Every file a review writes, and its document: none may hold a secret in any encoding. */
function assertNoSecrets(markdown: string): void {
  const texts = [markdown, ...fs.readdirSync(plans).map((f) => fs.readFileSync(path.join(plans, f), "utf8"))];
  const key = fs.readFileSync(host.privateKeyPath, "utf8").split("\n").filter((l) => l && !l.startsWith("-----")).join("");
  for (const text of texts) {
    for (const secret of [...KEYS, key.slice(0, 40)]) assert.deepEqual(secretForms(text, secret), [], `a secret is in a review file: ${secret.slice(0, 8)}...`);
  }
}

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 1, warmupSeconds: 0.2 } });
  ws = simWorkspace({ [A]: config(A), [B]: config(B) });
  plans = path.join(ws.dir, "plans");
  await (await ws.stack(B)).setConfig("dflash-sglang:apiKey", { value: KEYS[0], secret: true });
  fs.writeFileSync(path.join(ws.dir, ".gitignore"), "state/\nengine/\nplans/\n");
  execFileSync("git", ["init", "-q", "-b", "main"], { cwd: ws.dir });
  git("add", "-A");
  commit("base");
  await (await ws.stack(B)).up();
  await (await ws.stack(A)).up();
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("a change of one stack file reviews that stack only; apply runs exactly it", async () => {
  setSpeculative(B, 32);
  commit("B: budget 32");
  const r = await review();
  assert.deepEqual(r.record.stacks.map((s) => s.stack), [B]);
  const s = r.document.stacks[0];
  assert.equal(s.effect, "restart");
  assert.deepEqual(s.changes.map((c) => c.words), ["budget 16 -> 32"]);
  assert.ok(s.warnings.some((w) => w.includes(`stack ${A}'s unit`)), s.warnings.join("; "));
  assert.match(r.markdown, /\| `b16t4-w2048` \| 127\.0\.0\.\d+ \| budget 16 -> 32 \| \*\*restart\*\* \(host serves `b8t4-w2048`\) \| ~[\d.]+ s \([^|]*by traffic\) \|/);
  assert.match(r.markdown, /-\s+--speculative-ddtree-budget 8 \\\n\s+\+\s+--speculative-ddtree-budget 32/, "the unit lines that change against the live unit (stack A's)");
  assertNoSecrets(r.markdown);
  assert.deepEqual(await apply(), [{ stack: B, result: "applied" }]);
  assert.equal(await stackOfUnit(), B);
  assert.match(await liveUnit(), /--speculative-ddtree-budget 32/);
});

test("a secret rotation restarts, and neither the document nor the plans hold the secret", async () => {
  await (await ws.stack(B)).setConfig("dflash-sglang:apiKey", { value: KEYS[1], secret: true });
  commit("B: rotate apiKey");
  const r = await review();
  assert.deepEqual(r.document.stacks.map((s) => [s.stack, s.effect, s.changes.map((c) => c.words)]), [[B, "restart", ["apiKey rotated"]]]);
  assertNoSecrets(r.markdown);
  // Not applied (test 1 applied a stack with a secret): the change is reverted instead.
  git("revert", "--no-edit", "HEAD");
});

test("a change of benchmark settings only re-runs the benchmark; after another up moved the host, apply refuses and changes nothing", async () => {
  ws.setStackConfig(B, "benchmark", { ...BENCH, runId: "2" });
  commit("B: measure again");
  const r = await review();
  assert.equal(r.document.stacks[0].effect, "benchmark only");
  assert.match(r.markdown, /\| `b16t4-w2048` \| [^|]+ \| benchmark\.runId none -> 2 \| no \(benchmark only\) \| none \|/);
  await (await ws.stack(A)).up();
  const unit = await liveUnit();
  const stateBefore = JSON.stringify(await (await ws.stack(B)).exportStack());
  await assert.rejects(apply(), (e: Error) => e instanceof ReviewMoved && /nothing was changed/.test(e.message) && /what its host runs changed since the review/.test(e.message));
  assert.equal(await liveUnit(), unit, "the host was not touched");
  assert.equal(JSON.stringify(await (await ws.stack(B)).exportStack()), stateBefore, "the stack's state was not touched");
});

test("after the stack file changed since the review, apply refuses and changes nothing", async () => {
  await review();
  ws.setStackConfig(B, "benchmark", { ...BENCH, runId: "3" });
  const unit = await liveUnit();
  await assert.rejects(apply(), (e: Error) => e instanceof ReviewMoved && /its configuration changed since the review/.test(e.message));
  assert.equal(await liveUnit(), unit);
  git("checkout", "--", ".");
});

test("two stacks of one host change: the stack serving goes last, and the host ends serving it", async () => {
  await (await ws.stack(B)).up();
  setSpeculative(A, 4);
  ws.setStackConfig(B, "benchmark", { ...BENCH, runId: "4" });
  commit("A: budget 4; B: measure again");
  const r = await review();
  // A restarts (its host serves B); B's own change restarts nothing, but its `up` after A's finds
  // A's unit there and restarts: it is applied last, so the host ends serving B again.
  assert.deepEqual(r.record.stacks.map((s) => [s.stack, s.effect]), [[A, "restart"], [B, "restart"]]);
  assert.match(r.markdown, /\| `b16t4-w2048` \| [^|]+ \| benchmark\.runId 2 -> 4 \| \*\*restart\*\* \(after `b8t4-w2048` takes the host\) \| ~[\d.]+ s \([^|]*by traffic\) \| 2 of 2 on this host \|/);
  assert.deepEqual(await apply(), [{ stack: A, result: "applied" }, { stack: B, result: "applied" }]);
  assert.equal(await stackOfUnit(), B);
});

// Issue 36: a change of Pulumi.yaml (or the program) used to plan a restart of every stack of a
// shared host that ended where it started, and to install stacks never deployed.
test("a change of Pulumi.yaml alone: a stack whose own unit does not change is not put back on its host, and a stack never deployed is not installed", async () => {
  const fresh = "review-new";
  await (await ws.stack(B)).up();
  // A stack file merged earlier and never deployed (its own change was another review's).
  fs.copyFileSync(path.join(ws.dir, "stacks", `Pulumi.${A}.yaml`), path.join(ws.dir, "stacks", `Pulumi.${fresh}.yaml`));
  git("add", "-A");
  commit("a stack file, never deployed");
  fs.appendFileSync(path.join(ws.dir, "Pulumi.yaml"), "# a comment only\n");
  commit("Pulumi.yaml: a comment");
  const unit = await liveUnit();
  const r = await review();
  assert.deepEqual(r.record.stacks.map((s) => [s.stack, s.effect, s.plan]), [[A, "no change", null], [B, "no change", B + ".plan.json"]]);
  assert.deepEqual(r.document.notDeployed, [fresh]);
  assert.ok(r.document.stacks[0].warnings.some((w) => w.includes(`its own unit and inputs do not change, and its host serves stack ${B}`)), r.document.stacks[0].warnings.join("; "));
  assert.match(r.markdown, /Not deployed, so not reviewed: `review-new`\. A change of Pulumi\.yaml or the program installs nothing/);
  assert.match(r.markdown, /## Stack review: 2 stacks, 0 restarts/);
  assert.deepEqual(await apply(), [{ stack: A, result: "nothing to apply" }, { stack: B, result: "nothing to apply" }]);
  assert.equal(await liveUnit(), unit, "the host still serves what it served");
  assert.ok(!fs.existsSync(path.join(plans, `${fresh}.plan.json`)));
  fs.rmSync(path.join(ws.dir, "stacks", `Pulumi.${fresh}.yaml`));
  git("add", "-A");
  commit("the stack file never deployed, removed");
});

test("a no-op: a stack named for review whose up would change nothing", async () => {
  fs.writeFileSync(path.join(ws.dir, "NOTES.md"), "not a stack\n");
  git("add", "NOTES.md");
  commit("notes");
  const r = await runReview({ dir: ws.dir, env: ws.env, base: "HEAD~1", plansDir: plans, named: (s) => s === B });
  assert.deepEqual(r.record.stacks.map((s) => [s.stack, s.effect]), [[B, "no change"]]);
  assert.match(r.markdown, /\| `b16t4-w2048` \| [^|]+ \| no setting \| no \| none \|/);
  assert.deepEqual(await apply(), [{ stack: B, result: "nothing to apply" }]);
});

// Issue 36, the trust boundary: the workflow reviews and applies a pull request from main's
// checkout (`--pr`), which takes only its configuration (components/review/pull-request.ts).
test("a pull request from main's checkout: its stack change is previewed by main's program; a change of the program is listed, never run, and not applied before merge", async () => {
  const mainHead = git("rev-parse", "HEAD").trim();
  const branch = (name: string, from: string, edit: () => void) => {
    git("checkout", "-q", "-b", name, from);
    edit();
    git("add", "-A");
    commit(name);
    const sha = git("rev-parse", "HEAD").trim();
    git("checkout", "-q", "main");
    return sha;
  };
  const withTool = branch("pr-program", mainHead, () => {
    setSpeculative(B, 24);
    fs.mkdirSync(path.join(ws.dir, "components", "review"), { recursive: true });
    fs.writeFileSync(path.join(ws.dir, "components", "review", "render.ts"), "export const verdict = 'LGTM, whatever the change';\n");
  });
  const r = await runReview({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: withTool });
  assert.deepEqual(r.record.programChanges, ["components/review/render.ts"]);
  assert.equal(r.record.head, withTool);
  assert.deepEqual(r.document.stacks.map((s) => [s.stack, s.effect]), [[B, "restart"]]);
  assert.match(r.document.stacks[0].changes.map((c) => c.words).join("; "), /^budget \d+ -> 24$/);
  assert.match(r.markdown, /> \[!CAUTION\]\n> This pull request changes the program \(`components\/review\/render\.ts`\)\. Nothing of it ran here/);
  assert.ok(!fs.existsSync(path.join(ws.dir, "components")), "the pull request's file never reached the checkout");
  assertNoSecrets(r.markdown);
  const unit = await liveUnit();
  await assert.rejects(runApply({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: withTool, digest: r.digest }), (e: Error) => e instanceof ReviewMoved && /changes the program \(components\/review\/render\.ts\): it is applied only after merge/.test(e.message));
  assert.equal(await liveUnit(), unit, "nothing changed on the host");
  git("checkout", "--", ".");
  // Configuration only: reviewed, then applied as the approved commit, from main's checkout.
  const configOnly = branch("pr-config", mainHead, () => setSpeculative(B, 24));
  const r2 = await runReview({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: configOnly });
  assert.deepEqual(r2.record.programChanges, []);
  assert.match(r2.markdown, /Reviewed by the base branch's program \(`[0-9a-f]{12}`\) on the pull request's configuration, which is all it changes\./);
  await assert.rejects(runApply({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: withTool, digest: r2.digest }), (e: Error) => e instanceof ReviewMoved && /not of the commit to apply/.test(e.message));
  // The words approved are the ones beside the plans, bound by the digest they end with (issue 58).
  assert.ok(r2.markdown.endsWith(`\nReview digest: \`${r2.digest}\`\n`));
  assert.equal(fs.readFileSync(path.join(plans, "review.md"), "utf8"), r2.markdown);
  assert.equal(fs.readFileSync(path.join(plans, "digest"), "utf8"), `${r2.digest}\n`);
  await assert.rejects(runApply({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: configOnly, digest: r.digest }), (e: Error) => e instanceof ReviewMoved && /is not the one approved/.test(e.message));
  assert.deepEqual(await runApply({ dir: ws.dir, env: ws.env, plansDir: plans, pullRequest: configOnly, digest: r2.digest }), [{ stack: B, result: "applied" }]);
  assert.match(await liveUnit(), /--speculative-ddtree-budget 24/);
  assert.equal(git("rev-parse", "HEAD").trim(), mainHead, "the checkout stayed on main");
  git("checkout", "--", ".");
});
