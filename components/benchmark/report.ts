// Pure rendering of the comparison across stacks: a Markdown table and an SVG chart, the
// best row marked (or the rows of a tie), from the verdicts of components/verdict/.
import type { HistoryRecord } from "./history";
import { DecodeRate, figuresOf, Figures } from "./compare";
import { otherSettings, provenanceOf, warned, type ReportRow } from "../verdict/rows";
import { choose, ratioText, speedups, type Choice, type Speedup } from "../verdict/choose";
import type { Comparison, Estimate } from "../verdict/rule";
import { alwaysValidHalfWidth, UNMEASURED_OFFSET_FACTOR } from "../verdict/rule";
import { DEFAULT_VERDICT, type VerdictSettings } from "../verdict/schema";
import { BEST, bestHeading, chartWords, comparisonWord, EQUAL_WITHIN, INCONCLUSIVE, NO_BEST_HEADING, NONE_NAMED, TIE, tieHeading, tieWord, type Mark } from "../verdict/words";

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

/** The choice as the table marks a row: "(best)" or "(tie)" (components/verdict/words.ts). */
function choiceMark(choice: Choice, stack: string): Mark | undefined {
  if (choice.kind === "winner") return choice.stack === stack ? BEST : undefined;
  if (choice.kind === "tie") return choice.stacks.includes(stack) ? TIE : undefined;
  return undefined;
}

/** A speedup as a cell says it: the ratio, its interval, and "equal within X %" or "inconclusive" where the rule finds it neither faster nor slower. */
const undecided = (c: Comparison) => c.verdict === "equal" || c.verdict === "inconclusive";
const times = (c: Comparison | undefined) => (c === undefined ? "" : `, ${ratioText(c)}${undecided(c) ? ` ${comparisonWord(c)}` : ""}`);
const spread = (d: DecodeRate) => `${fmt(d.median)} (${fmt(d.min)}-${fmt(d.max)})`;
const minute = (iso: string | undefined) => (iso ? iso.slice(0, 16).replace("T", " ") : "-");
const MARK = "†";
/** A row whose benchmark warned: shown, never best nor a baseline. */
const WARNED = "‡";

/**
 * Pure: the comparison table, one row per stack: single-stream decode tokens/s (short prompt
 * with its spread, each long context) and output tokens/s per concurrency level, each with
 * its speedup over its baseline and that speedup's interval, TTFT, acceptance length, coding
 * check, restart time, and where, on what and when it was measured; under it, the choice of
 * the best configuration (or the tie, or why none) with the rule's estimates, the baselines
 * used (or why none), the rows measured under other settings, the benchmarks' warnings, and
 * every run of the stacks measured more than once.
 */
export function renderMarkdown(rows: ReportRow[], s: VerdictSettings = DEFAULT_VERDICT): string {
  const choice = choose(rows, s);
  const gains = speedups(rows, s);
  const flagged = otherSettings(rows);
  const figures = new Map(rows.map((r) => [r.stack, r.result ? figuresOf(r.result) : undefined]));
  const all = [...figures.values()].filter((f): f is Figures => f !== undefined);
  const longs = [...new Set(all.flatMap((f) => f.long.map((l) => l.contextTokens)))].sort((a, b) => a - b);
  const levels = [...new Set(all.flatMap((f) => f.concurrency.map((c) => c.level)))].sort((a, b) => a - b);
  const head = [
    "stack",
    "configuration",
    "decode tok/s short (min-max)",
    ...longs.map((c) => `decode tok/s ${c} ctx`),
    ...levels.map((l) => `output tok/s ${l} concurrent`),
    "TTFT ms (median)",
    "accept length",
    "coding",
    "restart s",
    "host",
    "GPU",
    "SGLang",
    "measured (UTC)",
  ];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map((h) => (["stack", "configuration", "coding", "host", "GPU", "SGLang", "measured (UTC)"].includes(h) ? "---" : "---:")).join("|")}|`];
  for (const r of rows) {
    const f = figures.get(r.stack);
    const mark = choiceMark(choice, r.stack);
    const status = r.status === "destroyed" ? " (destroyed)" : r.status === "never deployed" ? " (never deployed)" : "";
    const name = `${mark === BEST ? `**${r.stack}** (${BEST})` : mark === TIE ? `${r.stack} (${TIE})` : r.stack}${status}${flagged.has(r.stack) ? ` ${MARK}` : ""}${r.result && warned(r.result) ? ` ${WARNED}` : ""}`;
    const where = provenanceOf(r);
    const tail = [fmt(r.restartSeconds), where.host ?? "-", where.gpu ?? "-", where.sglangVersion ?? "-", minute(where.takenAt)];
    if (!f) {
      lines.push(`| ${[name, describe(r.configuration), "no benchmark", ...longs.map(() => "-"), ...levels.map(() => "-"), "-", "-", "-", ...tail].join(" | ")} |`);
      continue;
    }
    const g = gains.get(r.stack);
    const longCells = longs.map((c) => {
      const l = f.long.find((x) => x.contextTokens === c);
      return l ? `${fmt(l.decode.median)}${times(g?.long.get(c))}` : "-";
    });
    const levelCells = levels.map((l) => {
      const c = f.concurrency.find((x) => x.level === l);
      return c ? `${fmt(c.outputThroughput)}${times(g?.concurrency.get(l))}` : "-";
    });
    const coding = f.coding ? `${f.coding.passed}/${f.coding.tasks}${f.coding.extraction_failed ? ` (${f.coding.extraction_failed} unextractable)` : ""}` : "-";
    lines.push(`| ${[name, describe(r.configuration), `${spread(f.short)}${times(g?.short)}`, ...longCells, ...levelCells, fmt(f.medianTtftMs, 0), fmt(f.acceptLength, 2), coding, ...tail].join(" | ")} |`);
  }
  const notes = [renderChoice(choice), renderSpeedups(gains, s), renderFlagged(flagged), renderWarnings(rows, figures)].filter((n) => n !== "");
  return `${lines.join("\n")}\n${notes.map((n) => `\n${n}`).join("")}${renderHistory(rows)}`;
}

const percent = (x: number) => `${(x * 100).toFixed(1).replace(/\.0$/, "")} %`;

/** Pure: an estimate as the report says it: value, its interval's half-width, and what it rests on. */
function estimateText(e: Estimate, runs: number, s: VerdictSettings): string {
  const half = Math.exp(alwaysValidHalfWidth(e.relSe * e.relSe, s.confidence)) - 1;
  const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
  return `${fmt(e.value)} ±${percent(half)} (${plural(e.launches, "launch", "launches")}${runs > e.launches ? ` of ${plural(runs, "run")}` : ""}, ${plural(e.requests, "request")})`;
}

/** Pure: the rule's settings in words. */
export function ruleText(s: VerdictSettings): string {
  return `A is faster than B only when the whole ${percent(s.confidence)} interval of A/B lies above ${(1 + s.threshold).toFixed(3)} (a difference under ${percent(s.threshold)} is none); "${EQUAL_WITHIN} ${percent(s.equalWithin)}" when it lies inside ±${percent(s.equalWithin)}, "${INCONCLUSIVE}" otherwise. Every interval is always valid: it holds however often the benchmark is re-run and this report read again. Each server launch of a configuration counts once; the launch-to-launch spread is measured from the relaunches of every row, pooled with an assumed ${percent(UNMEASURED_OFFSET_FACTOR * s.launchSd)} (twice verdict.launchSd, ${percent(s.launchSd)}), never below ${percent(s.launchSd)}; where nothing was relaunched, ${percent(UNMEASURED_OFFSET_FACTOR * s.launchSd)} is assumed (settings: components/verdict/schema.ts).`;
}

/** Pure: the paragraph that names the best configuration, or the tie, or why none, with the estimates it rests on and who was not eligible. */
function renderChoice(choice: Choice): string {
  let said: string;
  switch (choice.kind) {
    case "winner": {
      const others = choice.runnerUp ? `than every other eligible configuration (the closest, ${choice.runnerUp.stack}: ${ratioText(choice.runnerUp.comparison)}) and ` : "(the only eligible configuration) ";
      said = `${bestHeading(choice.stack)}: faster by the rule ${others}than ${choice.baseline.stack} (the baseline, no speculation: ${ratioText(choice.baseline.comparison)}), in short-context decode tok/s.`;
      break;
    }
    case "tie": {
      const base = choice.baseline ? ` ${choice.stacks[0]} is faster than ${choice.baseline.stack} (the baseline: ${ratioText(choice.baseline.comparison)}).` : ` No baseline was compared: ${choice.baselineWhy}.`;
      said = `${tieHeading(choice.stacks, tieWord(choice.against.map((a) => a.comparison)))}: the rule does not find ${choice.stacks[0]} faster than ${choice.stacks.length > 2 ? "each of the others" : "the other"} (${choice.against.map((a) => `${choice.stacks[0]} against ${a.stack}: ${ratioText(a.comparison)}, ${comparisonWord(a.comparison)}; it could detect ${(a.comparison.detectable * 100).toFixed(1)} %`).join("; ")}), so ${NONE_NAMED}.${base}`;
      break;
    }
    case "none":
      said = `${NO_BEST_HEADING}: ${choice.why}.`;
      break;
    default: {
      const never: never = choice;
      throw new Error(`unknown choice ${JSON.stringify(never)}`);
    }
  }
  const excluded = choice.excluded.map((e) => `${e.stack} (${e.why})`).join("; ");
  const estimates = choice.estimates.length ? ` Estimates (short-context decode tok/s, the mean of each launch's median): ${choice.estimates.map((e) => `${e.stack} ${estimateText(e.estimate, e.runs, choice.settings)}`).join("; ")}.` : "";
  return `${said}${excluded ? ` Not eligible: ${excluded}.` : ""}${estimates} The baseline (no speculation) is never ${BEST}. ${ruleText(choice.settings)}\n`;
}

/** Pure: which baseline each speedup divides by, and the configurations without one (why). */
function renderSpeedups(gains: Map<string, Speedup>, s: VerdictSettings): string {
  if (gains.size === 0) return "";
  const used = new Map<string, string[]>();
  const lines: string[] = [];
  for (const [stack, g] of gains) {
    if (!g.baseline) {
      lines.push(`- ${stack}: no speedup: ${g.why}.`);
      continue;
    }
    const key = `against ${g.baseline.stack} (no speculation) on ${g.host}, measured ${minute(g.baseline.takenAt)}`;
    used.set(key, [...(used.get(key) ?? []), stack]);
  }
  return [
    `Speedup, as in \`2.41x (2.30-2.52)\` after a figure: the row's figure divided by the same figure of its baseline (the no-speculation stack named for the row below): decode tok/s at the same context (each row's estimate by the rule), output tok/s at the same concurrency; in parentheses the ${percent(s.confidence)} interval of that ratio (always valid: it holds however often the benchmark is re-run and this report read again); "${EQUAL_WITHIN} ${percent(s.equalWithin)}" where the whole interval lies inside ±${percent(s.equalWithin)} of 1.00x, "${INCONCLUSIVE}" where it is neither beyond the ${percent(s.threshold)} threshold nor inside ±${percent(s.equalWithin)} (this benchmark cannot tell). A tie names none best, with why: "${EQUAL_WITHIN} ${percent(s.equalWithin)}" when every comparison in it is, else "${INCONCLUSIVE}". In the verdict above, a ratio is the short-context decode estimate of the ${BEST} (in a ${TIE}, the first listed) divided by that of the configuration named with it, and ± beside an estimate is half its ${percent(s.confidence)} interval, as a share of the estimate. Baselines: the newest no-speculation stack measured on the same host, deployed alike but for speculation, within ${s.maxAgeDays} days of the row, its benchmark without warnings.`,
    "",
    ...[...used].map(([key, stacks]) => `- ${stacks.join(", ")}: ${key}.`),
    ...lines,
  ].join("\n") + "\n";
}

/** Pure: the rows marked as measured under other settings, each with why. */
function renderFlagged(flagged: Map<string, string[]>): string {
  if (flagged.size === 0) return "";
  return [`${MARK} Measured under other settings than the other rows; not compared:`, "", ...[...flagged].map(([stack, why]) => `- ${stack}: ${why.join("; ")}.`)].join("\n") + "\n";
}

/** Pure: each result's warnings (prompts off their length, cache hits, failed requests). */
function renderWarnings(rows: ReportRow[], figures: Map<string, Figures | undefined>): string {
  const lines = rows.flatMap((r) => (figures.get(r.stack)?.warnings ?? []).map((w) => `- ${r.stack}: ${w}`));
  return lines.length ? [`${WARNED} Warnings of the benchmark (such a row is neither best nor a baseline):`, "", ...lines].join("\n") + "\n" : "";
}

/** Pure: every run of the stacks measured more than once, oldest first (nothing when none was). */
export function renderHistory(rows: ReportRow[]): string {
  const many = rows.filter((r) => (r.runs?.length ?? 0) > 1);
  if (many.length === 0) return "";
  const lines = ["", "### Every run of the stacks measured more than once", "", "| stack | taken at | unit | host | configuration | decode tok/s short | accept length | coding |", "|---|---|---|---|---|---:|---:|---|"];
  for (const r of many) {
    for (const run of r.runs!) {
      const f = figuresOf(run.result);
      const c = f.coding;
      lines.push(`| ${r.stack} | ${run.takenAt.slice(0, 19).replace("T", " ")} | ${run.unitHash.slice(0, 12)} | ${run.host} | ${describe(run.configuration)} | ${fmt(f.short.median)}${f.format === 1 ? " (format 1)" : ""} | ${fmt(f.acceptLength, 2)} | ${c ? `${c.passed}/${c.tasks}` : "-"} |`);
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
// tokens/s per request at short and at each long context (bar: median, whisker: min-max over
// the phase's requests; the speedup over the baseline on the same host beside it),
// acceptance length, and the coding check's pass rate. The best row is highlighted and
// tagged, or each row of a tie is tagged "tie". Everything is laid out from the
// rows alone (no clock, no randomness), so the same rows give the same bytes, and from an
// estimate of text widths that errs wide, so that no text runs past the edge whatever the
// names.

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
const BEST_ROW = "#e8f5e9";
const TIE_FILL = "#e65100";
const TIE_ROW = "#fff3e0";
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
function panels(rows: ReportRow[], s: VerdictSettings): Panel[] {
  const figures = rows.map((r) => (r.result ? figuresOf(r.result) : undefined));
  const gains = speedups(rows, s);
  const measured = figures.filter((f): f is Figures => f !== undefined);
  const longs = [...new Set(measured.flatMap((f) => f.long.map((l) => l.contextTokens)))].sort((a, b) => a - b);
  const rates = measured.flatMap((f) => [f.short, ...f.long.map((l) => l.decode)]);
  const tokensTicks = niceTicks(Math.max(0, ...rates.map((d) => Math.max(d.median, d.max)).filter(Number.isFinite)));
  const speedCell = (stack: string, d: DecodeRate, gain: Comparison | undefined, what: string): Cell => ({
    value: d.median,
    min: d.min,
    max: d.max,
    // The spread in numbers too: it is often narrower than a whisker can show.
    label: `${fmt(d.median)} (${fmt(d.min)}–${fmt(d.max)})${gain === undefined ? "" : ` ${gain.ratio.toFixed(2)}x${undecided(gain) ? " ~" : ""}`}`,
    tooltip: `${stack}, ${what}: ${fmt(d.median)} tok/s decode, median of ${d.requests} requests (min ${fmt(d.min)}, max ${fmt(d.max)})${gain === undefined ? "" : `; ${ratioText(gain)} the no-speculation baseline (${gains.get(stack)!.baseline!.stack} on ${gains.get(stack)!.host})${undecided(gain) ? `, ${comparisonWord(gain)}` : ""}`}`,
  });
  const shortPrompt = uniform(measured.map((f) => f.shortPromptTokens));
  const speedPanel = (detail: string, pick: (f: Figures, g: Speedup | undefined) => [DecodeRate, Comparison | undefined] | undefined, what: string): Panel => ({
    heading: "Decode tokens/s",
    detail,
    plotWidth: 170,
    ticks: tokensTicks,
    tickLabel: (v) => String(v),
    cells: rows.map((r, i) => {
      const f = figures[i];
      const picked = f ? pick(f, gains.get(r.stack)) : undefined;
      return picked ? speedCell(r.stack, picked[0], picked[1], what) : f ? "not measured" : "no benchmark";
    }),
  });
  const accepts = measured.map((f) => f.acceptLength).filter((a): a is number => a !== null);
  return [
    speedPanel(shortPrompt ? `short prompt (${shortPrompt} tokens)` : "short prompt", (f, g) => [f.short, g?.short], "short prompt"),
    ...longs.map((c) =>
      speedPanel(
        `at ${c}-token context`,
        (f, g) => {
          const l = f.long.find((x) => x.contextTokens === c);
          return l ? [l.decode, g?.long.get(c)] : undefined;
        },
        `${c}-token context`,
      ),
    ),
    {
      heading: "Acceptance length",
      detail: "tokens per verify step",
      plotWidth: 110,
      ticks: niceTicks(Math.max(0, ...accepts)),
      tickLabel: (v) => String(v),
      cells: rows.map((r, i) => {
        const f = figures[i];
        if (!f) return "-";
        if (f.acceptLength === null) return "not reported";
        return { value: f.acceptLength, label: fmt(f.acceptLength, 2), tooltip: `${r.stack}: acceptance length ${fmt(f.acceptLength, 2)} (${f.acceptLengthSource})` };
      }),
    },
    {
      heading: "Coding check",
      detail: "tasks passed",
      plotWidth: 110,
      ticks: niceTicks(100, 2),
      tickLabel: (v) => `${v}%`,
      cells: rows.map((r, i) => {
        const c = figures[i]?.coding;
        if (!c) return figures[i] ? "off" : "-";
        const notes = [c.extraction_failed ? `${c.extraction_failed} without extractable code` : "", c.timeouts ? `${c.timeouts} timed out` : ""].filter(Boolean);
        return { value: c.tasks ? (100 * c.passed) / c.tasks : 0, label: `${c.passed}/${c.tasks}`, tooltip: `${r.stack}: ${c.passed} of ${c.tasks} coding tasks passed${notes.length ? ` (${notes.join(", ")})` : ""}` };
      }),
    },
  ];
}

/** Pure: the chart's line that says what was chosen. */
function choiceLine(choice: Choice): string {
  switch (choice.kind) {
    case "winner":
      return `${chartWords.best}: ${choice.stack} (faster by the rule than ${choice.runnerUp ? "every other eligible configuration and " : ""}the baseline ${choice.baseline.stack}, ${ratioText(choice.baseline.comparison)}).`;
    case "tie":
      return `${chartWords.tie}: ${choice.stacks.join(", ")} (${tieWord(choice.against.map((a) => a.comparison))}); ${NONE_NAMED}.`;
    case "none":
      return `${chartWords.none}: ${choice.why}.`;
    default: {
      const never: never = choice;
      throw new Error(`unknown choice ${JSON.stringify(never)}`);
    }
  }
}

/** Pure: the comparison chart as SVG, laid out from the rows (see above). */
export function renderSvg(rows: ReportRow[], s: VerdictSettings = DEFAULT_VERDICT): string {
  const choice = choose(rows, s);
  const flagged = otherSettings(rows);
  const ps = panels(rows, s);
  const requests = uniform(rows.flatMap((r) => (r.result ? [figuresOf(r.result).short, ...figuresOf(r.result).long.map((l) => l.decode)].map((d) => d.requests) : [])));
  const title = "Decode speed, acceptance length and coding check by configuration";
  const subtitle = `Bars: median${requests ? ` of ${requests} requests` : ""}, single stream; whiskers: min to max; 2.41x: speedup over the no-speculation baseline on the same host (~: neither faster nor slower).`;
  const chosen = choiceLine(choice);
  const tagWidth = (tag: string) => textWidth(tag, 10, true) + 10;
  const tagOf = (stack: string) => choiceMark(choice, stack);
  const secondLine = (r: ReportRow) => `${describe(r.configuration)}${flagged.has(r.stack) ? ` (${MARK} other settings)` : ""}`;

  // Columns: the labels, then each panel (plot, then room for the value labels and the last tick label).
  const labelWidth = Math.ceil(Math.max(
    60,
    ...rows.map((r) => {
      const tag = tagOf(r.stack);
      return Math.max(textWidth(r.stack, FONT, true) + (tag ? 8 + tagWidth(tag) : 0), textWidth(secondLine(r), SMALL));
    }),
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
  const width = Math.ceil(Math.max(x - GAP + MARGIN, 2 * MARGIN + textWidth(title, TITLE, true), 2 * MARGIN + Math.max(textWidth(subtitle, SMALL), textWidth(chosen, SMALL, true))));
  const top = 110;
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
    `<text x="${MARGIN}" y="61" font-size="${SMALL}" font-weight="bold" fill="${choice.kind === "winner" ? BEST_FILL : choice.kind === "tie" ? TIE_FILL : GREY}">${escapeXml(chosen)}</text>`,
  ];
  rows.forEach((r, i) => {
    const tag = tagOf(r.stack);
    if (!tag) return;
    parts.push(`<rect x="${MARGIN / 2}" y="${top + i * ROW_H + 2}" width="${width - MARGIN}" height="${ROW_H - 4}" rx="4" fill="${tag === BEST ? BEST_ROW : TIE_ROW}"/>`);
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
      const fill = tagOf(rows[i].stack) === BEST ? BEST_FILL : BAR_FILL;
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
    const tag = tagOf(r.stack);
    const color = tag === BEST ? BEST_FILL : TIE_FILL;
    parts.push(`<text x="${MARGIN}" y="${mid - 3}"${tag ? ` font-weight="bold" fill="${color}"` : ""}>${escapeXml(r.stack)}</text>`);
    if (tag) {
      const tagX = MARGIN + textWidth(r.stack, FONT, true) + 8;
      parts.push(
        `<rect x="${num(tagX)}" y="${mid - 15}" width="${num(tagWidth(tag))}" height="15" rx="3" fill="${color}"/>`,
        `<text x="${num(tagX + tagWidth(tag) / 2)}" y="${mid - 4}" font-size="10" font-weight="bold" text-anchor="middle" fill="#ffffff">${tag}</text>`,
      );
    }
    parts.push(`<text x="${MARGIN}" y="${mid + 12}" font-size="${SMALL}" fill="${GREY}">${escapeXml(secondLine(r))}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n") + "\n";
}

/** Shell-style glob (`*`, `?`) to a whole-name matcher. */
export function globMatcher(glob: string): (name: string) => boolean {
  const re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);
  return (name) => re.test(name);
}
