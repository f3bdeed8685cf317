// Pure: the review as one Markdown document, ready to post as a pull-request comment: a
// summary table of every stack first, warnings, the rollout order, then one collapsed
// section per stack. Never longer than the limit, whatever the number of stacks: the summary
// is kept whole, the sections trimmed (shortest form first) and what was left out said.
import type { Figures } from "../benchmark/compare";
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
  /** Expected downtime, from the host's last measured restart. */
  downtime?: { seconds: number; from: string };
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
}

const esc = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
const cap = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);
const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));

export function changeWords(s: StackReview): string {
  if (s.because === "new stack file" && s.changes.length > 20) return "new stack";
  const words = s.changes.map((c) => c.words).join(", ");
  if (words) return cap(words, 160);
  return s.because === "project config changed" ? "none of its settings (Pulumi.yaml changed elsewhere)" : "no setting";
}

function effectCell(s: StackReview): string {
  switch (s.effect) {
    case "restart": {
      // A restart that the host's takeover causes, not the change: say so.
      const owner = / runs the unit of stack (\S+) \(/.exec(s.hostView.split("\n")[0] ?? "")?.[1];
      return owner ? `**restart** (host serves \`${owner}\`)` : s.hostView.includes("`up` installs") ? "**restart** (installs)" : "**restart**";
    }
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
  return s.downtime ? `~${fmt(s.downtime.seconds)} s` : "unknown (no restart measured on this host)";
}

/** Warnings of a stack, its own and those its preview showed. */
export function warningsOf(s: StackReview): string[] {
  const out = [...s.warnings];
  if (s.effect === "preview failed") out.push(`its preview failed: ${cap(s.error?.split("\n")[0] ?? "", 300)}`);
  return out;
}

function summary(doc: ReviewDocument): string {
  const restarts = doc.stacks.filter((s) => s.effect === "restart").length;
  const lines = [
    MARKER,
    `## Stack review: ${doc.stacks.length} stack${doc.stacks.length === 1 ? "" : "s"}, ${restarts} restart${restarts === 1 ? "" : "s"}`,
    "",
    `\`${doc.head.slice(0, 12)}\` against \`${doc.base.slice(0, 12)}\`, previewed ${doc.createdAt} against \`${doc.backend}\` and the hosts.`,
    "",
  ];
  if (doc.stacks.length === 0) lines.push("This change touches no stack: no stack file, and not Pulumi.yaml.", "");
  const warned = doc.stacks.flatMap((s) => warningsOf(s).map((w) => `- **${s.stack}**: ${esc(cap(w, 400))}`));
  if (warned.length) lines.push("> [!WARNING]", ...warned.map((w) => `> ${w}`), "");
  if (doc.stacks.length) {
    lines.push("| Stack | Host | What changes | Restart | Expected downtime | Rollout |", "|---|---|---|---|---|---|");
    for (const s of doc.stacks) {
      const order = s.order ? `${s.order.position} of ${s.order.of} on this host` : "";
      lines.push(`| \`${s.stack}\` | ${esc(s.host)} | ${esc(changeWords(s))} | ${effectCell(s)} | ${downtimeCell(s)} | ${order} |`);
    }
    lines.push("");
  }
  const shared = [...new Set(doc.stacks.filter((s) => s.order).map((s) => s.host))];
  if (shared.length) {
    lines.push("Rollout order where stacks share a host (`npm run apply` follows it; each `up` replaces the one before it on that host, and the stack serving there now goes last):", "");
    for (const host of shared) lines.push(`- ${host}: ${doc.stacks.filter((s) => s.host === host && s.order).sort((a, b) => a.order!.position - b.order!.position).map((s) => `\`${s.stack}\``).join(" -> ")}`);
    lines.push("");
  }
  if (doc.removed.length) lines.push(`Stack files removed: ${doc.removed.map((s) => `\`${s}\``).join(", ")}. Nothing previews them, and their hosts keep what they run: \`npx pulumi destroy --stack <name>\` takes one down.`, "");
  return `${lines.join("\n")}\n`;
}

function benchTable(b: StackReview["benchmark"]): string {
  const cols = [b.self && { name: `this stack (\`${b.self.stack}\`, ${b.self.takenAt.slice(0, 16)})`, f: b.self.figures }, b.serving && { name: `serving now (\`${b.serving.stack}\`, ${b.serving.takenAt.slice(0, 16)})`, f: b.serving.figures }].filter(
    (c): c is { name: string; f: Figures } => !!c,
  );
  if (!cols.length) return "No benchmark of this stack or of the configuration serving now is in state.\n";
  const rows: [string, (f: Figures) => number | null][] = [
    [`decode tok/s, short (${cols[0].f.shortPromptTokens} tokens)`, (f) => f.short.median],
    ...[...new Set(cols.flatMap((c) => c.f.long.map((l) => l.contextTokens)))].map((ctx): [string, (f: Figures) => number | null] => [`decode tok/s, ${ctx} tokens`, (f) => f.long.find((l) => l.contextTokens === ctx)?.decode.median ?? null]),
    ...[...new Set(cols.flatMap((c) => c.f.concurrency.map((l) => l.level)))].map((lvl): [string, (f: Figures) => number | null] => [`output tok/s at ${lvl} concurrent`, (f) => f.concurrency.find((l) => l.level === lvl)?.outputThroughput ?? null]),
    ["accept length", (f) => f.acceptLength],
    ["median TTFT, ms", (f) => f.medianTtftMs],
  ];
  const two = cols.length === 2;
  const out = [`| | ${cols.map((c) => c.name).join(" | ")}${two ? " | difference |" : " |"}`, `|---|${cols.map(() => "---:").join("|")}|${two ? "---:|" : ""}`];
  for (const [name, get] of rows) {
    const v = cols.map((c) => get(c.f));
    const diff = two && v[0] !== null && v[1] !== null && v[1] !== 0 ? `${v[0]! >= v[1]! ? "+" : ""}${(((v[0]! - v[1]!) / v[1]!) * 100).toFixed(1)}%` : "";
    out.push(`| ${name} | ${v.map((x) => (x === null ? "" : fmt(Math.round(x * 100) / 100))).join(" | ")}${two ? ` | ${diff} |` : " |"}`);
  }
  const coding = cols.map((c) => (c.f.coding ? `${c.f.coding.passed}/${c.f.coding.tasks}` : "not run"));
  out.push(`| coding check | ${coding.join(" | ")}${two ? " | |" : " |"}`);
  return `${out.join("\n")}\n`;
}

/** A stack's section: full, or without the unit diff and steps (`short`). */
function section(s: StackReview, short: boolean): string {
  const head = `<details><summary><b>${s.stack}</b>: ${s.effect}${s.changes.length ? `, ${esc(cap(changeWords(s), 120))}` : ""}</summary>\n\n`;
  const parts = [`Touched because: ${s.because}. Host: ${s.host}.`, ""];
  if (s.error) parts.push("The preview failed:", "", "```text", cap(s.error, short ? 600 : 4000), "```", "");
  if (s.changes.length) parts.push("Settings that change: " + s.changes.map((c) => `\`${c.words}\``).join(", ") + ".", "");
  if (s.hostView) {
    if (short) parts.push(`On the host: ${esc(cap(s.hostView.split("\n")[0], 400))} (the unit's lines are left out for length).`, "");
    else parts.push("On the host, against what it really runs now:", "", "```diff", cap(s.hostView, 12_000), "```", "");
  }
  const changing = s.steps.filter((st) => st.op !== "same");
  if (!short && changing.length) parts.push("Steps of `up`: " + changing.map((st) => `\`${st.resource}\` ${st.op}${st.keys.length ? ` (${st.keys.join(", ")})` : ""}`).join("; ") + ".", "");
  parts.push(benchTable(s.benchmark));
  return `${head}${parts.join("\n")}\n</details>\n`;
}

/**
 * Pure: the whole document, at most `limit` characters. Sections are added in the summary's
 * order while they fit, each full or else short; a note at the end names the stacks whose
 * section was shortened or left out.
 */
export function renderReview(doc: ReviewDocument, limit = COMMENT_LIMIT): string {
  const head = summary(doc);
  const footer = (shortened: string[], omitted: string[]) => {
    const notes: string[] = [];
    if (shortened.length) notes.push(`Shortened to fit one comment (unit lines and steps left out): ${shortened.map((s) => `\`${s}\``).join(", ")}.`);
    if (omitted.length) notes.push(`Left out to fit one comment: the sections of ${omitted.map((s) => `\`${s}\``).join(", ")}. \`npm run review -- --stacks <name>\` shows one in full.`);
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
    if (head.length + body.length + full.length + reserve <= limit) {
      body += full;
      continue;
    }
    const brief = section(s, true);
    if (head.length + body.length + brief.length + reserve <= limit) {
      body += brief;
      shortened.push(s.stack);
    } else {
      omitted.push(s.stack);
    }
  }
  const text = `${head}${body ? `### Per stack\n\n${body}` : ""}${footer(shortened, omitted)}`;
  // The summary alone over the limit (thousands of stacks): cut, saying so, rather than be refused.
  return text.length <= limit ? text : `${text.slice(0, limit - 120)}\n\n> [!NOTE]\n> Cut at ${limit} characters: the summary alone is longer.\n`;
}
