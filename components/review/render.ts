// Pure: the review as one Markdown document, ready to post as a pull-request comment: a
// summary table of every stack first, warnings, the rollout order, then one collapsed
// section per stack. Never longer than the limit, whatever the number of stacks: the summary
// is kept whole, the sections trimmed (shortest form first) and what was left out said.
import type { Figures } from "../benchmark/compare";
import { compare, estimate, launchOffset, type LaunchMeasure } from "../verdict/rule";
import { comparisonWord, equalWords } from "../verdict/words";
import { levelThroughput, longRate, shortRate } from "../verdict/rows";
import { DEFAULT_VERDICT, type VerdictSettings } from "../verdict/schema";
import type { ConfigChange, TouchedBecause } from "./change";
import type { Effect, Step } from "./record";

/** GitHub refuses comments over 65,536 characters; this leaves room for a header a CI step adds. */
export const COMMENT_LIMIT = 60_000;

/** The first line of the document: a CI step finds its earlier comment by it, to update it in place. */
export const MARKER = "<!-- dflash-sglang review -->";

export interface BenchmarkView {
  stack: string;
  takenAt: string;
  figures: Figures;
}

export interface StackReview {
  stack: string;
  because: TouchedBecause;
  /** The host's address (node 0), or "?" when the configuration does not say. */
  host: string;
  effect: Effect;
  changes: ConfigChange[];
  warnings: string[];
  /** What the preview said each node runs and which unit lines `up` changes (secrets masked). */
  hostView: string;
  steps: Step[];
  /** Why the preview failed (effect "preview failed"). */
  error?: string;
  /** Expected downtime, from the host's last measured restart (one that drained a server, where there is one). */
  downtime?: { seconds: number; from: string; drained?: boolean };
  /** timeouts.drainSeconds: how long the drain of a busy server may take. */
  drainBoundSeconds?: number;
  /** benchmark.enabled: the benchmark loads the live server after the restart. */
  benchmarkAfter?: boolean;
  /** Why it restarts, when the change alone would not say (Markdown): "host serves `b8`". */
  restartBecause?: string;
  /** Place in the rollout on its host, when another stack of the review shares it. */
  order?: { position: number; of: number };
  /** The stack's own last benchmark, and that of the configuration serving on the host now. */
  benchmark: { self?: BenchmarkView; serving?: BenchmarkView };
}

export interface ReviewDocument {
  base: string;
  head: string;
  createdAt: string;
  /** Where state is (credentials masked). */
  backend: string;
  stacks: StackReview[];
  /** Stack files the change deletes. */
  removed: string[];
  /** Stacks a change of Pulumi.yaml or the program touches that have nothing in state: not reviewed, not installed. */
  notDeployed?: string[];
  /**
   * Reviewed from the base branch's checkout (`--pr`): the pull request's files other than its
   * configuration, which were not run; undefined when the review ran the checkout's own program.
   */
  programChanges?: string[];
}

/**
 * How each character of text not ours is written in the comment, so that it stays text: no HTML
 * (`&`, `<`; a `>` is inert within a line), no table cell of its own (`|`, and `\` so that no escape of ours is undone),
 * no code span, link or image (`` ` ``, `[`, `]`, `!`), no mention or e-mail link (`@`). Line
 * breaks (CR or LF, alone or not) become one space; an autolink (`://`, `www.`) is broken.
 */
const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", "|": "\\|", "\\": "\\\\", "`": "&#96;", "[": "\\[", "]": "\\]", "!": "\\!", "@": "&#64;", "://": "&#58;//" };
const TOKENS = /:\/\/|www\.|[\s\S]/giu;
const escapeToken = (t: string) => ESCAPES[t] ?? (/^www\.$/i.test(t) ? `${t.slice(0, 3)}&#46;` : t);

/**
 * Text not ours in Markdown (a table cell, a line): each character escaped (ESCAPES), then cut
 * to at most `max` characters of the escaped text, never inside an escape ("..." where cut): the
 * cap holds with the escaping counted.
 */
export function cell(s: string, max = Infinity): string {
  const tokens = (s.replace(/\s*[\r\n]+\s*/g, " ").match(TOKENS) ?? []).map(escapeToken);
  const whole = tokens.join("");
  if (whole.length <= max) return whole;
  let out = "";
  for (const t of tokens) {
    if (out.length + t.length > max - 3) break;
    out += t;
  }
  return `${out}...`;
}
/** Our own text with code spans in it (warnings): outside them as cell(); inside, no cell or line break of its own. */
function inline(s: string): string {
  return s
    .split(/(`[^`\r\n]+`)/)
    .map((part, k) => (k % 2 === 1 ? part.replace(/\|/g, "\\|") : cell(part)))
    .join("");
}
/** A code span, when the text allows one; else plain escaped text. */
export function code(s: string): string {
  return s === "" || /[`\r\n\\]/.test(s) ? cell(s) : `\`${s.replace(/\|/g, "\\|")}\``;
}
/** A fenced block whose fence is longer than any run of backticks in its content. */
export function fence(content: string, lang: string): string {
  const longest = Math.max(0, ...(content.match(/`+/g) ?? []).map((r) => r.length));
  const f = "`".repeat(Math.max(3, longest + 1));
  return `${f}${lang}\n${content.replace(/\n+$/, "")}\n${f}`;
}
const cap = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);
const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));

/** Why a stack whose unit is installed but stopped (by hand, or failed) restarts: `up` starts it. */
export const STOPPED_NOW = "stopped on the host: `up` starts it";

/**
 * How much a reviewer must see a change where not all of them fit: 0 first. The machine and how
 * it is reached (host, nodes, fleet: address, port, user, hostKey, become, privateKeyPath), then
 * secrets, then the unit (service.*) and the model, then the speculative settings, then the rest
 * (benchmark.*, timeouts.*, ...).
 */
export function changeWeight(c: ConfigChange): number {
  const top = c.key.split(/[.[]/)[0];
  if (top === "host" || top === "nodes" || top === "fleet") return 0;
  if (c.secret) return 1;
  if (top === "service" || top === "model") return 2;
  if (top === "speculative") return 3;
  return 4;
}

/** The changes, weightiest first (changeWeight), in their own order within a weight. */
export function byWeight(changes: readonly ConfigChange[]): ConfigChange[] {
  return changes
    .map((c, i) => ({ c, i, w: changeWeight(c) }))
    .sort((a, b) => a.w - b.w || a.i - b.i)
    .map((x) => x.c);
}

/** Where a row or a section head that leaves changes out sends the reader: a place that lists every one. */
export const LISTED = {
  /** The stack's section is in the document (full or shortened: either lists every change). */
  below: "see the stack's section below",
  /** The stack's section was left out for length. */
  leftOut: "its section is left out for length: `npm run review -- --stacks <name>` lists them all",
  /** Inside the section's own head (HTML: no code spans). */
  inSection: "listed below",
} as const;

/**
 * Escaped Markdown: the stack's changes in words, weightiest first, at most `max` characters of
 * escaped text of them, cut only between whole changes; where some are left out it ends
 * " ... and 7 more (`where`)" (`where` is ours, not escaped). Only a first change longer than
 * `max` alone is cut inside, visibly ("...").
 */
export function changeWords(s: StackReview, max = Infinity, where: string = LISTED.below): string {
  const prefix = s.because === "new stack file" && s.changes.length ? "new stack: " : "";
  if (!s.changes.length) return cell(s.because === "project config changed" ? "none of its settings (Pulumi.yaml changed elsewhere)" : "no setting");
  const words = byWeight(s.changes).map((c) => cell(c.words));
  let out = "";
  let n = 0;
  for (const w of words) {
    const next = n ? `${out}, ${w}` : w;
    if (prefix.length + next.length > max) break;
    out = next;
    n++;
  }
  if (n === words.length) return `${prefix}${out}`;
  if (n === 0) {
    out = cell(byWeight(s.changes)[0].words, Math.max(20, max - prefix.length));
    n = 1;
  }
  const left = words.length - n;
  return `${prefix}${out}${left ? ` ... and ${left} more (${where})` : ` (in full: ${where})`}`;
}

function effectCell(s: StackReview): string {
  switch (s.effect) {
    case "restart":
      return s.restartBecause ? `**restart** (${s.restartBecause})` : "**restart**";
    case "preview failed":
      return "**preview failed**";
    case "no change":
      return s.changes.some((c) => c.secret) ? "no (same secret value)" : "no";
    default:
      return `no (${s.effect})`;
  }
}

function downtimeCell(s: StackReview): string {
  if (s.effect !== "restart") return "none";
  if (s.restartBecause === STOPPED_NOW) return "none more: it serves nothing now";
  const bound = s.drainBoundSeconds !== undefined ? `up to ${fmt(s.drainBoundSeconds)} s` : "up to timeouts.drainSeconds";
  if (!s.downtime) return `unknown (no restart measured on this host; the drain alone: ${bound}, by traffic)`;
  if (s.downtime.drained === false) return `~${fmt(s.downtime.seconds)} s (first install, no drain measured; a drain adds ${bound}, by traffic)`;
  return `~${fmt(s.downtime.seconds)} s (its drain: ${bound}, by traffic)`;
}

/** Warnings of a stack, its own and those its preview showed. */
export function warningsOf(s: StackReview): string[] {
  const out = [...s.warnings];
  if (s.effect === "preview failed") out.push(`its preview failed: ${cap(s.error?.split("\n")[0] ?? "", 300)}`);
  return out;
}

/** A list of names, at most `max` of them shown. */
function names(list: readonly string[], max: number): string {
  const shown = list.slice(0, max).map(code).join(", ");
  return list.length > max ? `${shown} and ${list.length - max} more` : shown;
}

/**
 * The summary: the table of every stack first (cells capped), then the rollout order, removed
 * stack files and warnings; warnings give way first when the whole would not fit in `room`.
 */
function summary(doc: ReviewDocument, room: number, leftOut?: ReadonlySet<string>): string {
  // Fitted as if every section were left out (the longest row notes), so that the summary with
  // the sections really left out is never longer than the one renderReview made room for.
  const worst = summaryLines(doc, () => true);
  const base = summaryLines(doc, (stack) => leftOut === undefined || leftOut.has(stack));
  const warned = doc.stacks.flatMap((s) => warningsOf(s).map((w) => `> - **${cell(s.stack)}**: ${inline(cap(w, 400))}`));
  if (!warned.length) return base;
  let shown = warned;
  const block = (w: string[]) => `> [!WARNING]\n${w.join("\n")}${w.length < warned.length ? `\n> - and ${warned.length - w.length} more warnings: see each stack's section` : ""}\n\n`;
  while (shown.length && worst.length + block(shown).length > room) shown = shown.slice(0, Math.floor(shown.length / 2));
  return base + block(shown);
}

/** The summary without its warnings; `leftOut`: whether a stack's section is left out of the document. */
function summaryLines(doc: ReviewDocument, leftOut: (stack: string) => boolean): string {
  const restarts = doc.stacks.filter((s) => s.effect === "restart").length;
  const lines = [
    MARKER,
    `## Stack review: ${doc.stacks.length} stack${doc.stacks.length === 1 ? "" : "s"}, ${restarts} restart${restarts === 1 ? "" : "s"}`,
    "",
    `${code(doc.head.slice(0, 60))} against ${code(doc.base.slice(0, 12))}, previewed ${cell(doc.createdAt)} against ${code(doc.backend)} and the hosts.`,
    "",
  ];
  if (doc.programChanges !== undefined) {
    lines.push(
      doc.programChanges.length
        ? `> [!CAUTION]\n> This pull request changes the program (${names(doc.programChanges, 20)}). Nothing of it ran here: this review is the base branch's program (${code(doc.base.slice(0, 12))}) on the pull request's configuration. Review those files as code; \`npm run apply\` refuses this pull request until it is merged, then applies from the base branch.`
        : `Reviewed by the base branch's program (${code(doc.base.slice(0, 12))}) on the pull request's configuration, which is all it changes.`,
      "",
    );
  }
  if (doc.stacks.length === 0) lines.push(doc.programChanges !== undefined ? "Its configuration touches no stack." : "This change touches no stack: no stack file, not Pulumi.yaml, not the program.", "");
  if (doc.stacks.length) {
    lines.push("| Stack | Host | What changes | Restart | Expected downtime | Rollout |", "|---|---|---|---|---|---|");
    for (const s of doc.stacks) {
      const order = s.order ? `${s.order.position} of ${s.order.of} on this host` : "";
      lines.push(`| ${code(s.stack)} | ${cell(s.host, 60)} | ${changeWords(s, 160, leftOut(s.stack) ? LISTED.leftOut : LISTED.below)} | ${effectCell(s)} | ${downtimeCell(s)} | ${order} |`);
    }
    lines.push("");
  }
  const benchmarked = doc.stacks.filter((s) => s.effect === "restart" && s.benchmarkAfter);
  if (benchmarked.length) lines.push(`After the restart of ${names(benchmarked.map((s) => s.stack), 20)}, its benchmark (\`benchmark.enabled\`) loads the live server, beside your traffic, until it ends.`, "");
  const shared = [...new Set(doc.stacks.filter((s) => s.order).map((s) => s.host))];
  if (shared.length) {
    lines.push("Rollout order where stacks share a host (`npm run apply` follows it; each `up` replaces the one before it on that host, and the stack serving there now goes last):", "");
    for (const host of shared.slice(0, 20)) lines.push(`- on ${cell(host, 60)}: ${doc.stacks.filter((s) => s.host === host && s.order).sort((a, b) => a.order!.position - b.order!.position).map((s) => code(s.stack)).join(" -> ")}`);
    if (shared.length > 20) lines.push(`- and ${shared.length - 20} more hosts: see the Rollout column`);
    lines.push("");
  }
  if (doc.notDeployed?.length) lines.push(`Not deployed, so not reviewed: ${names(doc.notDeployed, 20)}. A change of Pulumi.yaml or the program installs nothing; \`npm run review -- --stacks <name>\` reviews the install of one.`, "");
  if (doc.removed.length) lines.push(`Stack files removed: ${names(doc.removed, 20)}. Nothing previews them, and their hosts keep what they run: \`npx pulumi destroy --stack <name>\` takes one down.`, "");
  return `${lines.join("\n")}\n`;
}

const signed = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)} %`;

/**
 * Pure: this stack's figure against the serving one's by the report's rule (one launch each,
 * twice the assumed launch offset): "faster: +6.8 % (+1.2 to +12.7 %)", "slower: ...",
 * "equal within 2 %: ..." or "inconclusive: ..."; not compared where either benchmark warned.
 */
export function ruleDifference(a: Figures, b: Figures, pick: (f: Figures) => LaunchMeasure | undefined, s: VerdictSettings = DEFAULT_VERDICT): string {
  const [x, y] = [pick(a), pick(b)];
  if (!x || !y) return "";
  if (a.warnings.length || b.warnings.length) return "not compared: a benchmark warned";
  const offset = launchOffset([[x], [y]], s);
  const c = compare(estimate([x], s, offset), estimate([y], s, offset), s);
  const said = `${signed(c.ratio - 1)} (${signed(c.low - 1)} to ${signed(c.high - 1)})`;
  return c.verdict === "better" ? `faster: ${said}` : c.verdict === "worse" ? `slower: ${said}` : `${comparisonWord(c)}: ${said}`;
}

function benchTable(b: StackReview["benchmark"]): string {
  const cols = [b.self && { name: `this stack (${code(b.self.stack)}, ${cell(b.self.takenAt.slice(0, 16))})`, f: b.self.figures }, b.serving && { name: `serving now (${code(b.serving.stack)}, ${cell(b.serving.takenAt.slice(0, 16))})`, f: b.serving.figures }].filter(
    (c): c is { name: string; f: Figures } => !!c,
  );
  if (!cols.length) return "No benchmark of this stack or of the configuration serving now is in state.\n";
  // Speeds get the rule's verdict; the acceptance length and TTFT, one figure each without a spread, only their change.
  type Line = [string, (f: Figures) => number | null, ((f: Figures) => LaunchMeasure | undefined) | undefined];
  const rows: Line[] = [
    [`decode tok/s, short (${cols[0].f.shortPromptTokens} tokens)`, (f) => f.short.median, shortRate],
    ...[...new Set(cols.flatMap((c) => c.f.long.map((l) => l.contextTokens)))].map((ctx): Line => [`decode tok/s, ${ctx} tokens`, (f) => f.long.find((l) => l.contextTokens === ctx)?.decode.median ?? null, longRate(ctx)]),
    ...[...new Set(cols.flatMap((c) => c.f.concurrency.map((l) => l.level)))].map((lvl): Line => [`output tok/s at ${lvl} concurrent`, (f) => f.concurrency.find((l) => l.level === lvl)?.outputThroughput ?? null, levelThroughput(lvl)]),
    ["accept length", (f) => f.acceptLength, undefined],
    ["median TTFT, ms", (f) => f.medianTtftMs, undefined],
  ];
  const two = cols.length === 2;
  const out = [`| | ${cols.map((c) => c.name).join(" | ")}${two ? " | difference |" : " |"}`, `|---|${cols.map(() => "---:").join("|")}|${two ? "---:|" : ""}`];
  for (const [name, get, pick] of rows) {
    const v = cols.map((c) => get(c.f));
    let diff = "";
    if (two && pick) diff = ruleDifference(cols[0].f, cols[1].f, pick);
    else if (two && v[0] !== null && v[1] !== null && v[1] !== 0) diff = `${signed(v[0]! / v[1]! - 1)} (one figure each)`;
    out.push(`| ${name} | ${v.map((x) => (x === null ? "" : fmt(Math.round(x * 100) / 100))).join(" | ")}${two ? ` | ${diff} |` : " |"}`);
  }
  const coding = cols.map((c) => (c.f.coding ? `${c.f.coding.passed}/${c.f.coding.tasks}` : "not run"));
  out.push(`| coding check | ${coding.join(" | ")}${two ? " | |" : " |"}`);
  const rule = two ? `\nDifferences of speed: this stack over the one serving now, by the report's rule: "faster" or "slower" only when the whole ${Math.round(DEFAULT_VERDICT.confidence * 100)} % interval lies beyond ${signed(DEFAULT_VERDICT.threshold)}, "${equalWords(DEFAULT_VERDICT.equalWithin)}" when it lies inside ±${(DEFAULT_VERDICT.equalWithin * 100).toFixed(1)} %, else "inconclusive" (one launch each: the launch-to-launch spread is not measured, so twice the assumed ${(DEFAULT_VERDICT.launchSd * 100).toFixed(1)} % is taken).\n` : "";
  return `${out.join("\n")}\n${rule}`;
}

/** A stack's section: full, or without the unit diff and steps (`short`). */
function section(s: StackReview, short: boolean): string {
  const head = `<details><summary><b>${cell(s.stack)}</b>: ${cell(s.effect)}${s.changes.length ? `, ${changeWords(s, 120, LISTED.inSection)}` : ""}</summary>\n\n`;
  const parts = [`Touched because: ${cell(s.because)}. Host: ${cell(s.host)}.`, ""];
  if (s.error) parts.push("The preview failed:", "", fence(cap(s.error, short ? 600 : 4000), "text"), "");
  if (s.changes.length) parts.push("Settings that change: " + s.changes.map((c) => code(c.words)).join(", ") + ".", "");
  if (s.hostView) {
    if (short) parts.push(`On the host: ${cell(s.hostView.split("\n")[0], 400)} (the unit's lines are left out for length).`, "");
    else parts.push("On the host, against what it really runs now:", "", fence(cap(s.hostView, 12_000), "diff"), "");
  }
  const changing = s.steps.filter((st) => st.op !== "same");
  if (!short && changing.length) parts.push("Steps of `up`: " + changing.map((st) => `${code(st.resource)} ${cell(st.op)}${st.keys.length ? ` (${cell(st.keys.join(", "))})` : ""}`).join("; ") + ".", "");
  parts.push(benchTable(s.benchmark));
  return `${head}${parts.join("\n")}\n</details>\n\n`;
}

const PER_STACK = "### Per stack\n\n";

/**
 * Pure: the whole document, at most `limit` characters. Sections are added in the summary's
 * order while they fit, each full or else short; a note at the end names the stacks whose
 * section was shortened or left out.
 */
export function renderReview(doc: ReviewDocument, limit = COMMENT_LIMIT): string {
  // The summary's length as if every section were left out (its longest form): the rows of
  // those really left out then say so, and the summary is no longer than the room kept for it.
  const bound = summary(doc, limit - 2000).length + PER_STACK.length;
  const footer = (shortened: string[], omitted: string[]) => {
    const notes: string[] = [];
    if (shortened.length) notes.push(`Shortened to fit one comment (unit lines and steps left out): ${shortened.map(code).join(", ")}.`);
    if (omitted.length) notes.push(`Left out to fit one comment: the sections of ${omitted.map(code).join(", ")}. \`npm run review -- --stacks <name>\` shows one in full.`);
    return notes.length ? `\n> [!NOTE]\n> ${notes.join("\n> ")}\n` : "";
  };
  const names = doc.stacks.map((s) => s.stack);
  // Room for the longest possible note: every stack named in it.
  const reserve = footer(names, names).length;
  let body = "";
  const shortened: string[] = [];
  const omitted: string[] = [];
  for (const s of doc.stacks) {
    const full = section(s, false);
    if (bound + body.length + full.length + reserve <= limit) {
      body += full;
      continue;
    }
    const brief = section(s, true);
    if (bound + body.length + brief.length + reserve <= limit) {
      body += brief;
      shortened.push(s.stack);
    } else {
      omitted.push(s.stack);
    }
  }
  const head = summary(doc, limit - 2000, new Set(omitted));
  const text = `${head}${body ? `${PER_STACK}${body}` : ""}${footer(shortened, omitted)}`;
  // The summary alone over the limit (thousands of stacks): cut, saying so, rather than be refused.
  return text.length <= limit ? text : `${text.slice(0, limit - 120)}\n\n> [!NOTE]\n> Cut at ${limit} characters: the summary alone is longer.\n`;
}
