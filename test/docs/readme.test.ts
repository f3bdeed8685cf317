// The docs in layers: a README short enough to read (at most 400 lines) that names the
// prerequisites before the two commands, links that resolve (every relative link of README.md
// and docs/**/*.md to a file of the repository, and a #fragment to a heading of the Markdown
// file it names), and no change history in the user docs (README.md, docs/guides/): "issue 41",
// "Before, ...", "used to" belong, if anywhere, in docs/design/. Markdown is read by a GFM
// parser (micromark, as test/components/review/render.test.ts does), so a link in a code block
// is no link and a heading's anchor is GitHub's. Each check is shown to fail on a broken copy.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { micromark } from "micromark";
import { gfm, gfmHtml } from "micromark-extension-gfm";
import { REPO_ROOT } from "../../lib/pulumi-env";

const MAX_README_LINES = 400;

/** What the checks read: files by their path relative to the repository root. */
interface Repo {
  exists(rel: string): boolean;
  read(rel: string): string;
}

const disk: Repo = {
  exists: (rel) => fs.existsSync(path.join(REPO_ROOT, rel)),
  read: (rel) => fs.readFileSync(path.join(REPO_ROOT, rel), "utf8"),
};

/** The repository with some files replaced (or added): a broken copy, on no disk. */
function withFiles(base: Repo, files: Record<string, string>): Repo {
  return {
    exists: (rel) => rel in files || base.exists(rel),
    read: (rel) => (rel in files ? files[rel] : base.read(rel)),
  };
}

/** README.md and every Markdown file under docs/, as paths relative to the root. */
function markdownFiles(): string[] {
  const out = ["README.md"];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith(".md")) out.push(rel);
    }
  };
  walk("docs");
  return out.sort();
}

const html = (md: string) => micromark(md, { extensions: [gfm()], htmlExtensions: [gfmHtml()], allowDangerousHtml: true });

function decodeEntities(s: string): string {
  return s
    .replace(/&quot;/g, '"')
    .replace(/&#x27;|&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n: string) => String.fromCodePoint(parseInt(n, 16)))
    .replace(/&amp;/g, "&");
}

/** The headings of a Markdown document, as text (inline code and emphasis taken out), in order. */
function headings(md: string): string[] {
  return [...html(md).matchAll(/<h[1-6]>([\s\S]*?)<\/h[1-6]>/g)].map((m) => decodeEntities(m[1].replace(/<[^>]*>/g, "")).trim());
}

/** The anchors GitHub gives a document: each heading's slug (a repeat gets -1, -2, ...) and explicit ids. */
const anchorCache = new Map<string, Set<string>>();
function anchors(md: string): Set<string> {
  const cached = anchorCache.get(md);
  if (cached) return cached;
  const out = new Set<string>();
  anchorCache.set(md, out);
  const seen = new Map<string, number>();
  for (const h of headings(md)) {
    const slug = h.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  for (const m of html(md).matchAll(/<[a-z][^>]*\s(?:id|name)="([^"]+)"/gi)) out.add(decodeEntities(m[1]));
  return out;
}

/** Every link and image target of a Markdown document (code blocks and inline code are no links). */
function linkTargets(md: string): string[] {
  return [...html(md).matchAll(/<(?:a|img)\s[^>]*?(?:href|src)="([^"]*)"/g)].map((m) => decodeEntities(m[1]));
}

/** Every relative link of `file` that does not resolve, one line each; empty when all do. */
function linkFindings(repo: Repo, file: string): string[] {
  const out: string[] = [];
  const md = repo.read(file);
  for (const target of linkTargets(md)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue; // https:, mailto:, ...
    const hash = target.indexOf("#");
    const rawPath = hash < 0 ? target : target.slice(0, hash);
    const fragment = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    let rel = file;
    if (rawPath !== "") {
      const decoded = decodeURIComponent(rawPath);
      const resolved = decoded.startsWith("/") ? path.posix.normalize(decoded.slice(1)) : path.posix.join(path.posix.dirname(file), decoded);
      rel = resolved.replace(/\/$/, "");
      if (rel === ".." || rel.startsWith("../")) {
        out.push(`${file}: (${target}) points outside the repository`);
        continue;
      }
      if (!repo.exists(rel)) {
        out.push(`${file}: (${target}) names ${rel}, which does not exist`);
        continue;
      }
    }
    if (fragment !== undefined && rel.endsWith(".md") && !anchors(repo.read(rel)).has(fragment)) {
      out.push(`${file}: (${target}): ${rel} has no heading with the anchor #${fragment}`);
    }
  }
  return out;
}

function lineCount(text: string): number {
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

function lengthFindings(readme: string): string[] {
  const n = lineCount(readme);
  return n > MAX_README_LINES ? [`README.md has ${n} lines, more than ${MAX_README_LINES}: move the detail into docs/`] : [];
}

/** The prerequisites come before the two commands, and name what a fresh machine lacks. */
function prerequisiteFindings(readme: string): string[] {
  const out: string[] = [];
  const hs = headings(readme);
  const prereq = hs.findIndex((h) => /^prerequisites\b/i.test(h));
  const commands = hs.findIndex((h) => /^the two commands$/i.test(h));
  if (prereq < 0) return ["README.md has no Prerequisites section"];
  if (commands < 0) return ["README.md has no section \"The two commands\""];
  if (prereq > commands) out.push("README.md names its prerequisites after the two commands");
  // The section's own text: from its heading to the next heading of its level or above.
  const lines = readme.split("\n");
  const start = lines.findIndex((l) => /^#{1,6}\s+prerequisites\b/i.test(l));
  const level = /^#+/.exec(lines[start])![0].length;
  let end = lines.findIndex((l, i) => i > start && new RegExp(`^#{1,${level}}\\s`).test(l));
  if (end < 0) end = lines.length;
  const section = lines.slice(start, end).join("\n");
  for (const [what, re] of [
    ["../shared/vendor beside the clone", /\.\.\/shared\/vendor/],
    ["Go 1.26 or newer", /Go 1\.26/],
    ["root", /\broot\b/],
    ["Node.js", /Node\.js/],
  ] as const) {
    if (!re.test(section)) out.push(`README.md's prerequisites do not name ${what}`);
  }
  const firstCommand = readme.search(/^npm run demo\b/m);
  if (firstCommand >= 0 && firstCommand < readme.indexOf(lines[start])) out.push("README.md shows `npm run demo` before its prerequisites");
  return out;
}

/** Change-history phrasing: how things were, or which issue changed them. */
const HISTORY: [string, RegExp][] = [
  ['"issue NN" (an issue of this project)', /\bissues? \d+/i],
  ['"Before, ..."', /\bBefore[,(]|\(before[,;:]/],
  ['"used to"', /(?<!\b(?:is|are|be|been|being|was|were|gets?|got) )\bused to\b/i],
  ['"found by the campaign"', /\bfound by the campaign\b/i],
  ['"campaign seed NNNN"', /\bcampaign,? seed \d+/i],
];

function historyFindings(file: string, text: string): string[] {
  const out: string[] = [];
  text.split("\n").forEach((line, i) => {
    for (const [what, re] of HISTORY) if (re.test(line)) out.push(`${file}:${i + 1}: change history (${what}): ${line.trim()}`);
  });
  return out;
}

/** The user docs, where no change history belongs: the README and the how-to guides. */
function userDocs(): string[] {
  return markdownFiles().filter((f) => f === "README.md" || f.startsWith("docs/guides/"));
}

const README = disk.read("README.md");

test(`README.md has at most ${MAX_README_LINES} lines`, () => {
  assert.deepEqual(lengthFindings(README), []);
  // A copy with the detail put back is refused.
  const long = README + "detail\n".repeat(MAX_README_LINES + 1 - lineCount(README));
  assert.equal(lineCount(long), MAX_README_LINES + 1);
  assert.match(lengthFindings(long).join("\n"), /README\.md has 401 lines, more than 400/);
});

test("every relative link of README.md and docs/**/*.md resolves to a file, and its #anchor to a heading", () => {
  const files = markdownFiles();
  assert.ok(files.includes("README.md") && files.some((f) => f.startsWith("docs/design/")), files.join(", "));
  assert.deepEqual(files.flatMap((f) => linkFindings(disk, f)), []);
});

test("the link check refuses a missing file, a missing anchor, an image that is not there and a path out of the repository", () => {
  const doc = [
    "# A guide",
    "",
    "## What `up` guarantees, and what it refuses",
    "",
    "[fine](#what-up-guarantees-and-what-it-refuses), [the README](../../README.md#the-two-commands), [a folder](../../components/)",
    "[gone](../nowhere.md), [no such heading](../../README.md#no-such-heading), [here, nowhere](#nowhere)",
    "![no picture](missing.png) [out](../../../outside.md)",
    "",
    "```md",
    "[in a code block](not-a-link.md) and `[inline](not-a-link-either.md)`",
    "```",
    "",
  ].join("\n");
  const repo = withFiles(disk, { "docs/guides/broken-copy.md": doc });
  const found = linkFindings(repo, "docs/guides/broken-copy.md");
  assert.deepEqual(found, [
    "docs/guides/broken-copy.md: (../nowhere.md) names docs/nowhere.md, which does not exist",
    "docs/guides/broken-copy.md: (../../README.md#no-such-heading): README.md has no heading with the anchor #no-such-heading",
    "docs/guides/broken-copy.md: (#nowhere): docs/guides/broken-copy.md has no heading with the anchor #nowhere",
    "docs/guides/broken-copy.md: (missing.png) names docs/guides/missing.png, which does not exist",
    "docs/guides/broken-copy.md: (../../../outside.md) points outside the repository",
  ]);
  // A heading the README links to, renamed in a broken copy: every link to it fails.
  const renamed = README.replace(/^(#+) Hosts where root cannot log in$/m, "$1 Hosts without a root login");
  assert.notEqual(renamed, README);
  const broken = withFiles(disk, { "README.md": renamed });
  const inReadme = linkFindings(broken, "README.md");
  assert.ok(inReadme.some((f) => /#hosts-where-root-cannot-log-in/.test(f)), inReadme.join("\n"));
  // A repeated heading gets GitHub's -1 suffix.
  assert.ok(anchors("## Notes\n\n## Notes\n").has("notes-1"));
});

test("README.md names its prerequisites (../shared/vendor, Go 1.26+, root, Node.js) before the two commands", () => {
  assert.deepEqual(prerequisiteFindings(README), []);
  // The section moved to the end, as it once was: refused.
  const lines = README.split("\n");
  const start = lines.findIndex((l) => /^## Prerequisites/.test(l));
  const end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  const moved = [...lines.slice(0, start), ...lines.slice(end), ...lines.slice(start, end)].join("\n");
  assert.deepEqual(prerequisiteFindings(moved), ["README.md names its prerequisites after the two commands", "README.md shows `npm run demo` before its prerequisites"]);
  // A prerequisite left out: refused, by name.
  const noVendor = README.replace(/\.\.\/shared\/vendor/g, "the vendored sources");
  assert.deepEqual(prerequisiteFindings(noVendor), ["README.md's prerequisites do not name ../shared/vendor beside the clone"]);
  assert.deepEqual(prerequisiteFindings(README.replace(/^## Prerequisites$/m, "## Before you start")), ["README.md has no Prerequisites section"]);
});

test("no change history in README.md or docs/guides/ (issue numbers, \"Before, ...\", \"used to\")", () => {
  assert.deepEqual(userDocs().flatMap((f) => historyFindings(f, disk.read(f))), []);
  // Each phrasing, put into a copy, is refused; an upstream issue's number (#37457) is not history.
  const broken = README.replace(
    /^## Using Pulumi$/m,
    [
      "The lock was open to anyone (issue 41).",
      "Before, a stopped unit read as no change.",
      "A rename used to stop the old unit.",
      "A note that never expired was found by the campaign.",
      "Moving the unit (campaign seed 3012) is safe.",
      "",
      "## Using Pulumi",
    ].join("\n"),
  );
  const found = historyFindings("README.md", broken).map((f) => f.replace(/:\d+:/, ":N:").replace(/\): .*$/, ")"));
  assert.deepEqual(found, [
    'README.md:N: change history ("issue NN" (an issue of this project))',
    'README.md:N: change history ("Before, ...")',
    'README.md:N: change history ("used to")',
    'README.md:N: change history ("found by the campaign")',
    'README.md:N: change history ("campaign seed NNNN")',
  ]);
  assert.deepEqual(historyFindings("README.md", "SGLang logs its API key (sgl-project/sglang issue #37457, open).\nThe flag is used to choose the GPUs.\n"), []);
});

/** Every `README, "Heading"` a message or comment of the code cites, where README.md has no such heading. */
function citationFindings(readme: string): string[] {
  const have = new Set(headings(readme));
  const files = ["index.ts", "Pulumi.yaml", ...["components", "scripts", "lib", "simhost", "bench"].flatMap((d) => fs.readdirSync(path.join(REPO_ROOT, d), { recursive: true }).map((f) => path.join(d, String(f))))].filter(
    (f) => /\.(ts|sh|yaml)$/.test(f) && !f.includes("node_modules") && fs.statSync(path.join(REPO_ROOT, f)).isFile(),
  );
  return files.flatMap((f) => [...fs.readFileSync(path.join(REPO_ROOT, f), "utf8").matchAll(/README, "([^"]+)"/g)].filter((m) => !have.has(m[1])).map((m) => `${f}: cites README, "${m[1]}", which README.md has no heading of`));
}

test("every README section the code cites (`README, \"Heading\"`) is a heading of README.md", () => {
  assert.deepEqual(citationFindings(README), []);
  assert.deepEqual(citationFindings(README.replace(/^### Hosts where root cannot log in$/m, "### Root")).length > 0, true, "a renamed heading is found");
});
