// Pure rendering of the comparison across stacks: a Markdown table and an SVG chart, best
// row marked.
import type { BenchmarkResult, LatencyStats } from "./run";
import type { HistoryRecord } from "./history";

export interface ReportRow {
  stack: string;
  configuration: Record<string, unknown>;
  result: BenchmarkResult | null;
  takenAt?: string;
  /** Seconds of the last restart (drain + stop + GPU release + load-to-ready). */
  restartSeconds?: number;
  /**
   * deployed: the stack's outputs; destroyed: its outputs are gone (or the stack too) and the
   * numbers are the last ones kept (history.ts); never deployed: a stack with no outputs and
   * nothing kept. Absent: deployed.
   */
  status?: "deployed" | "destroyed" | "never deployed";
  /** Every kept run of the stack, oldest first (history.ts). */
  runs?: HistoryRecord[];
}

/**
 * Pure: the rows of the stacks read from a backend, with what the project kept of their
 * benchmarks (`records`, oldest first): a stack without outputs that was measured before is
 * "destroyed" and shows its last kept numbers; one never measured is "never deployed"; a stack
 * removed from the backend whose numbers were kept (and whose name matches `glob`) comes back
 * as "destroyed". Every row carries its kept runs.
 */
export function withHistory(rows: ReportRow[], records: HistoryRecord[], glob: string): ReportRow[] {
  const match = globMatcher(glob);
  const runsOf = (stack: string) => records.filter((r) => r.stack === stack);
  const out: ReportRow[] = rows.map((row) => {
    const runs = runsOf(row.stack);
    if (Object.keys(row.configuration).length > 0) return { ...row, status: "deployed", runs };
    const last = runs[runs.length - 1];
    if (!last) return { ...row, status: "never deployed", runs };
    return { stack: row.stack, configuration: last.configuration, result: last.result, takenAt: last.takenAt, status: "destroyed", runs };
  });
  const gone = [...new Set(records.map((r) => r.stack))].filter((s) => match(s) && !rows.some((r) => r.stack === s));
  for (const stack of gone) {
    const runs = runsOf(stack);
    const last = runs[runs.length - 1];
    out.push({ stack, configuration: last.configuration, result: last.result, takenAt: last.takenAt, status: "destroyed", runs });
  }
  return out.sort((a, b) => a.stack.localeCompare(b.stack));
}

function describe(c: Record<string, unknown>): string {
  // Every deployed stack's output names at least the stack; none at all: never deployed.
  if (Object.keys(c).length === 0) return "never deployed";
  if (c.algorithm === null || c.algorithm === undefined) return "no speculation";
  const parts = [String(c.algorithm)];
  if (c.budget !== undefined) parts.push(`budget ${c.budget}`);
  if (c.topk !== undefined) parts.push(`topk ${c.topk}`);
  parts.push(`window ${c.draftWindowSize ?? "none"}`);
  if (c.compactCache) parts.push("compact cache");
  return parts.join(", ");
}

const fmt = (x: number | null | undefined, digits = 1) => (x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(digits));

/** Stacks with results, best (highest short-context tokens/s) first is not implied: rows keep input order. */
export function bestStack(rows: ReportRow[]): string | undefined {
  let best: ReportRow | undefined;
  for (const r of rows) if (r.result && (!best || r.result.short.output_throughput > best.result!.short.output_throughput)) best = r;
  return best?.stack;
}

export function renderMarkdown(rows: ReportRow[]): string {
  const best = bestStack(rows);
  const longs = [...new Set(rows.flatMap((r) => r.result?.long.map((l) => l.context_tokens) ?? []))].sort((a, b) => a - b);
  const head = ["stack", "configuration", "tok/s short (min-max)", ...longs.map((c) => `tok/s ${c} ctx`), "TTFT ms (median)", "accept length", "coding", "restart s"];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i < 2 ? "---" : "---:")).join("|")}|`];
  for (const r of rows) {
    const b = r.result;
    const when = r.status === "destroyed" ? ` (destroyed; measured ${r.takenAt?.slice(0, 16).replace("T", " ") ?? "?"})` : r.status === "never deployed" ? " (never deployed)" : "";
    const name = `${r.stack === best ? `**${r.stack}** (best)` : r.stack}${when}`;
    if (!b) {
      lines.push(`| ${name} | ${describe(r.configuration)} | no benchmark |${longs.map(() => " - |").join("")} - | - | - | ${fmt(r.restartSeconds)} |`);
      continue;
    }
    const longCells = longs.map((c) => fmt(b.long.find((l) => l.context_tokens === c)?.output_throughput));
    const coding = b.coding ? `${b.coding.passed}/${b.coding.tasks}${b.coding.extraction_failed ? ` (${b.coding.extraction_failed} unextractable)` : ""}` : "-";
    lines.push(`| ${name} | ${describe(r.configuration)} | ${fmt(b.short.output_throughput)} (${fmt(b.short.output_throughput_min)}-${fmt(b.short.output_throughput_max)}) | ${longCells.join(" | ")}${longs.length ? " | " : ""}${fmt(b.short.median_ttft_ms, 0)} | ${fmt(b.accept_length, 2)} | ${coding} | ${fmt(r.restartSeconds)} |`);
  }
  return lines.join("\n") + "\n" + renderHistory(rows);
}

/** Pure: every run of the stacks measured more than once, oldest first (nothing when none was). */
export function renderHistory(rows: ReportRow[]): string {
  const many = rows.filter((r) => (r.runs?.length ?? 0) > 1);
  if (many.length === 0) return "";
  const lines = ["", "### Every run of the stacks measured more than once", "", "| stack | taken at | unit | host | configuration | tok/s short | accept length | coding |", "|---|---|---|---|---|---:|---:|---|"];
  for (const r of many) {
    for (const run of r.runs!) {
      const c = run.result.coding;
      lines.push(`| ${r.stack} | ${run.takenAt.slice(0, 19).replace("T", " ")} | ${run.unitHash.slice(0, 12)} | ${run.host} | ${describe(run.configuration)} | ${fmt(run.result.short.output_throughput)} | ${fmt(run.result.accept_length, 2)} | ${c ? `${c.passed}/${c.tasks}` : "-"} |`);
    }
  }
  return lines.join("\n") + "\n";
}

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

// ---------------------------------------------------------------------------------
// The chart: one row per stack (name and configuration), and side by side, on a shared
// scale per kind, what a person choosing a configuration compares: single-stream decode
// tokens/s at short and at each long context (bar: median, whisker: min-max over the runs),
// acceptance length, and the coding check's pass rate. The best row is highlighted and
// tagged. Everything is laid out from the rows alone (no clock, no randomness), so the same
// rows give the same bytes, and from an estimate of text widths that errs wide, so that no
// text runs past the edge whatever the names.

/**
 * Pure: "nice" axis ticks from 0 to at least `max`: about `target` steps of 1, 2, 2.5 or 5
 * times a power of ten (so 0, 50, 100, 150, 200 for 183, not 0, 46, 92, 137, 183).
 */
export function niceTicks(max: number, target = 4): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const raw = max / target;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw * (1 - 1e-9))!;
  const count = Math.ceil(max / step - 1e-9);
  // Rounded through toFixed so that 3 * 0.1 is 0.3, not 0.30000000000000004.
  return Array.from({ length: count + 1 }, (_, i) => Number((i * step).toFixed(10)));
}

/**
 * Pure: an upper estimate of the width of `text` in px, in a common sans-serif. Each class
 * of characters counts as its widest member in DejaVu Sans (the default sans-serif of Debian
 * and its derivatives, and wider than Arial or Helvetica): digits 0.636 em, lower case 0.635
 * but i j l f t r (at most 0.411) and m w (0.974), capitals 0.787 but M W (0.989), space
 * 0.318, brackets, hyphen and slash 0.390, en dash 0.5; bold is up to 12% wider. Anything
 * else counts as a full em.
 */
export function textWidth(text: string, fontSize: number, bold = false): number {
  let em = 0;
  for (const ch of text) {
    if (/[0-9]/.test(ch)) em += 0.64;
    else if (/[ijlftr.,:;'|!]/.test(ch)) em += 0.42;
    else if (/[mwMW]/.test(ch)) em += 1.0;
    else if (/[a-z]/.test(ch)) em += 0.64;
    else if (/[A-Z]/.test(ch)) em += 0.8;
    else if (ch === " ") em += 0.32;
    else if (/[()[\]\-/]/.test(ch)) em += 0.4;
    else if (ch === "\u2013") em += 0.5;
    else em += 1.0;
  }
  return em * fontSize * (bold ? 1.12 : 1);
}

const FONT = 12;
const SMALL = 11;
const TITLE = 15;
const MARGIN = 16;
const ROW_H = 40;
const BAR_H = 14;
const GAP = 28;
const BEST_FILL = "#2e7d32";
const BAR_FILL = "#5c6bc0";
const GREY = "#616161";

/** One bar of a panel: the value (median), its spread if measured, its label and tooltip. */
interface Cell {
  value: number;
  min?: number;
  max?: number;
  label: string;
  tooltip: string;
}

interface Panel {
  heading: string;
  detail: string;
  plotWidth: number;
  ticks: number[];
  tickLabel: (v: number) => string;
  /** Per row; a string where the row has no value (why). */
  cells: (Cell | string)[];
}

const uniform = <T>(values: T[]): T | undefined => (values.length > 0 && values.every((v) => v === values[0]) ? values[0] : undefined);

/** Pure: what each panel shows, for every row. */
function panels(rows: ReportRow[]): Panel[] {
  const results = rows.map((r) => r.result);
  const measured = results.filter((b): b is BenchmarkResult => b !== null);
  const longs = [...new Set(measured.flatMap((b) => b.long.map((l) => l.context_tokens)))].sort((a, b) => a - b);
  const speeds = measured.flatMap((b) => [b.short, ...b.long]);
  const tokensTicks = niceTicks(Math.max(0, ...speeds.map((l) => Math.max(l.output_throughput, l.output_throughput_max))));
  const speedCell = (stack: string, l: LatencyStats, what: string): Cell => ({
    value: l.output_throughput,
    min: l.output_throughput_min,
    max: l.output_throughput_max,
    // The spread in numbers too: run to run, it is often narrower than a whisker can show.
    label: `${fmt(l.output_throughput)} (${fmt(l.output_throughput_min)}–${fmt(l.output_throughput_max)})`,
    tooltip: `${stack}, ${what}: ${fmt(l.output_throughput)} tok/s, median of ${l.runs} runs (min ${fmt(l.output_throughput_min)}, max ${fmt(l.output_throughput_max)})`,
  });
  const shortPrompt = uniform(measured.map((b) => b.short.prompt_tokens));
  const speedPanel = (detail: string, pick: (b: BenchmarkResult) => LatencyStats | undefined, what: string): Panel => ({
    heading: "Decode tokens/s",
    detail,
    plotWidth: 170,
    ticks: tokensTicks,
    tickLabel: (v) => String(v),
    cells: rows.map((r) => {
      const l = r.result ? pick(r.result) : undefined;
      return l ? speedCell(r.stack, l, what) : r.result ? "not measured" : "no benchmark";
    }),
  });
  const accepts = measured.map((b) => b.accept_length).filter((a): a is number => a !== null);
  return [
    speedPanel(shortPrompt ? `short prompt (${shortPrompt} tokens)` : "short prompt", (b) => b.short, "short prompt"),
    ...longs.map((c) => speedPanel(`at ${c}-token context`, (b) => b.long.find((l) => l.context_tokens === c), `${c}-token context`)),
    {
      heading: "Acceptance length",
      detail: "tokens per verify step",
      plotWidth: 110,
      ticks: niceTicks(Math.max(0, ...accepts)),
      tickLabel: (v) => String(v),
      cells: rows.map((r) => {
        const a = r.result?.accept_length;
        if (a === null || a === undefined) return r.result ? "not reported" : "-";
        return { value: a, label: fmt(a, 2), tooltip: `${r.stack}: acceptance length ${fmt(a, 2)} (${r.result!.accept_length_source})` };
      }),
    },
    {
      heading: "Coding check",
      detail: "tasks passed",
      plotWidth: 110,
      ticks: niceTicks(100, 2),
      tickLabel: (v) => `${v}%`,
      cells: rows.map((r) => {
        const c = r.result?.coding;
        if (!c) return r.result ? "off" : "-";
        const notes = [c.extraction_failed ? `${c.extraction_failed} without extractable code` : "", c.timeouts ? `${c.timeouts} timed out` : ""].filter(Boolean);
        return { value: c.tasks ? (100 * c.passed) / c.tasks : 0, label: `${c.passed}/${c.tasks}`, tooltip: `${r.stack}: ${c.passed} of ${c.tasks} coding tasks passed${notes.length ? ` (${notes.join(", ")})` : ""}` };
      }),
    },
  ];
}

/** Pure: the comparison chart as SVG, laid out from the rows (see above). */
export function renderSvg(rows: ReportRow[]): string {
  const best = bestStack(rows);
  const ps = panels(rows);
  const runs = uniform(rows.flatMap((r) => (r.result ? [r.result.short.runs, ...r.result.long.map((l) => l.runs)] : [])));
  const title = "Decode speed, acceptance length and coding check by configuration";
  const subtitle = `Bars: median${runs ? ` of ${runs} runs` : ""}, single stream; whiskers: min to max. Best: the highest median tokens/s with the short prompt.`;
  const tag = "best";
  const tagWidth = textWidth(tag, 10, true) + 10;

  // Columns: the labels, then each panel (plot, then room for the value labels and the last tick label).
  const labelWidth = Math.ceil(Math.max(
    60,
    ...rows.map((r) => Math.max(textWidth(r.stack, FONT, true) + (r.stack === best ? 8 + tagWidth : 0), textWidth(describe(r.configuration), SMALL))),
  ));
  const columns: { panel: Panel; left: number; width: number }[] = [];
  let x = MARGIN + labelWidth + GAP;
  for (const panel of ps) {
    const valueRoom = Math.max(0, ...panel.cells.map((c) => (typeof c === "string" ? textWidth(c, SMALL) - panel.plotWidth : textWidth(c.label, SMALL) + 6)));
    const lastTick = textWidth(panel.tickLabel(panel.ticks[panel.ticks.length - 1]), SMALL) / 2;
    const width = Math.ceil(Math.max(panel.plotWidth + Math.max(valueRoom, lastTick), textWidth(panel.heading, FONT, true), textWidth(panel.detail, SMALL)));
    columns.push({ panel, left: x, width });
    x += width + GAP;
  }
  const width = Math.ceil(Math.max(x - GAP + MARGIN, 2 * MARGIN + textWidth(title, TITLE, true), 2 * MARGIN + textWidth(subtitle, SMALL)));
  const top = 96;
  const axisY = top + rows.length * ROW_H + 4;
  const height = axisY + 32;
  const rowMid = (i: number) => top + i * ROW_H + ROW_H / 2;
  const num = (v: number) => (Math.round(v * 10) / 10).toString();

  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="${FONT}">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${MARGIN}" y="26" font-size="${TITLE}" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${MARGIN}" y="45" font-size="${SMALL}" fill="${GREY}">${escapeXml(subtitle)}</text>`,
  ];
  rows.forEach((r, i) => {
    if (r.stack !== best) return;
    parts.push(`<rect x="${MARGIN / 2}" y="${top + i * ROW_H + 2}" width="${width - MARGIN}" height="${ROW_H - 4}" rx="4" fill="#e8f5e9"/>`);
  });
  for (const { panel, left } of columns) {
    const axisMax = panel.ticks[panel.ticks.length - 1];
    const at = (v: number) => left + (Math.min(Math.max(v, 0), axisMax) / axisMax) * panel.plotWidth;
    parts.push(
      `<text x="${left}" y="${top - 24}" font-weight="bold">${escapeXml(panel.heading)}</text>`,
      `<text x="${left}" y="${top - 9}" font-size="${SMALL}" fill="${GREY}">${escapeXml(panel.detail)}</text>`,
    );
    for (const t of panel.ticks) {
      parts.push(
        `<line x1="${num(at(t))}" x2="${num(at(t))}" y1="${top}" y2="${axisY}" stroke="#e0e0e0"/>`,
        `<text x="${num(at(t))}" y="${axisY + 16}" font-size="${SMALL}" text-anchor="middle" fill="${GREY}">${escapeXml(panel.tickLabel(t))}</text>`,
      );
    }
    parts.push(`<line x1="${left}" x2="${left + panel.plotWidth}" y1="${axisY}" y2="${axisY}" stroke="#9e9e9e"/>`);
    panel.cells.forEach((cell, i) => {
      const mid = rowMid(i);
      if (typeof cell === "string") {
        parts.push(`<text x="${left}" y="${mid + 4}" font-size="${SMALL}" font-style="italic" fill="${GREY}">${escapeXml(cell)}</text>`);
        return;
      }
      const fill = rows[i].stack === best ? BEST_FILL : BAR_FILL;
      parts.push(`<rect x="${left}" y="${mid - BAR_H / 2}" width="${num(at(cell.value) - left)}" height="${BAR_H}" fill="${fill}"><title>${escapeXml(cell.tooltip)}</title></rect>`);
      let end = at(cell.value);
      if (cell.min !== undefined && cell.max !== undefined) {
        const [x1, x2] = [num(at(cell.min)), num(at(cell.max))];
        parts.push(
          `<line x1="${x1}" x2="${x2}" y1="${mid}" y2="${mid}" stroke="#212121" stroke-width="1.5"/>`,
          `<line x1="${x1}" x2="${x1}" y1="${mid - 5}" y2="${mid + 5}" stroke="#212121" stroke-width="1.5"/>`,
          `<line x1="${x2}" x2="${x2}" y1="${mid - 5}" y2="${mid + 5}" stroke="#212121" stroke-width="1.5"/>`,
        );
        end = Math.max(end, at(cell.max));
      }
      parts.push(`<text x="${num(end + 5)}" y="${mid + 4}" font-size="${SMALL}">${escapeXml(cell.label)}</text>`);
    });
  }
  rows.forEach((r, i) => {
    const mid = rowMid(i);
    const isBest = r.stack === best;
    parts.push(`<text x="${MARGIN}" y="${mid - 3}"${isBest ? ` font-weight="bold" fill="${BEST_FILL}"` : ""}>${escapeXml(r.stack)}</text>`);
    if (isBest) {
      const tagX = MARGIN + textWidth(r.stack, FONT, true) + 8;
      parts.push(
        `<rect x="${num(tagX)}" y="${mid - 15}" width="${num(tagWidth)}" height="15" rx="3" fill="${BEST_FILL}"/>`,
        `<text x="${num(tagX + tagWidth / 2)}" y="${mid - 4}" font-size="10" font-weight="bold" text-anchor="middle" fill="#ffffff">${tag}</text>`,
      );
    }
    parts.push(`<text x="${MARGIN}" y="${mid + 12}" font-size="${SMALL}" fill="${GREY}">${escapeXml(describe(r.configuration))}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n") + "\n";
}

/** Shell-style glob (`*`, `?`) to a whole-name matcher. */
export function globMatcher(glob: string): (name: string) => boolean {
  const re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);
  return (name) => re.test(name);
}
