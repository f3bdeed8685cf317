// Pure rendering of the comparison across stacks: a Markdown table and an SVG chart
// (tokens/s by configuration, with spread), best row marked.
import type { BenchmarkResult } from "./run";

export interface ReportRow {
  stack: string;
  configuration: Record<string, unknown>;
  result: BenchmarkResult | null;
  takenAt?: string;
  /** Seconds of the last restart (drain + stop + GPU release + load-to-ready). */
  restartSeconds?: number;
}

function describe(c: Record<string, unknown>): string {
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
    const name = r.stack === best ? `**${r.stack}** (best)` : r.stack;
    if (!b) {
      lines.push(`| ${name} | ${describe(r.configuration)} | no benchmark |${longs.map(() => " - |").join("")} - | - | - | ${fmt(r.restartSeconds)} |`);
      continue;
    }
    const longCells = longs.map((c) => fmt(b.long.find((l) => l.context_tokens === c)?.output_throughput));
    const coding = b.coding ? `${b.coding.passed}/${b.coding.tasks}${b.coding.extraction_failed ? ` (${b.coding.extraction_failed} unextractable)` : ""}` : "-";
    lines.push(`| ${name} | ${describe(r.configuration)} | ${fmt(b.short.output_throughput)} (${fmt(b.short.output_throughput_min)}-${fmt(b.short.output_throughput_max)}) | ${longCells.join(" | ")}${longs.length ? " | " : ""}${fmt(b.short.median_ttft_ms, 0)} | ${fmt(b.accept_length, 2)} | ${coding} | ${fmt(r.restartSeconds)} |`);
  }
  return lines.join("\n") + "\n";
}

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** Horizontal bars: median short-context tokens/s per stack, whiskers min-max, best bar highlighted. */
export function renderSvg(rows: ReportRow[]): string {
  const measured = rows.filter((r) => r.result);
  const best = bestStack(rows);
  const barH = 26;
  const gap = 10;
  const left = 150;
  const width = 640;
  const plotW = width - left - 70;
  const top = 40;
  const height = top + measured.length * (barH + gap) + 40;
  const max = Math.max(1, ...measured.map((r) => r.result!.short.output_throughput_max));
  const x = (v: number) => left + (v / max) * plotW;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>Single-stream decode tokens/s by configuration</title>`,
    `<text x="${left}" y="20" font-size="14" font-weight="bold">Decode tokens/s (short context, median; whiskers: min-max)</text>`,
  ];
  measured.forEach((r, i) => {
    const s = r.result!.short;
    const y = top + i * (barH + gap);
    const fill = r.stack === best ? "#2e7d32" : "#5c6bc0";
    parts.push(
      `<text x="${left - 8}" y="${y + barH / 2 + 4}" text-anchor="end">${escapeXml(r.stack)}</text>`,
      `<rect x="${left}" y="${y}" width="${(x(s.output_throughput) - left).toFixed(1)}" height="${barH}" fill="${fill}"><title>${escapeXml(`${r.stack}: ${s.output_throughput} tok/s`)}</title></rect>`,
      `<line x1="${x(s.output_throughput_min).toFixed(1)}" x2="${x(s.output_throughput_max).toFixed(1)}" y1="${y + barH / 2}" y2="${y + barH / 2}" stroke="#212121" stroke-width="2"/>`,
      `<text x="${(x(s.output_throughput_max) + 6).toFixed(1)}" y="${y + barH / 2 + 4}">${fmt(s.output_throughput)}${r.stack === best ? " (best)" : ""}</text>`,
    );
  });
  const axisY = top + measured.length * (barH + gap) + 5;
  parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${axisY}" y2="${axisY}" stroke="#9e9e9e"/>`);
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4;
    parts.push(`<text x="${x(v).toFixed(1)}" y="${axisY + 16}" text-anchor="middle" fill="#616161">${v.toFixed(0)}</text>`);
  }
  parts.push("</svg>");
  return parts.join("\n") + "\n";
}

/** Shell-style glob (`*`, `?`) to a whole-name matcher. */
export function globMatcher(glob: string): (name: string) => boolean {
  const re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);
  return (name) => re.test(name);
}
