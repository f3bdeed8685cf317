import { test } from "node:test";
import * as assert from "node:assert/strict";
import { micromark } from "micromark";
import { downtimeFrom } from "../../../components/review/review";
import { gfm, gfmHtml } from "micromark-extension-gfm";
import { cell, code, COMMENT_LIMIT, MARKER, renderReview, ReviewDocument, ruleDifference, StackReview, STOPPED_NOW } from "../../../components/review/render";
import type { ConfigChange } from "../../../components/review/change";
import { levelThroughput, shortRate } from "../../../components/verdict/rows";
import type { Figures } from "../../../components/benchmark/compare";

const figures = (tps: number): Figures => ({
  format: 2,
  short: { median: tps, min: tps - 2, max: tps + 2, requests: 3 },
  shortPromptTokens: 128,
  long: [{ contextTokens: 8192, decode: { median: tps * 0.8, min: 0, max: 0, requests: 3 } }],
  concurrency: [{ level: 4, outputThroughput: tps * 3 }],
  medianTtftMs: 120,
  acceptLength: 6.5,
  acceptLengthSource: "spec_verify_ct",
  coding: { tasks: 5, passed: 5, failed: 0, extraction_failed: 0, timeouts: 0, results: [] },
  warnings: [],
});

/** A stack as a real review shows it: a full unit's diff against another stack's unit. */
function stack(i: number): StackReview {
  const unit = Array.from({ length: 60 }, (_, k) => `    ${k % 7 === 0 ? "-" : "+"}     --flag-number-${k} value-${i}-${k} \\`).join("\n");
  return {
    stack: `b${i}t4-w2048`,
    because: "project config changed",
    host: `10.0.0.${(i % 5) + 1}`,
    effect: i % 3 === 0 ? "benchmark only" : "restart",
    changes: [{ key: "speculative.budget", words: `budget ${i} -> ${i + 4}`, secret: false }],
    warnings: i === 7 ? ["`timeouts.drainPolicy: proceed`: a restart cuts the requests still running when the drain deadline passes"] : [],
    hostView: `sglang-k26 on 10.0.0.${(i % 5) + 1} runs the unit of stack b${i + 1}t4-w2048 (0123456789ab); \`up\` replaces it with stack b${i}t4-w2048's unit (ba9876543210), changing 60 lines:\n${unit}`,
    steps: [{ resource: "sglang-restart", op: "update", keys: ["create"] }],
    downtime: { seconds: 431.5, from: "x" },
    restartBecause: `host serves \`b${i + 1}t4-w2048\``,
    benchmark: { self: { stack: `b${i}t4-w2048`, takenAt: "2026-12-01T10:00:00Z", figures: figures(180) }, serving: { stack: `b${i + 1}t4-w2048`, takenAt: "2026-12-01T11:00:00Z", figures: figures(190) } },
  };
}

const doc = (n: number): ReviewDocument => ({ base: "a".repeat(40), head: "b".repeat(40), createdAt: "2026-12-02T16:00:00Z", backend: "postgres://team:***@db/pulumi", stacks: Array.from({ length: n }, (_, i) => stack(i + 1)), removed: [] });

test("40 stacks fit in one comment, every stack in the summary, what was trimmed said", () => {
  const md = renderReview(doc(40));
  assert.ok(md.length <= COMMENT_LIMIT, `${md.length} characters`);
  assert.ok(md.startsWith(MARKER));
  for (let i = 1; i <= 40; i++) assert.match(md, new RegExp(`^\\| \`b${i}t4-w2048\` \\|`, "m"), `stack ${i} in the summary`);
  assert.match(md, /Shortened to fit one comment|Left out to fit one comment/);
  // The summary comes first, whole, before any section.
  assert.ok(md.indexOf("| `b40t4-w2048` |") < md.indexOf("<details>"));
});

test("a handful of stacks are shown in full: unit lines, steps, benchmarks side by side", () => {
  const md = renderReview(doc(2));
  assert.doesNotMatch(md, /Shortened|Left out/);
  assert.match(md, /```diff\n[\s\S]*--flag-number-7 value-1-7/);
  // 180 against 190 over 3 requests each (spread 4), one launch each: the launch offset is not measured (twice the assumed 1.5 % is taken), so the rule cannot tell.
  assert.match(md, /\| decode tok\/s, short \(128 tokens\) \| 180 \| 190 \| inconclusive: -5\.3 % \(-17\.3 % to \+8\.5 %\) \|/);
  assert.match(md, /\| accept length \| 6\.5 \| 6\.5 \| \+0\.0 % \(one figure each\) \|/);
  assert.match(md, /\nDifferences of speed: this stack over the one serving now, by the report's rule: "faster" or "slower" only when the whole 95 % interval lies beyond \+0\.5 %, "equal within 2 %" when it lies inside ±2\.0 %, else "inconclusive" \(one launch each: the launch-to-launch spread is not measured, so twice the assumed 1\.5 % is taken\)\.\n/);
  assert.match(md, /\| coding check \| 5\/5 \| 5\/5 \| \|/);
  assert.match(md, /\| `b1t4-w2048` \| 10\.0\.0\.2 \| budget 1 -> 5 \| \*\*restart\*\* \(host serves `b2t4-w2048`\) \| ~431\.5 s \(its drain: up to timeouts\.drainSeconds, by traffic\) \|/);
  assert.match(md, /\| `b2t4-w2048` \| 10\.0\.0\.3 \| budget 2 -> 6 \| \*\*restart\*\* \(host serves `b3t4-w2048`\) \|/);
});

test("the table comes first; warnings follow it, in GitHub's alert form, before the sections", () => {
  const md = renderReview(doc(8));
  const warning = md.indexOf("> [!WARNING]");
  assert.ok(warning > md.indexOf("| Stack |") && warning < md.indexOf("<details>"));
  assert.match(md, /> - \*\*b7t4-w2048\*\*: `timeouts.drainPolicy: proceed`/);
});

test("a thousand stacks: still under the limit, saying it was cut", () => {
  const md = renderReview(doc(1000));
  assert.ok(md.length <= COMMENT_LIMIT);
  assert.match(md, /Cut at 60000 characters/);
});

test("no stack touched: says so", () => {
  assert.match(renderReview({ ...doc(0) }), /This change touches no stack/);
});

test("text from configuration, hosts and errors cannot inject Markdown or HTML", () => {
  const evil = stack(1);
  evil.changes = [{ key: "service.unitName", words: "unitName a -> <!-- hidden", secret: false }, { key: "x", words: "x 1 -> y\n\n</details>\n\n# LGTM", secret: false }];
  evil.error = "config broke:\n```\n</details><details open><summary>fake</summary>\n```";
  evil.effect = "preview failed";
  evil.host = "h|x<b>";
  const md = renderReview({ ...doc(0), stacks: [evil] });
  // What renders as Markdown: without fenced blocks (a fence closes only on a run as long as its
  // own) and code spans, which show their text as it is.
  const rendered = md.replace(/^(`{3,})[^\n]*\n[\s\S]*?\n\1$/gm, "").replace(/`[^`\n]*`/g, "");
  assert.equal(rendered.match(/<!--/g)?.length, 1, `the marker is the only HTML comment:\n${rendered.split("\n").filter((l) => l.includes("<!--")).join("\n")}`);
  assert.doesNotMatch(rendered, /^# LGTM|<details open>|h\\\|x<b>/m);
  assert.equal(rendered.match(/<details>/g)?.length, 1);
  assert.equal(rendered.match(/<\/details>/g)?.length, 1, "the section closes once");
  // The error's own fence is longer than any run of backticks in it.
  assert.match(md, /````text\nconfig broke:\n```\n/);
  assert.match(md, /\| h\\\|x&lt;b> \|/);
});

test("40 stacks whose previews failed, with long hosts and many removed files: every stack is still in the table", () => {
  const failing = Array.from({ length: 40 }, (_, i) => ({ ...stack(i + 1), effect: "preview failed" as const, host: "h".repeat(253), error: "e".repeat(5000), warnings: ["w".repeat(900), "v".repeat(900)] }));
  const md = renderReview({ ...doc(0), stacks: failing, removed: Array.from({ length: 40 }, (_, i) => `gone-${i}`) });
  assert.ok(md.length <= COMMENT_LIMIT);
  for (let i = 1; i <= 40; i++) assert.match(md, new RegExp(`^\\| \`b${i}t4-w2048\` \\|`, "m"));
  assert.match(md, /and 20 more/);
});

test("the benchmark differences are the report's rule: faster or slower only beyond noise, inconclusive where one launch each cannot tell, none where a benchmark warned", () => {
  assert.equal(ruleDifference(figures(150), figures(190), shortRate), "slower: -21.1 % (-31.2 % to -9.5 %)");
  assert.equal(ruleDifference(figures(190), figures(150), shortRate), "faster: +26.7 % (+10.4 % to +45.3 %)");
  assert.equal(ruleDifference(figures(189), figures(190), shortRate), "inconclusive: -0.5 % (-13.1 % to +13.9 %)", "one launch each: twice the assumed launch offset, so 0.5 % apart cannot be told from 0 nor shown equal within 2 %");
  // A throughput is one figure per launch: the launch offset alone makes its interval.
  assert.equal(ruleDifference(figures(180), figures(181), levelThroughput(4)), "inconclusive: -0.6 % (-12.6 % to +13.2 %)");
  assert.equal(ruleDifference({ ...figures(150), warnings: ["short: 900 of 1000 prompt tokens came from the prefix cache"] }, figures(190), shortRate), "not compared: a benchmark warned");
});

// Issue 36: a stopped server is not "no change": the comment says it is stopped, that `up`
// starts it, and that starting it costs no more downtime (nothing is served now).
test("a stack whose unit is stopped on its host: the restart says why, and no downtime is charged", () => {
  const s: StackReview = { ...stack(2), changes: [], hostView: "sglang-k26 on 10.0.0.3 runs the unit of this stack (0123456789ab), stopped since Fri 2026-12-04 10:00:00 UTC: it serves nothing now; `up` starts it.", restartBecause: STOPPED_NOW };
  const md = renderReview({ ...doc(0), stacks: [s] });
  assert.match(md, /\| `b2t4-w2048` \| 10\.0\.0\.3 \| none of its settings \(Pulumi\.yaml changed elsewhere\) \| \*\*restart\*\* \(stopped on the host: `up` starts it\) \| none more: it serves nothing now \|/);
});

// Issue 36: the downtime comes from a restart that drained, names the drain's bound, and says
// that the benchmark loads the live server afterwards.
test("expected downtime: from a drained restart where there is one, else 'first install'; the drain's bound; the benchmark's load", () => {
  const timings = (drainSeconds: number, drained?: boolean) => ({ host: "10.0.0.2", restartTimings: { drainSeconds, stopSeconds: 1, gpuReleaseSeconds: 2, loadToReadySeconds: 100, requestsCut: 0, ...(drained === undefined ? {} : { drained }) } });
  // This stack's own restart was a first install; the serving stack's drained: that one counts.
  assert.deepEqual(downtimeFrom([{ stack: "a", outputs: timings(0, false) }, { stack: "b", outputs: timings(20, true) }], "10.0.0.2"), { seconds: 123, from: "stack b's last restart on 10.0.0.2", drained: true });
  assert.deepEqual(downtimeFrom([{ stack: "a", outputs: timings(0, false) }], "10.0.0.2"), { seconds: 103, from: "stack a's last restart on 10.0.0.2", drained: false });
  assert.equal(downtimeFrom([{ stack: "a", outputs: timings(5) }], "10.0.0.2")?.drained, true, "recorded before `drained`: a drain shows");
  assert.equal(downtimeFrom([{ stack: "a", outputs: timings(5, true) }], "10.0.0.9"), undefined, "another host's restart says nothing of this one");
  const md = renderReview({
    ...doc(0),
    stacks: [
      { ...stack(1), downtime: { seconds: 103, from: "x", drained: false }, drainBoundSeconds: 300, benchmarkAfter: true },
      { ...stack(2), downtime: { seconds: 123, from: "x", drained: true }, drainBoundSeconds: 60, benchmarkAfter: false },
      { ...stack(4), downtime: undefined, drainBoundSeconds: 300 },
    ],
  });
  assert.match(md, /\| ~103 s \(first install, no drain measured; a drain adds up to 300 s, by traffic\) \|/);
  assert.match(md, /\| ~123 s \(its drain: up to 60 s, by traffic\) \|/);
  assert.match(md, /\| unknown \(no restart measured on this host; the drain alone: up to 300 s, by traffic\) \|/);
  assert.match(md, /After the restart of `b1t4-w2048`, its benchmark \(`benchmark\.enabled`\) loads the live server, beside your traffic, until it ends\./);
});

test("stacks a change of Pulumi.yaml or the program touches but that were never deployed: named, not reviewed", () => {
  const md = renderReview({ ...doc(1), notDeployed: ["never-1", "never|2"] });
  assert.match(md, /Not deployed, so not reviewed: `never-1`, `never\\\|2`\. A change of Pulumi\.yaml or the program installs nothing; `npm run review -- --stacks <name>` reviews the install of one\./);
  assert.doesNotMatch(renderReview(doc(1)), /Not deployed/);
});

// Issue 36, injection: text not ours (a host address, a setting's words, a warning) can add no
// row, cell, line, link, image or mention, and the caps hold with the escaping counted.
const NASTY = ["|", "`", "\r", "\n", "\r\n", "<", ">", "[", "]", "(", ")", "!", "@", "\\", "&", "://", "www.", "https", "team", " ", "a", "é", "#", "*", "_"];
function corpus(seed: number, n: number): string[] {
  let x = seed >>> 0;
  const next = () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  return Array.from({ length: n }, () => Array.from({ length: 1 + Math.floor(next() * 40) }, () => NASTY[Math.floor(next() * NASTY.length)]).join(""));
}
/** Whether escaped text is inert: every Markdown-active character escaped, every & an entity of ours, no line break, no autolink. */
function inert(text: string): string | undefined {
  if (/[\r\n]/.test(text)) return "a line break";
  if (/:\/\/|www\./i.test(text)) return "an autolink";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "\\") {
      i++;
      continue;
    }
    if (ch === "&" && !/^&(amp|lt|gt|#\d+);/.test(text.slice(i))) return `a bare & at ${i}`;
    if ("|`<[]!@".includes(ch)) return `an unescaped ${JSON.stringify(ch)} at ${i}`;
  }
  return undefined;
}

test("escaping: 2000 generated strings (seed 36) stay inert text, and a cap holds with the escaping counted", () => {
  for (const s of corpus(36, 2000)) {
    assert.equal(inert(cell(s)), undefined, `${JSON.stringify(s)} -> ${JSON.stringify(cell(s))}`);
    const capped = cell(s, 30);
    assert.ok(capped.length <= 30, `${JSON.stringify(capped)} is ${capped.length} characters`);
    assert.equal(inert(capped), undefined, `${JSON.stringify(s)} capped -> ${JSON.stringify(capped)}`);
  }
});

test("60 stacks whose hosts and settings are generated injection text: 60 rows of 6 cells, nothing cut", () => {
  const nasty = corpus(3636, 120);
  const stacks = Array.from({ length: 60 }, (_, i) => ({ ...stack(i + 1), host: `10.0.0.${i}${nasty[i]}`.repeat(3), changes: [{ key: "model.extraArgs", words: nasty[60 + i].repeat(10), secret: false }], warnings: [`${nasty[i]} @team [x](https://e.example) ![i](https://e.example/i.png)`] }));
  const md = renderReview({ ...doc(0), stacks });
  assert.ok(md.length <= COMMENT_LIMIT, `${md.length} characters`);
  assert.doesNotMatch(md, /Cut at \d+ characters/);
  const table = md.split("\n").filter((l) => l.startsWith("| `b"));
  assert.equal(table.length, 60, "one row per stack");
  for (const row of table) {
    // Cells are split where a | is not escaped (an even run of backslashes before it).
    const cells = row.split(/(?<!\\)(?:\\\\)*\|/).length - 2;
    assert.equal(cells, 6, row);
  }
  const warnings = md.split("\n").filter((l) => l.startsWith("> - **"));
  // A code span (ours, or one the text closes itself) renders nothing inside it but its text.
  for (const w of warnings) assert.equal(inert(w.replace(/^> - \*\*[^*]+\*\*: /, "").replace(/`[^`]+`/g, "")), undefined, w);
});

// The same document through a GFM parser (micromark with its GFM extension, which follows the
// GFM spec GitHub's cmark-gfm implements; GitHub's own renderer is not reachable from here), raw
// HTML passed through as GitHub passes its allowed tags: the table keeps 60 body rows of 6
// cells, and nothing becomes a link, an image or an element the text brought.
test("rendered by a GFM parser, the injected document keeps one row of 6 cells per stack and gains no link, image or element", () => {
  const nasty = corpus(3636, 120);
  const stacks = Array.from({ length: 60 }, (_, i) => ({ ...stack(i + 1), host: `10.0.0.${i}${nasty[i]}`.repeat(3), changes: [{ key: "model.extraArgs", words: nasty[60 + i].repeat(10), secret: false }], warnings: [`${nasty[i]} @team [x](https://e.example) ![i](https://e.example/i.png) <img src=x> www.e.example`] }));
  const md = renderReview({ ...doc(0), stacks });
  const html = micromark(md, { extensions: [gfm()], htmlExtensions: [gfmHtml()], allowDangerousHtml: true });
  const summary = html.slice(0, html.indexOf("</table>"));
  const rows = summary.split("<tbody>")[1].split("<tr>").slice(1);
  assert.equal(rows.length, 60, "one row per stack");
  for (const row of rows) assert.equal(row.split("<td").length - 1, 6, row);
  assert.doesNotMatch(html, /<a\b|<img\b/, "no link or image");
  // The elements are the renderer's and the document's own; none came from the text.
  const tags = new Set([...html.matchAll(/<([a-z][a-z0-9]*)\b/g)].map((m) => m[1]));
  assert.deepEqual([...tags].filter((t) => !["table", "thead", "tbody", "tr", "th", "td", "p", "code", "blockquote", "ul", "li", "strong", "em", "details", "summary", "pre", "h2", "h3", "h4", "br", "b"].includes(t)), []);
  // The check can fail: unescaped, the same text makes a link and breaks the table.
  const raw = micromark(`| a | b |\n|---|---|\n| ${nasty[0]} [x](https://e.example) | <img src=x> |\n`, { extensions: [gfm()], htmlExtensions: [gfmHtml()], allowDangerousHtml: true });
  assert.match(raw, /<a href|<img/);
});

// Issue 36, the trust boundary: a pull request reviewed from main's checkout (`--pr`).
test("a pull request reviewed by main's program says so, and a change of the program is a caution that nothing of it ran", () => {
  const plain = renderReview(doc(1));
  assert.doesNotMatch(plain, /base branch's program/, "a checkout's own review says nothing of it");
  const configOnly = renderReview({ ...doc(1), programChanges: [] });
  assert.match(configOnly, /Reviewed by the base branch's program \(`aaaaaaaaaaaa`\) on the pull request's configuration, which is all it changes\./);
  const program = renderReview({ ...doc(1), programChanges: ["components/review/render.ts", "evil|name`[x](y)`.ts"] });
  assert.match(program, /> \[!CAUTION\]\n> This pull request changes the program \(`components\/review\/render\.ts`, /);
  assert.match(program, /Nothing of it ran here: this review is the base branch's program \(`aaaaaaaaaaaa`\)/);
  assert.match(program, /`npm run apply` refuses this pull request until it is merged/);
  const line = program.split("\n").find((l) => l.startsWith("> This pull request changes the program"))!;
  assert.match(line, /evil\\\|name&#96;\\\[x\\\]\(y\)&#96;\.ts/, "a file name is escaped: no cell, code span or link of its own");
  const many = renderReview({ ...doc(1), programChanges: Array.from({ length: 50 }, (_, i) => `f${i}.ts`) });
  assert.match(many, /`f19\.ts` and 30 more\)/);
});

// Issue 58: the row's "What changes" was cut at 160 characters after sorting keys, so enough
// benchmark.* edits pushed a host.hostKey change out of it, silently.
const hostKeyChange: ConfigChange = { key: "host.hostKey", words: "host.hostKey ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOld0000000... -> ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINew1111111...", secret: false };
/** As configChanges gives them: sorted by key, so apiKey first, then 30 benchmark.*, then host.hostKey. */
const manyChanges = (): ConfigChange[] => [
  { key: "apiKey", words: "apiKey rotated", secret: true },
  ...Array.from({ length: 30 }, (_, k): ConfigChange => ({ key: `benchmark.setting${String(k).padStart(2, "0")}`, words: `benchmark.setting${String(k).padStart(2, "0")} ${k} -> ${k + 1}`, secret: false })),
  hostKeyChange,
];
/** A row's cells, split where a | is not escaped. */
const cellsOf = (row: string) => row.split(/(?<!\\)(?:\\\\)*\|/).slice(1, -1).map((c) => c.trim());

test("the summary row shows the host key and the secret before 30 benchmark settings, cuts at whole changes and says how many it left out and where", () => {
  const s: StackReview = { ...stack(1), changes: manyChanges() };
  const md = renderReview({ ...doc(0), stacks: [s] });
  const row = md.split("\n").find((l) => l.startsWith("| `b1t4-w2048` |"))!;
  const what = cellsOf(row)[2];
  assert.ok(what.startsWith(`${cell(hostKeyChange.words)}, apiKey rotated`), what);
  const m = /^(.*) \.\.\. and (\d+) more \(see the stack's section below\)$/.exec(what);
  assert.ok(m, what);
  // Whole changes only: each shown is one change's words entire, and with those left out they make all 32.
  const shown = m[1].split(", ");
  for (const w of shown) assert.ok(s.changes.some((c) => cell(c.words) === w), `${JSON.stringify(w)} is one change, whole`);
  assert.equal(shown.length + Number(m[2]), 32);
  assert.ok(m[1].length <= 160, `${m[1].length} characters of changes`);
  // The section it points to is there and lists every change.
  const listed = md.split("\n").find((l) => l.startsWith("Settings that change: "))!;
  for (const c of s.changes) assert.ok(listed.includes(code(c.words)), c.key);
  assert.match(md, /<summary><b>b1t4-w2048<\/b>: restart, host\.hostKey [^<]* \.\.\. and \d+ more \(listed below\)<\/summary>/);
});

test("the weight order: host, nodes and fleet, then secrets, then the unit and the model, then speculative, then the rest, each in its own order", () => {
  const changes: ConfigChange[] = [
    { key: "benchmark.enabled", words: "b.e 1", secret: false },
    { key: "fleet.replicas", words: "f.r 1", secret: false },
    { key: "host.address", words: "h.a 1", secret: false },
    { key: "hfToken", words: "hfToken set", secret: true },
    { key: "host.user", words: "h.u 1", secret: false },
    { key: "model.tpSize", words: "tpSize 1", secret: false },
    { key: "nodes", words: "nodes 1", secret: false },
    { key: "service.unitName", words: "s.u 1", secret: false },
    { key: "speculative.budget", words: "budget 1", secret: false },
    { key: "service.environment.HF_TOKEN", words: "service.environment.HF_TOKEN set", secret: true },
    { key: "timeouts.drainSeconds", words: "t.d 1", secret: false },
  ];
  const md = renderReview({ ...doc(0), stacks: [{ ...stack(1), changes }] });
  const row = md.split("\n").find((l) => l.startsWith("| `b1t4-w2048` |"))!;
  assert.equal(
    cellsOf(row)[2],
    "f.r 1, h.a 1, h.u 1, nodes 1, hfToken set, service.environment.HF_TOKEN set, tpSize 1, s.u 1, budget 1, b.e 1, t.d 1",
  );
});

test("a row whose stack's section is left out for length says where its changes are listed instead", () => {
  const stacks = Array.from({ length: 12 }, (_, i) => ({ ...stack(i + 1), changes: manyChanges() }));
  const limit = 20_000;
  const md = renderReview({ ...doc(0), stacks }, limit);
  assert.ok(md.length <= limit, `${md.length} characters`);
  const left = /Left out to fit one comment: the sections of ([^.]*)\./.exec(md);
  assert.ok(left, "some sections are left out");
  const inDocument = stacks.filter((s) => md.includes(`<summary><b>${s.stack}</b>`)).length;
  assert.ok(inDocument > 0 && inDocument < stacks.length, `${inDocument} of ${stacks.length} sections in the document`);
  for (const s of stacks) {
    const row = md.split("\n").find((l) => l.startsWith(`| \`${s.stack}\` |`))!;
    const what = cellsOf(row)[2];
    assert.ok(what.startsWith(cell(hostKeyChange.words)), what);
    const inDocument = md.includes(`<summary><b>${s.stack}</b>`);
    assert.equal(left[1].split(", ").includes(`\`${s.stack}\``), !inDocument, s.stack);
    if (inDocument) assert.match(what, / \.\.\. and \d+ more \(see the stack's section below\)$/);
    else assert.match(what, / \.\.\. and \d+ more \(its section is left out for length: `npm run review -- --stacks <name>` lists them all\)$/);
  }
});

// Issue 58: a stack name comes from a file name a pull request chose; the footer wrote it raw in
// backticks. Every place a name goes (the table, rollout order, warnings, sections, benchmark
// headers, the notes of sections shortened or left out) keeps it text.
const HOSTILE_NAMES = [
  "x`<img src=x>",
  "`<img src=x onerror=alert(1)>`",
  "a|b|c",
  "<script>alert(1)</script>",
  "@team",
  "a\n# LGTM",
  "a\r\n</details><details open><summary>fake",
  "[x](https://e.example)",
  "![i](https://e.example/i.png)",
  "](https://e.example)",
  "tail\\",
  "\\`",
  "``",
  "<!-- hidden",
  "www.e.example",
  "a\n\n> [!NOTE]\n> approved",
];
test("hostile stack names, everywhere the document puts one, break out of no code span, cell, line or note", () => {
  const names = [...new Set([...HOSTILE_NAMES, ...corpus(58, 44)])].filter((n) => n.trim() !== "");
  const hosts = corpus(5858, 4).map((h) => `10.0.0.1${h}`);
  const stacks = names.map((name, i): StackReview => {
    const other = names[(i + 1) % names.length];
    return {
      ...stack(i + 1),
      stack: name,
      host: hosts[i % hosts.length],
      order: { position: Math.floor(i / hosts.length) + 1, of: Math.ceil(names.length / hosts.length) },
      benchmarkAfter: true,
      restartBecause: `host serves ${code(other)}`,
      // As review.ts writes them: the name in a code span of the warning.
      warnings: [`its host serves stack ${other}: this change does not put it back there (\`npm run review -- --stacks ${name}\` does)`],
      benchmark: { self: { stack: name, takenAt: "2026-12-01T10:00:00Z", figures: figures(180) }, serving: { stack: other, takenAt: "2026-12-01T11:00:00Z", figures: figures(190) } },
    };
  });
  const md = renderReview({ ...doc(0), stacks, removed: names.slice(0, 25), notDeployed: names.slice(25, 50) });
  assert.ok(md.length <= COMMENT_LIMIT);
  // Markdown: without fenced blocks and code spans, no raw <, @, line of its own or link text is left.
  const rendered = md.replace(/^(`{3,})[^\n]*\n[\s\S]*?\n\1$/gm, "").replace(/`[^`\n]*`/g, "");
  for (const [k, line] of rendered.split("\n").entries()) {
    // Backslash escapes dropped (each escapes the character after it), and the document's own tags.
    const ours = line.replace(/\\[\s\S]/g, "").replace(/^<!-- dflash-sglang review -->$/, "").replace(/<\/?(details|summary|b)>/g, "");
    assert.doesNotMatch(ours, /[<@]|\]\(|^#(?!## Per stack$|# Stack review: )/, `line ${k}: ${JSON.stringify(line)}`);
  }
  // The notes at the end name sections both shortened and left out, one line each.
  assert.match(md, /\n> \[!NOTE\]\n> Shortened to fit one comment .*\n> Left out to fit one comment: .*\n$/);
  // Through a GFM parser: one row of 6 cells per stack, no link, image or element of the names'.
  const html = micromark(md, { extensions: [gfm()], htmlExtensions: [gfmHtml()], allowDangerousHtml: true });
  const rows = html.slice(0, html.indexOf("</table>")).split("<tbody>")[1].split("<tr>").slice(1);
  assert.equal(rows.length, names.length, "one row per stack");
  for (const row of rows) assert.equal(row.split("<td").length - 1, 6, row);
  assert.doesNotMatch(html, /<a\b|<img\b|<script|<h1|<details open/);
  const tags = new Set([...html.matchAll(/<([a-z][a-z0-9]*)\b/g)].map((m) => m[1]));
  assert.deepEqual([...tags].filter((t) => !["table", "thead", "tbody", "tr", "th", "td", "p", "code", "blockquote", "ul", "li", "strong", "em", "details", "summary", "pre", "h2", "h3", "br", "b"].includes(t)), []);
  assert.equal(html.match(/<details>/g)?.length, html.match(/<\/details>/g)?.length);
  assert.equal(html.match(/<h2>/g)?.length, 1);
});
