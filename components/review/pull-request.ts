// A pull request's author is not trusted. `review --pr REF` and `apply --pr REF` run in a
// checkout of the base branch (the tool and program a maintainer already merged), and take
// from the pull request only its configuration, as data read with git (never checked out,
// never run): its stack files, and Pulumi.yaml when nothing but its `config` changed. Any other
// file the pull request changes is a change of the program: it is listed, reviewed as code,
// and applied only after merge, from the base branch. A branch behind its base is refused:
// applied, it would revert the base's later commits.
// What is configuration is decided on the bytes both readers agree on (one-reader.ts): a
// configuration file the engine could read otherwise is refused before anything is written or
// previewed, and Pulumi.yaml is configuration only when every byte outside its `config` entry
// is the base's.
import * as fs from "node:fs";
import * as path from "node:path";
import { mergeConfig, projectConfigOf, stackConfigOf, stackOfPath } from "./change";
import { refuseUnlessEngineAgrees } from "./engine-reading";
import { atRevision, commitOf, git, stacksDirOf } from "./git";
import { AmbiguousYaml, projectOutsideConfig, readConfigYaml, refuseAmbiguousYaml } from "./one-reader";

/** What a pull request brings, as `pullRequestInputs` read it. */
export interface PullRequestInputs {
  /** The pull request's commit (full hash). */
  head: string;
  /** The base branch's commit the checkout is at (full hash). */
  base: string;
  /** Configuration files the pull request adds, changes or removes (relative to the project folder), now so in the working tree. */
  config: string[];
  /** Every other file it changes: the program, reviewed as code and applied only after merge. */
  program: string[];
}

/** Pure: Pulumi.yaml's bytes outside its `config` entry (one-reader.ts): what makes it part of the program. */
export function projectWithoutConfig(text: string | undefined, file = "Pulumi.yaml"): string {
  return text === undefined ? "\0none" : projectOutsideConfig(text, file);
}

/**
 * A stack file's keys besides `config` say how its secrets are kept (`secretsprovider`,
 * `encryptedkey`) or pull settings from elsewhere (`environment`): a pull request may not change
 * them (they would change what the review's preview decrypts or reads, and no row shows them).
 * `encryptionsalt` is written by `stack init` and may be new.
 */
function refuseOtherThanSettings(text: string, baseText: string | undefined, file: string): void {
  const keys = (t: string | undefined) => Object.entries(((t === undefined ? {} : readConfigYaml(t, file)) ?? {}) as Record<string, unknown>).filter(([k]) => k !== "config" && k !== "encryptionsalt");
  const now = JSON.stringify(keys(text));
  if (now !== JSON.stringify(keys(baseText))) {
    const names = [...new Set([...keys(text), ...keys(baseText)].map(([k]) => k))].join(", ");
    throw new Error(`${file} changes ${names}: a pull request changes a stack's settings (its \`config\`) only; how a stack keeps its secrets is changed on the base branch by a maintainer; nothing was previewed or changed`);
  }
}

/** The pull request's copy of a configuration file, refused when the engine could read it otherwise. */
function refuseUnlessOneReading(text: string | undefined, file: string, head: string): void {
  if (text === undefined) return;
  try {
    refuseAmbiguousYaml(text, file);
  } catch (e) {
    if (!(e instanceof AmbiguousYaml)) throw e;
    throw new AmbiguousYaml(`${file} of the pull request (${head.slice(0, 12)})`, e.line, e.column, `${e.reason}. The review reads configuration only where it and Pulumi cannot read it differently`);
  }
}
/**
 * Reads what the pull request at `ref` changes against the base checkout at `dir`, writing
 * nothing. Refuses a ref that is not a commit there, a branch behind the checkout's commit, and
 * a working tree with changes other than this pull request's configuration (the review would
 * mix them in).
 */
export function readPullRequest(dir: string, ref: string): PullRequestInputs {
  const head = commitOf(dir, ref);
  if (!head) throw new Error(`--pr ${ref} names no commit of the git repository at ${dir}: fetch the pull request's head first (git fetch origin pull/N/head)`);
  const base = git(dir, ["rev-parse", "HEAD"]).trim();
  // The pull request must contain the base: otherwise what it would deploy drops the base's
  // later commits (their configuration too), which its diff against the merge base hides.
  try {
    git(dir, ["merge-base", "--is-ancestor", base, head]);
  } catch {
    throw new Error(`the pull request (${head.slice(0, 12)}) is behind its base (${base.slice(0, 12)}): the base has commits it lacks, which applying it would revert. Merge or rebase the base branch into it, push, and review again; nothing was reviewed or changed`);
  }
  const projectBase = atRevision(dir, base, "Pulumi.yaml");
  const projectHead = atRevision(dir, head, "Pulumi.yaml");
  const stacksDir = stacksDirOf(projectBase, `Pulumi.yaml of the base (${base.slice(0, 12)})`);
  // -z: a path with non-ASCII characters is given as it is, not quoted.
  const changed = git(dir, ["diff", "-z", "--name-only", "--no-renames", "--relative", base, head, "--", "."]).split("\0").filter(Boolean).sort();
  const config: string[] = [];
  const program: string[] = [];
  for (const f of changed) {
    const isStack = stackOfPath(f, stacksDir) !== undefined;
    // Before anything is decided from it: bytes Pulumi could read otherwise refuse the review.
    if (isStack || f === "Pulumi.yaml") refuseUnlessOneReading(f === "Pulumi.yaml" ? projectHead : atRevision(dir, head, f), f, head);
    const isProjectConfig = f === "Pulumi.yaml" && projectHead !== undefined && projectWithoutConfig(projectBase, "Pulumi.yaml of the base") === projectWithoutConfig(projectHead);
    (isStack || isProjectConfig ? config : program).push(f);
  }
  // What the review will read of the configuration is what Pulumi reads (engine-reading.ts), and
  // a stack file changes nothing but its settings.
  const project = config.includes("Pulumi.yaml") ? projectHead : projectBase;
  if (project !== undefined) {
    const projectFile = `Pulumi.yaml${config.includes("Pulumi.yaml") ? ` of the pull request (${head.slice(0, 12)})` : ""}`;
    refuseUnlessEngineAgrees(project, undefined, projectConfigOf(project, projectFile), projectFile);
    for (const f of config.filter((c) => c !== "Pulumi.yaml")) {
      const text = atRevision(dir, head, f);
      if (text === undefined) continue;
      const named = `${f} of the pull request (${head.slice(0, 12)})`;
      refuseOtherThanSettings(text, atRevision(dir, base, f), named);
      refuseUnlessEngineAgrees(project, text, mergeConfig(projectConfigOf(project, projectFile), stackConfigOf(text, named)), `${named} with ${projectFile}`);
    }
  }
  // The checkout's own changes: none, or this pull request's configuration written already.
  const own = git(dir, ["diff", "-z", "--name-only", "--no-renames", "--relative", "HEAD", "--", "."]).split("\0").filter(Boolean);
  const foreign = own.filter((f) => !config.includes(f) || !isAsAt(dir, head, f));
  if (foreign.length) {
    throw new Error(`the checkout at ${dir} has changes of its own (${foreign.join(", ")}); --pr reviews and applies a pull request only from a clean checkout of its base branch (git stash, or a fresh checkout)`);
  }
  return { head, base, config, program };
}

/** The working tree's copy of `file` is the one at `rev` (both absent counts). */
function isAsAt(dir: string, rev: string, file: string): boolean {
  const want = atRevision(dir, rev, file);
  const at = path.join(dir, file);
  const have = fs.existsSync(at) && !fs.lstatSync(at).isSymbolicLink() ? fs.readFileSync(at, "utf8") : undefined;
  return want === have;
}

/** Writes the pull request's configuration files (as read by readPullRequest) into the working tree: regular files, a link's text as text. */
export function writePullRequestConfig(dir: string, pr: PullRequestInputs): void {
  for (const f of pr.config) {
    const text = atRevision(dir, pr.head, f);
    const to = path.join(dir, f);
    fs.rmSync(to, { force: true });
    if (text !== undefined) {
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.writeFileSync(to, text);
    }
  }
}

/** readPullRequest, then writePullRequestConfig: the base checkout now holds the pull request's configuration. */
export function pullRequestInputs(dir: string, ref: string): PullRequestInputs {
  const pr = readPullRequest(dir, ref);
  writePullRequestConfig(dir, pr);
  return pr;
}
