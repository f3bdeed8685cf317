// Pure: the adaptive sweep's report: its choice and how sure it is, the GPU time it spent per
// host against what the full grid would have cost, every launch, and the Pareto front of short
// vs long context decode rate and acceptance length with the best (or the tie) marked;
// Markdown and an SVG chart. Plain data in, text out.
import type { GridPoint } from "./space";
import { Conclusion, fullGridCosts, LaunchRecord, Measured, Objective, relaunchOffset, spentPerHost, spentSeconds } from "./strategy";
import { BEST, bestHeading, INCONCLUSIVE, NO_BEST_HEADING, NONE_NAMED, TIE, tieHeading, type Mark } from "../../verdict/words";

export interface AdaptiveReport {
  points: GridPoint[];
  records: LaunchRecord[];
  conclusion: Conclusion;
  objective: Objective;
  longContextTokens: number;
  /** Why it stopped launching. */
  why: string;
  /** Launches a resume took over (not repeated). */
  resumed: string[];
}

/** Pure: the measured configurations no other beats on all of short and long decode rate and acceptance length. */
export function paretoFront(measured: Measured[]): Measured[] {
  const axes = (m: Measured) => [m.short, m.long ?? 0, m.acceptLength ?? 0];
  const dominates = (a: Measured, b: Measured) => {
    const x = axes(a);
    const y = axes(b);
    return x.every((v, i) => v >= y[i]) && x.some((v, i) => v > y[i]);
  };
  return measured.filter((m) => !measured.some((o) => o !== m && dominates(o, m))).sort((a, b) => b.short - a.short);
}

/**
 * Pure: what the full grid would have cost (it was not run): every configuration launched and
 * measured once in full at this run's own mean launch and full-pass costs, those known or likely
 * to run out of memory at a failed launch's cost (strategy.ts fullGridCosts). None before a full
 * pass has finished.
 */
export function fullGridEstimate(points: GridPoint[], records: LaunchRecord[]): number | undefined {
  const full = records.filter((r) => !r.failure).some((r) => r.passes.some((p) => p.kind === "full"));
  return full ? fullGridCosts(points, records).seconds : undefined;
}

/**
 * Pure: whether relaunches that measured `measured` over `dof` degrees of freedom bear out an
 * assumed offset: a one-sided chi-square test at 5 % (dof x (measured / assumed)^2 against
 * chi-square with dof degrees of freedom, by the Wilson-Hilferty approximation).
 */
export function offsetVerdict(measured: number, assumed: number, dof: number): string {
  const z = (Math.cbrt((measured / assumed) ** 2) - (1 - 2 / (9 * dof))) / Math.sqrt(2 / (9 * dof));
  if (z > 1.645) return "above the assumption: these figures are too sure";
  return dof < 5 ? "too few to tell much" : "in line with the assumption or below it";
}

const hours = (s: number) => `${(s / 3600).toFixed(2)} h`;
const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * Pure: this run's GPU time against measuring the full grid once (fullGridEstimate), in words: a
 * share below it, a multiple above it (repeated full passes on one server, relaunches and the
 * short screening passes are what the full grid does not pay), and what the run launched and ran.
 */
export function gridCostText(points: GridPoint[], records: LaunchRecord[]): string {
  const estimate = fullGridEstimate(points, records);
  if (estimate === undefined) return "No full pass finished: no estimate of what measuring the full grid once would cost.";
  const costs = fullGridCosts(points, records);
  const failing = Math.round(costs.failing * 10) / 10;
  const spent = spentSeconds(records);
  const ratio = spent / estimate;
  const configurations = new Set(records.map((r) => r.point)).size;
  const again = records.length - configurations;
  const passes = records.flatMap((r) => r.passes);
  const shorts = passes.filter((p) => p.kind === "short").length;
  const fulls = passes.length - shorts;
  const repeats = records.reduce((s, r) => s + Math.max(0, r.passes.filter((p) => p.kind === "full").length - 1), 0);
  return (
    `Measuring the full grid once (each of its ${count(points.length, "configuration")} launched once and given one full pass, at this run's mean costs: ${costs.launchSeconds.toFixed(0)} s a launch, ${costs.passSeconds.toFixed(0)} s a full pass${failing > 0 ? `; about ${failing} of them expected to run out of memory, at ${costs.failedSeconds.toFixed(0)} s a failed launch` : ""}) would cost about ${hours(estimate)} of GPU time. ` +
    `This run cost ${hours(spent)}, ${ratio < 1 ? `${(ratio * 100).toFixed(0)} % of that` : `${ratio.toFixed(1)} times that`}: ` +
    `it launched ${configurations} of the ${count(points.length, "configuration")} (${count(records.length, "launch", "launches")}${again ? `, ${again} of them of a configuration launched before` : ""}) ` +
    `and ran ${count(passes.length, "pass", "passes")} (${shorts} short, ${fulls} full${repeats ? `, ${count(repeats, "repeat")} of a full pass on the same server` : ""}).`
  );
}
const cell = (t: string) => t.replace(/\|/g, "\\|");

function objectiveText(o: Objective, long: number): string {
  if (o.kind === "short") return "single-stream decode tok/s at short context";
  if (o.kind === "long") return `single-stream decode tok/s at ${long} tokens of context`;
  return `${((1 - o.longWeight) * 100).toFixed(0)} % short-context + ${(o.longWeight * 100).toFixed(0)} % ${long}-token decode tok/s`;
}

/** Pure: how the report marks a configuration (components/verdict/words.ts): the best alone, each of a tie, else nothing. */
export function markOf(c: Conclusion, name: string): Mark | undefined {
  if (!c.chosen || !c.tied.includes(name)) return undefined;
  return c.tied.length > 1 ? TIE : BEST;
}

export function renderAdaptiveMarkdown(r: AdaptiveReport): string {
  const c = r.conclusion;
  const spent = spentSeconds(r.records);
  const front = paretoFront(c.measured);
  const lines: string[] = [];
  lines.push(`Objective: ${objectiveText(r.objective, r.longContextTokens)}, the coding check as a constraint. Grid: ${r.points.length} configurations.`, "");
  const tol = "1 %";
  const pctOf = (x: number) => `${(x * 100).toFixed(1)} %`;
  const pick = c.chosen ? c.beliefs.get(c.chosen.point.name) : undefined;
  // What deploying the top risks, by the answer's draws (the measurements with the launch offset, and the surrogate's beliefs of what was not launched).
  const offset = relaunchOffset(r.records, { objective: r.objective, launchSd: c.launchSd });
  const relaunched = c.measured.filter((m) => m.launches > 1).length;
  const offsetText =
    offset.dof === 0
      ? `a launch-to-launch offset of ${pctOf(c.launchSd)} assumed, not measured: no configuration was launched twice`
      : `a launch-to-launch offset of ${pctOf(c.launchSd)} assumed; the relaunches of ${relaunched} configuration${relaunched > 1 ? "s" : ""} measured ${pctOf(offset.measuredSd!)} (${offset.dof} degree${offset.dof > 1 ? "s" : ""} of freedom: ${offsetVerdict(offset.measuredSd!, c.launchSd, offset.dof)}), and each relaunched configuration's own launches are pooled with the assumption`;
  const risk = pick
    ? ` If you deploy ${c.chosen!.point.name}: expected regret (the share of the best configuration's speed, launched or not, it may lack) ${pctOf(pick.expectedRegret)}, at most ${pctOf(pick.regretUpper90)} with 90 % (from the measurements, ${offsetText}, and the surrogate's belief of every configuration not launched: a peak narrower than a grid step it cannot see, so this does not count one: see "Not launched" below). How often such figures held on generated surfaces of the simulator, and how often the top was within 3 % of the best there: bench/results/adaptive-sweep.md.`
    : "";
  if (c.chosen && c.tied.length <= 1) {
    lines.push(
      `${bestHeading(c.chosen.point.name)}, ${c.chosen.value.toFixed(1)} tok/s (±${c.chosen.se.toFixed(1)}, ${c.chosen.launches} launch${c.chosen.launches > 1 ? "es" : ""}, ${c.chosen.requests} requests).` +
        risk +
        (c.withinNoise.length ? ` Also close to it (less than two standard errors apart, so these measurements do not separate them): ${c.withinNoise.join(", ")}.` : ""),
    );
  } else if (c.chosen) {
    const est = (name: string) => {
      const m = c.measured.find((x) => x.point.name === name)!;
      return `${name} ${m.value.toFixed(1)} tok/s (±${m.se.toFixed(1)}, ${m.launches} launch${m.launches > 1 ? "es" : ""})`;
    };
    lines.push(
      `${tieHeading(c.tied, INCONCLUSIVE)}: the measurements cannot tell them apart, so ${NONE_NAMED}. ${c.tied.map(est).join("; ")}. ` +
        `The first has the highest estimate; new launches of them would separate them (launches differ, passes on one server do not).` +
        risk,
    );
  } else {
    lines.push(`${NO_BEST_HEADING}: none was measured in full with the coding check passing.`);
  }
  if (c.beliefs.size > 0) {
    lines.push(
      "",
      `Each configuration measured in full, by the same draws (not calibrated per configuration): its estimate with a 90 % interval (its requests' noise and the launch offset), its chance to be the best and to be within ${tol} of the best (launched or not), and the regret of deploying it.`,
      "",
      "| configuration | estimate (tok/s) | 90 % interval | chance to be the best | chance within 1 % of it | expected regret | 90 % bound |",
      "|---|---:|---|---:|---:|---:|---:|",
    );
    const rows = c.measured.filter((m) => c.beliefs.has(m.point.name)).sort((x, y) => y.value - x.value);
    for (const m of rows) {
      const b = c.beliefs.get(m.point.name)!;
      lines.push(`| ${m.point.name} | ${m.value.toFixed(1)} | ${b.low.toFixed(1)}-${b.high.toFixed(1)} | ${pctOf(b.best)} | ${pctOf(b.within)} | ${pctOf(b.expectedRegret)} | ${pctOf(b.regretUpper90)} |`);
    }
  }
  lines.push("", `Stopped: ${r.why}.`, "");
  const wall = (xs: LaunchRecord[]) => (xs.every((x) => x.wallSeconds !== undefined) ? xs.reduce((s, x) => s + x.wallSeconds!, 0).toFixed(0) : "-");
  lines.push("## GPU time", "", "| host | launches | launch s | benchmark s | GPU time | wall s of its `up`s |", "|---|---:|---:|---:|---:|---:|");
  for (const [host, total] of spentPerHost(r.records)) {
    const mine = r.records.filter((x) => x.host === host);
    const launch = mine.reduce((s, x) => s + x.launchSeconds, 0);
    lines.push(`| ${host} | ${mine.length} | ${launch.toFixed(0)} | ${(total - launch).toFixed(0)} | ${hours(total)} | ${wall(mine)} |`);
  }
  lines.push(`| **all** | ${r.records.length} | | | **${hours(spent)}** | ${wall(r.records)} |`);
  lines.push(
    "",
    gridCostText(r.points, r.records),
    "GPU time is what the stacks' outputs hold: a launch is its restart timings (drain, stop, GPU release, load to serving; a failed launch: its attempt's wall time), a pass its benchmark's duration. The wall time of the `up`s adds the engine's own time (planning, SSH, the steps' checks), during which the host is held too.",
    "",
  );
  if (r.resumed.length) lines.push(`Resumed: ${r.resumed.join(", ")} were taken from the journal or the stacks' outputs, not launched again.`, "");
  lines.push("## Launches", "", "| # | configuration | host | launch s | passes | short tok/s | long tok/s | accept length | coding | note |", "|---:|---|---|---:|---|---:|---:|---:|---|---|");
  r.records.forEach((x, i) => {
    const last = x.passes[x.passes.length - 1]?.figures;
    const coding = x.passes.map((p) => p.figures.codingPassed).filter((v) => v !== null);
    lines.push(
      `| ${i + 1} | ${x.point}${x.launch ? ` (launch ${x.launch})` : ""} | ${x.host} | ${x.launchSeconds.toFixed(0)} | ${x.passes.map((p) => p.kind).join(", ") || "-"} | ${last?.short.median ?? "-"} | ${last?.long?.median ?? "-"} | ${last?.acceptLength ?? "-"} | ${coding.length ? (coding.every(Boolean) ? "pass" : "FAIL") : "-"} | ${x.failure ? `failed: ${cell(x.failure.cause)}` : ""} |`,
    );
  });
  lines.push(
    "",
    c.unlaunched.length
      ? c.unlaunched.some((u) => u.upper === null)
        ? `Not launched, and not assessed (no configuration was measured in full, so the surrogate says nothing of them): ${c.unlaunched.map((u) => u.point).join(", ")}. Any of them could be the best: launch them (raise the budget, or sweep them as stacks).`
        : `Not launched, where a peak narrower than a grid step could hide (each likely to lie in the surface's upper half, by the surrogate): ${c.unlaunched.map((u) => `${u.point} (${(u.upper! * 100).toFixed(0)} %)`).join(", ")}. The figures above do not count such a peak: to rule it out, launch them (raise the budget, or sweep them as stacks).`
      : "Not launched: no configuration likely to lie in the surface's upper half (by the surrogate) was left unlaunched; a peak narrower than a grid step could hide only where the surface measured poor.",
  );
  if (c.ruledOut.size) lines.push("", `Ruled out without a launch (they need at least the memory of a launch that ran out): ${[...c.ruledOut].map(([p, by]) => `${p} (${by})`).join(", ")}.`);
  lines.push("", "## Pareto front", "", "Measured configurations that no other beats on short-context and long-context decode rate and acceptance length at once.", "", "| configuration | short tok/s | long tok/s | accept length | |", "|---|---:|---:|---:|---|");
  for (const m of front) {
    const mark = markOf(c, m.point.name);
    lines.push(`| ${m.point.name} | ${m.short} | ${m.long ?? "-"} | ${m.acceptLength ?? "-"} | ${mark ? `**${mark}**` : ""} |`);
  }
  return lines.join("\n") + "\n";
}

const esc = (t: string) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The chart: short vs long decode rate of every measured configuration, the front joined, the chosen one marked; and a bar of GPU time spent against the full grid. */
export function renderAdaptiveSvg(r: AdaptiveReport): string {
  const W = 720;
  const H = 420;
  const plot = { x: 70, y: 40, w: 420, h: 320 };
  const m = r.conclusion.measured.filter((x) => x.long !== null);
  const front = new Set(paretoFront(r.conclusion.measured));
  const out: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`, `<rect width="${W}" height="${H}" fill="white"/>`];
  out.push(`<text x="${plot.x}" y="20" font-size="13">Measured configurations: short vs ${r.longContextTokens}-token decode tok/s (Pareto front joined; red: the ${BEST}, or the first of a ${TIE})</text>`);
  if (m.length) {
    const xs = m.map((x) => x.short);
    const ys = m.map((x) => x.long!);
    const pad = (lo: number, hi: number) => [lo - (hi - lo || 1) * 0.1, hi + (hi - lo || 1) * 0.1];
    const [x0, x1] = pad(Math.min(...xs), Math.max(...xs));
    const [y0, y1] = pad(Math.min(...ys), Math.max(...ys));
    const px = (v: number) => plot.x + ((v - x0) / (x1 - x0)) * plot.w;
    const py = (v: number) => plot.y + plot.h - ((v - y0) / (y1 - y0)) * plot.h;
    out.push(`<rect x="${plot.x}" y="${plot.y}" width="${plot.w}" height="${plot.h}" fill="none" stroke="#999"/>`);
    for (let i = 0; i <= 4; i++) {
      const vx = x0 + ((x1 - x0) * i) / 4;
      const vy = y0 + ((y1 - y0) * i) / 4;
      out.push(`<text x="${px(vx).toFixed(1)}" y="${plot.y + plot.h + 14}" text-anchor="middle">${vx.toFixed(0)}</text>`);
      out.push(`<text x="${plot.x - 6}" y="${(py(vy) + 4).toFixed(1)}" text-anchor="end">${vy.toFixed(0)}</text>`);
    }
    out.push(`<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h + 30}" text-anchor="middle">short-context decode tok/s</text>`);
    out.push(`<text transform="translate(18 ${plot.y + plot.h / 2}) rotate(-90)" text-anchor="middle">${r.longContextTokens}-token decode tok/s</text>`);
    const onFront = m.filter((x) => front.has(x)).sort((a, b) => a.short - b.short);
    if (onFront.length > 1) out.push(`<polyline fill="none" stroke="#1f6fb4" stroke-width="1.5" points="${onFront.map((x) => `${px(x.short).toFixed(1)},${py(x.long!).toFixed(1)}`).join(" ")}"/>`);
    for (const x of m) {
      const chosen = x === r.conclusion.chosen;
      out.push(`<circle cx="${px(x.short).toFixed(1)}" cy="${py(x.long!).toFixed(1)}" r="${chosen ? 6 : 4}" fill="${chosen ? "#d62728" : front.has(x) ? "#1f6fb4" : "#bbb"}"><title>${esc(x.point.name)}: ${x.short} / ${x.long} tok/s, accept length ${x.acceptLength ?? "-"}</title></circle>`);
      // Labels right of the point, or left of it in the plot's right quarter.
      const right = px(x.short) < plot.x + plot.w * 0.75;
      if (chosen || front.has(x)) out.push(`<text x="${(px(x.short) + (right ? 7 : -7)).toFixed(1)}" y="${(py(x.long!) - 5).toFixed(1)}" text-anchor="${right ? "start" : "end"}"${chosen ? ' fill="#d62728" font-weight="bold"' : ""}>${esc(x.point.name)}</text>`);
    }
  } else {
    out.push(`<text x="${plot.x}" y="${plot.y + 20}">nothing measured at both context lengths</text>`);
  }
  // GPU time: spent against the full grid's estimate.
  const spent = spentSeconds(r.records);
  const estimate = fullGridEstimate(r.points, r.records);
  const bx = 540;
  const bw = 50;
  const top = plot.y;
  const scale = (plot.h - 24) / Math.max(spent, estimate ?? 0, 1);
  out.push(`<text x="${bx}" y="${top - 6}">GPU hours</text>`);
  const bar = (x: number, v: number, fill: string, label: string) => {
    out.push(`<rect x="${x}" y="${(top + plot.h - v * scale).toFixed(1)}" width="${bw}" height="${(v * scale).toFixed(1)}" fill="${fill}"/>`);
    out.push(`<text x="${x + bw / 2}" y="${(top + plot.h - v * scale - 4).toFixed(1)}" text-anchor="middle">${(v / 3600).toFixed(2)}</text>`);
    out.push(`<text x="${x + bw / 2}" y="${top + plot.h + 14}" text-anchor="middle">${label}</text>`);
  };
  bar(bx, spent, "#1f6fb4", "spent");
  if (estimate !== undefined) bar(bx + bw + 20, estimate, "#bbb", "full grid");
  out.push("</svg>");
  return out.join("\n") + "\n";
}
