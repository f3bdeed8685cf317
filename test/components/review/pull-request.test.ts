// The trust boundary (issue 36): a pull request's author is not trusted. Its review and its
// apply run in a checkout of the base branch, which takes only the pull request's configuration,
// read with git, and never runs its files. Tested against a git repository made for the test: a
// base commit, and pull requests that edit the review tool itself.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { AmbiguousYaml } from "../../../components/review/one-reader";
import { projectWithoutConfig, pullRequestInputs } from "../../../components/review/pull-request";
import { programFingerprint, ReviewMoved, runApply } from "../../../components/review/review";
import { digestOf, RECORD_FILE, REVIEW_FORMAT, ReviewRecord, sha256, withDigest, WORDS_FILE } from "../../../components/review/record";

let root: string;
/** The repository the pull requests are pushed to (bare), and a fresh checkout of main per test. */
let origin: string;
let n = 0;

const git = (dir: string, ...args: string[]) => execFileSync("git", args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
const write = (dir: string, file: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
  fs.writeFileSync(path.join(dir, file), text);
};
const read = (dir: string, file: string) => fs.readFileSync(path.join(dir, file), "utf8");

const PROJECT = "name: dflash-sglang\nruntime: nodejs\nstackConfigDir: stacks\nconfig:\n  dflash-sglang:timeouts:\n    value:\n      drainSeconds: 30\n";
const REVIEW_TOOL = "export const review = () => 'the maintainers\\' review';\n";

/** A clone of origin's main, as the workflow's trusted checkout is. */
function trustedCheckout(): string {
  const dir = path.join(root, `trusted-${++n}`);
  execFileSync("git", ["clone", "--quiet", origin, dir]);
  return dir;
}

/** A pull request branch off main: `edit` changes a working copy, which is committed and pushed; returns its commit. */
function pullRequest(name: string, edit: (dir: string) => void): string {
  const dir = path.join(root, `author-${name}`);
  execFileSync("git", ["clone", "--quiet", origin, dir]);
  git(dir, "checkout", "--quiet", "-b", name);
  edit(dir);
  git(dir, "add", "-A");
  git(dir, "-c", "user.email=author@example.invalid", "-c", "user.name=author", "commit", "--quiet", "-m", name);
  git(dir, "push", "--quiet", "origin", name);
  return git(dir, "rev-parse", "HEAD");
}

/** The trusted checkout fetches the pull request's head, as the workflow does (never checks it out). */
function fetched(dir: string, branch: string): void {
  git(dir, "fetch", "--quiet", "origin", branch);
}

before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-pr-"));
  origin = path.join(root, "origin.git");
  execFileSync("git", ["init", "--quiet", "--bare", "--initial-branch=main", origin]);
  const seed = path.join(root, "seed");
  execFileSync("git", ["clone", "--quiet", origin, seed], { stdio: "ignore" });
  git(seed, "checkout", "--quiet", "-b", "main");
  write(seed, "Pulumi.yaml", PROJECT);
  write(seed, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 8\n");
  write(seed, "stacks/Pulumi.gone.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 4\n");
  write(seed, "components/review/render.ts", REVIEW_TOOL);
  write(seed, "index.ts", "export {};\n");
  git(seed, "add", "-A");
  git(seed, "-c", "user.email=m@example.invalid", "-c", "user.name=maintainer", "commit", "--quiet", "-m", "base");
  git(seed, "push", "--quiet", "origin", "main");
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

test("a pull request that edits the review tool and a stack: only the stack reaches the trusted checkout, and the tool's edit is listed as program", () => {
  const head = pullRequest("edits-the-tool", (d) => {
    write(d, "components/review/render.ts", "export const review = () => 'LGTM, whatever the change';\n");
    write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 16\n");
    write(d, "stacks/Pulumi.b.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 12\n");
    fs.rmSync(path.join(d, "stacks/Pulumi.gone.yaml"));
  });
  const dir = trustedCheckout();
  fetched(dir, "edits-the-tool");
  const before = programFingerprint(dir, "stacks", path.join(dir, ".review"));
  const pr = pullRequestInputs(dir, head);
  assert.equal(pr.head, head);
  assert.equal(pr.base, git(dir, "rev-parse", "HEAD"));
  assert.deepEqual(pr.program, ["components/review/render.ts"]);
  assert.deepEqual(pr.config, ["stacks/Pulumi.a.yaml", "stacks/Pulumi.b.yaml", "stacks/Pulumi.gone.yaml"]);
  // What runs is the base's: the tool's file, and the program's fingerprint that apply checks.
  assert.equal(read(dir, "components/review/render.ts"), REVIEW_TOOL);
  assert.equal(programFingerprint(dir, "stacks", path.join(dir, ".review")), before);
  assert.equal(git(dir, "rev-parse", "HEAD"), pr.base, "the pull request is never checked out");
  // What it configures is the pull request's.
  assert.match(read(dir, "stacks/Pulumi.a.yaml"), /budget: 16/);
  assert.match(read(dir, "stacks/Pulumi.b.yaml"), /budget: 12/);
  assert.ok(!fs.existsSync(path.join(dir, "stacks/Pulumi.gone.yaml")), "a stack file it removes is removed");
});

test("Pulumi.yaml: a change of its config is configuration; any other change (runtime options, main) is the program, and the base's stays", () => {
  const configOnly = pullRequest("project-config", (d) => write(d, "Pulumi.yaml", PROJECT.replace("drainSeconds: 30", "drainSeconds: 60")));
  const runtime = pullRequest("project-runtime", (d) => write(d, "Pulumi.yaml", PROJECT.replace("runtime: nodejs", "runtime:\n  name: nodejs\n  options:\n    nodeargs: --require ./stacks/Pulumi.a.yaml")));
  const a = trustedCheckout();
  fetched(a, "project-config");
  assert.deepEqual(pullRequestInputs(a, configOnly).config, ["Pulumi.yaml"]);
  assert.match(read(a, "Pulumi.yaml"), /drainSeconds: 60/);
  const b = trustedCheckout();
  fetched(b, "project-runtime");
  const pr = pullRequestInputs(b, runtime);
  assert.deepEqual(pr.program, ["Pulumi.yaml"]);
  assert.deepEqual(pr.config, []);
  assert.equal(read(b, "Pulumi.yaml"), PROJECT);
  assert.equal(projectWithoutConfig(PROJECT), projectWithoutConfig(PROJECT.replace("drainSeconds: 30", "drainSeconds: 60")));
});

test("a stack file the pull request makes a symbolic link is read as the link's text, never followed: not configuration, so refused", () => {
  const head = pullRequest("symlink", (d) => {
    fs.rmSync(path.join(d, "stacks/Pulumi.a.yaml"));
    fs.symlinkSync("/etc/shadow", path.join(d, "stacks/Pulumi.a.yaml"));
  });
  const dir = trustedCheckout();
  fetched(dir, "symlink");
  // The link's text, "/etc/shadow" (no line break), is what the review reads: never the file it names.
  assert.throws(() => pullRequestInputs(dir, head), /stacks\/Pulumi\.a\.yaml of the pull request \([0-9a-f]{12}\):1:12: the file does not end with a line break/);
  assert.ok(!fs.lstatSync(path.join(dir, "stacks/Pulumi.a.yaml")).isSymbolicLink());
  assert.match(read(dir, "stacks/Pulumi.a.yaml"), /budget: 8/, "nothing written");
});

test("a branch behind its base is refused, and nothing is written", () => {
  const head = pullRequest("behind", (d) => write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 16\n"));
  // main moves on after the branch left it (another pull request merged).
  const m = path.join(root, "merger");
  execFileSync("git", ["clone", "--quiet", origin, m]);
  write(m, "stacks/Pulumi.c.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 4\n");
  git(m, "add", "-A");
  git(m, "-c", "user.email=m@example.invalid", "-c", "user.name=maintainer", "commit", "--quiet", "-m", "another merge");
  git(m, "push", "--quiet", "origin", "main");
  const dir = trustedCheckout();
  fetched(dir, "behind");
  assert.throws(() => pullRequestInputs(dir, head), /is behind its base .*: the base has commits it lacks, which applying it would revert\. Merge or rebase the base branch into it/);
  assert.match(read(dir, "stacks/Pulumi.a.yaml"), /budget: 8/, "nothing written");
  assert.equal(git(dir, "status", "--porcelain"), "");
});

test("a checkout with changes of its own, or a commit it does not have, is refused", () => {
  const head = pullRequest("dirty", (d) => write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 16\n"));
  const dir = trustedCheckout();
  assert.throws(() => pullRequestInputs(dir, "0123456789abcdef0123456789abcdef01234567"), /names no commit of the git repository .*git fetch origin pull\/N\/head/);
  fetched(dir, "dirty");
  write(dir, "components/review/render.ts", "export const review = () => 'edited here';\n");
  assert.throws(() => pullRequestInputs(dir, head), /has changes of its own \(components\/review\/render\.ts\); --pr reviews and applies a pull request only from a clean checkout of its base branch/);
  git(dir, "checkout", "--", ".");
  // Its own configuration written already (a review, then an apply in the same checkout) is no change of the checkout's.
  pullRequestInputs(dir, head);
  assert.doesNotThrow(() => pullRequestInputs(dir, head));
});

test("apply: a pull request's review is applied only with --pr, only as the reviewed commit, and never when it changes the program", async () => {
  const head = pullRequest("apply-program", (d) => {
    write(d, "components/review/render.ts", "export const review = () => 'changed';\n");
    write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 16\n");
  });
  const other = pullRequest("apply-config", (d) => write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 12\n"));
  const dir = trustedCheckout();
  fetched(dir, "apply-program");
  fetched(dir, "apply-config");
  const plans = path.join(root, `plans-${++n}`);
  fs.mkdirSync(plans);
  // A review's record and words, as the review run wrote them; apply gets their digest.
  let digest = "";
  const record = (r: Partial<ReviewRecord>) => {
    const text = JSON.stringify({ format: REVIEW_FORMAT, base: "b", head, program: "p", createdAt: "t", stacks: [], document: sha256("words\n"), ...r });
    fs.writeFileSync(path.join(plans, RECORD_FILE), text);
    digest = digestOf(text);
    fs.writeFileSync(path.join(plans, WORDS_FILE), withDigest("words\n", digest));
  };
  const apply = (pullRequest?: string) => runApply({ dir, env: {}, plansDir: plans, pullRequest, ...(pullRequest ? { digest } : {}) });
  const refused = (re: RegExp) => (e: Error) => e instanceof ReviewMoved && re.test(e.message) && /nothing was changed/.test(e.message);
  record({ programChanges: ["components/review/render.ts"] });
  await assert.rejects(apply(), refused(/this review is of a pull request .*apply it with --pr/));
  await assert.rejects(runApply({ dir, env: {}, plansDir: plans, pullRequest: head }), refused(/a pull request is applied only with --digest/));
  await assert.rejects(apply(head), refused(/changes the program \(components\/review\/render\.ts\): it is applied only after merge/));
  await assert.rejects(apply(other), refused(/is of [0-9a-f]{12}, not of the commit to apply/));
  record({ head: other });
  await assert.rejects(apply(other), refused(/\(a checkout, not a pull request\)/), "a checkout's review is not a pull request's");
  assert.equal(read(dir, "components/review/render.ts"), REVIEW_TOOL, "the tool the apply ran is the base's");
});

// Issue 58: what the engine reads is what the review decides on. Each trick below was read by
// the review's own YAML reader as configuration only (a comment, 600, no merge), while Pulumi's
// reader saw a program setting, a hidden host, 384 or a merge; now each is refused before
// anything of the pull request is written into the trusted checkout.
const HIDDEN: [string, string, string, number, RegExp][] = [
  ...[
    ["CR", "\r"],
    ["NEL", "\u0085"],
    ["U+2028", "\u2028"],
    ["U+2029", "\u2029"],
  ].flatMap(([name, ch]): [string, string, string, number, RegExp][] => [
    [`a ${name} in Pulumi.yaml's config comment hides \`nodeargs\``, "Pulumi.yaml", `${PROJECT}  # tuning note${ch}runtime: {name: nodejs, options: {nodeargs: "--import=data:text/javascript,process.exit(7)"}}\n`, 8, new RegExp(name === "CR" ? "carriage return" : name.replace("+", "\\+"))],
    [`a ${name} in a stack file's comment hides a host`, "stacks/Pulumi.a.yaml", `config:\n  dflash-sglang:speculative:\n    budget: 16 # same host${ch}  dflash-sglang:host: {address: 10.6.6.6}\n`, 3, new RegExp(name === "CR" ? "carriage return" : name.replace("+", "\\+"))],
  ]),
  ["an octal drain (384 to Pulumi)", "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:timeouts:\n    drainSeconds: 0600\n", 3, /"0600" is a number/],
  ["a merge key", "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:timeouts:\n    <<: {drainSeconds: 1}\n", 3, /merge key/],
  ["an anchor", "Pulumi.yaml", `${PROJECT}  dflash-sglang:safety: &s {stableSeconds: 1}\n`, 8, /anchor/],
];

for (const [what, file, text, line, reason] of HIDDEN) {
  test(`refused, nothing written: ${what}`, () => {
    const branch = `hidden-${++n}`;
    const head = pullRequest(branch, (d) => write(d, file, text));
    const dir = trustedCheckout();
    fetched(dir, branch);
    const before = read(dir, file);
    assert.throws(
      () => pullRequestInputs(dir, head),
      (e: Error) => e instanceof AmbiguousYaml && e.line === line && e.file.startsWith(`${file} of the pull request`) && reason.test(e.message) && /nothing was previewed or changed$/.test(e.message),
    );
    assert.equal(read(dir, file), before, "the trusted checkout keeps the base's file");
    assert.equal(git(dir, "status", "--porcelain"), "");
  });
}

test("Pulumi.yaml: any byte changed outside its config entry (a comment too) is a program change", () => {
  const head = pullRequest("project-comment", (d) => write(d, "Pulumi.yaml", PROJECT.replace("runtime: nodejs", "runtime: nodejs # a comment")));
  const dir = trustedCheckout();
  fetched(dir, "project-comment");
  const pr = pullRequestInputs(dir, head);
  assert.deepEqual([pr.program, pr.config], [["Pulumi.yaml"], []]);
  assert.equal(read(dir, "Pulumi.yaml"), PROJECT);
});

test("apply --digest: only the review whose words were approved, with those words beside it; anything else is refused before any check of hosts", async () => {
  const head = pullRequest("digest", (d) => {
    write(d, "components/review/render.ts", "export const review = () => 'changed';\n");
    write(d, "stacks/Pulumi.a.yaml", "config:\n  dflash-sglang:speculative:\n    budget: 16\n");
  });
  const dir = trustedCheckout();
  fetched(dir, "digest");
  const plans = path.join(root, `plans-${++n}`);
  fs.mkdirSync(plans);
  const words = "<!-- dflash-sglang review -->\n| stack | ... |\n";
  const recordText = JSON.stringify({ format: REVIEW_FORMAT, base: "b", head, program: "p", createdAt: "t", stacks: [], programChanges: ["components/review/render.ts"], document: sha256(words) });
  fs.writeFileSync(path.join(plans, RECORD_FILE), recordText);
  const digest = digestOf(recordText);
  fs.writeFileSync(path.join(plans, WORDS_FILE), withDigest(words, digest));
  const apply = (d: string) => runApply({ dir, env: {}, plansDir: plans, pullRequest: head, digest: d });
  const refused = (re: RegExp) => (e: Error) => e instanceof ReviewMoved && re.test(e.message) && /nothing was changed/.test(e.message);
  await assert.rejects(apply("abc"), refused(/is not a review's digest \(sha256:<64 hex>/));
  await assert.rejects(apply(`sha256:${"0".repeat(64)}`), refused(new RegExp(`its digest is ${digest}, the approved words name sha256:0{64}`)));
  // The words beside the plans are the record's, ending with its digest: edited, missing, or of another digest, refused.
  fs.writeFileSync(path.join(plans, WORDS_FILE), withDigest(words.replace("stack", "LGTM"), digest));
  await assert.rejects(apply(digest), refused(/review\.md is not the review's words/));
  fs.writeFileSync(path.join(plans, WORDS_FILE), words);
  await assert.rejects(apply(digest), refused(/review\.md is not the review's words/));
  fs.rmSync(path.join(plans, WORDS_FILE));
  await assert.rejects(apply(digest), refused(/review\.md is missing/));
  // The approved review, whole: past the digest, apply's own checks go on (here: a program change waits for merge).
  fs.writeFileSync(path.join(plans, WORDS_FILE), withDigest(words, digest));
  await assert.rejects(apply(digest), refused(/changes the program \(components\/review\/render\.ts\): it is applied only after merge/));
});

test("a stack file's keys besides config (how its secrets are kept) are not the pull request's to change; Pulumi's own reading of a key named twice is refused", () => {
  const provider = pullRequest("secrets-provider", (d) => write(d, "stacks/Pulumi.a.yaml", "secretsprovider: awskms://alias/theirs\nconfig:\n  dflash-sglang:speculative:\n    budget: 16\n"));
  const dir = trustedCheckout();
  fetched(dir, "secrets-provider");
  assert.throws(() => pullRequestInputs(dir, provider), /stacks\/Pulumi\.a\.yaml of the pull request \([0-9a-f]{12}\) changes secretsprovider: a pull request changes a stack's settings \(its `config`\) only/);
  assert.match(read(dir, "stacks/Pulumi.a.yaml"), /budget: 8/, "nothing written");
  // The host named twice in Pulumi.yaml, with and without the namespace: Pulumi keeps one, not the review's.
  const twice = pullRequest("host-twice", (d) => write(d, "Pulumi.yaml", `${PROJECT}  dflash-sglang:host:\n    value: {address: 10.6.6.6}\n  host:\n    value: {address: 10.0.0.5}\n`));
  const other = trustedCheckout();
  fetched(other, "host-twice");
  assert.throws(() => pullRequestInputs(other, twice), (e: Error) => e instanceof AmbiguousYaml && /"dflash-sglang:host" and "host" name the same setting/.test(e.message));
  assert.equal(read(other, "Pulumi.yaml"), PROJECT);
});
