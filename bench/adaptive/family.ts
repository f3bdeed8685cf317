// Pure: a seeded family of performance surfaces over a sweep's grid, for judging sweeps on
// surfaces nobody tuned them to (COCO/BBOB: optimisers are compared on generated instances of
// function families, never on hand-picked functions). A surface gives each configuration the
// true mean single-stream decode rate (short and long context) or an out-of-memory failure,
// plus its per-request noise and per-launch offset, and labels naming its features so that
// results can be reported per feature. Nothing here is a fact of SGLang: it is a yardstick
// whose ranges are stated below, and `describeFamily` says what a family actually holds.
//
// How one surface is drawn (probabilities per surface, independent unless said):
// - level: the best configuration's short-context rate uniform in 110-250 tok/s; the spread
//   best / median uniform in 10-40 %; the worst configurations are floored at 45 % of the
//   median (a bad tree is slow, not stopped).
// - main shape, in the grid's coordinates (GridPoint.x: octaves of budget and topk, window):
//   - a peak (60 %): an ellipsoid with a random 3-D orientation (so budget, topk and window
//     interact) and widths 0.25-1.0 in each direction (log-uniform);
//   - a ridge (40 %): long (1.5-5) along a random direction and narrow across it (0.06-0.3,
//     log-uniform: from well under one budget step to two); the direction lies in the
//     budget/topk plane at any angle (65 %) or mixes in the window axis (35 %: the best tree
//     differs between the two windows);
//   its profile is distance^gamma, gamma uniform in 1-2.5 (a cusp to a flat-topped dome). The
//   centre: 35 % a random grid point; else each of budget and topk is at its low or high end
//   with 25 % (edges and corners) or uniform, the window at either end or in between.
// - several peaks (30 %): one or two more broad peaks (width 0.15-0.5) at least 0.4 away
//   from the centre, their tops within +-3 % of the main shape's best (the higher one wins).
// - plateau (20 %): the 3-6 best configurations are squeezed into 0.4 % of each other
//   (order kept): a flat top no sweep can resolve without many repeats.
// - isolated peak (25 %): one configuration in the upper half, not the best, raised to
//   -2 .. +8 % of the best elsewhere (uniform), falling off over sigma grid steps (a Gaussian
//   in steps of the budget, topk and window lists). sigma is log-uniform in 0.3-1.0 steps: a
//   grid neighbour gets exp(-1 / (2 sigma^2)) of the height: 0.4 % at 0.3, 10 % at 0.47, 25 %
//   at 0.6, 61 % at 1.0. Below 0.47 steps (about 37 % of isolated peaks) the neighbours carry
//   no usable hint: only launching that one configuration finds it ("needle").
// - out of memory (65 %): a memory need wb * xb^pb + wt * xt^pt + ww * xw + wbt * xb * xt with
//   random positive weights and powers 0.5-2 (increasing in budget, topk and window, so the
//   region is monotone: whatever needs at least an OOM configuration's memory, space.ts
//   needsAtLeast, is OOM too); the configurations needing the most fail, a fraction uniform in
//   0-50 % of the grid (at least one); 35 % of surfaces have none.
// - long context: the short rate x 0.7-0.9, less up to 15 % per unit of budget, topk and
//   window (a deeper tree and a drafter without a window pay more at 8192 tokens).
// - noise: per-request relative sd `requestSd` (drawn uniform 1-6 % when not given), a
//   per-launch persistent relative offset `launchSd` (drawn uniform 0-2 % when not given).
//
// Labels are read from the finished surface where they can be (several peaks, plateau, where
// the optimum lies, an isolated peak being the best by more than the 1 % tolerance), so that a
// feature drawn but then hidden (by OOM, by another peak) is not counted.
import { mix, normal, prng } from "../../lib/prng";
import type { GridPoint } from "../../components/sweep/adaptive/space";
import type { ReplayEntry } from "../../components/sweep/adaptive/replay";

export type Feature = "peak" | "ridge" | "ridge-window" | "multi-peak" | "plateau" | "isolated-peak" | "needle" | "oom";
export const FEATURES: readonly Feature[] = ["peak", "ridge", "ridge-window", "multi-peak", "plateau", "isolated-peak", "needle", "oom"];

export type Location = "interior" | "edge" | "corner";

/** A configuration's truth: mean decode tok/s at short and long context, or a launch that runs out of memory. */
export type PointTruth = { kind: "ok"; short: number; long: number } | { kind: "oom" };

export interface GeneratedSurface {
  /** The seed it was drawn from (drawFamily: the family's sub-seed of this surface). */
  seed: number;
  /** Per configuration (stack name), in the points' order. */
  truth: Record<string, PointTruth>;
  /** Relative sd of one request's decode rate. */
  requestSd: number;
  /** Relative sd of a launch's persistent offset (one draw per server start). */
  launchSd: number;
  /** Features it has, in FEATURES order. */
  features: Feature[];
  /** The best configuration (short context) and where it lies in the budget/topk plane. */
  optimum: { point: string; short: number; location: Location };
}

export interface FamilyOptions {
  /** Relative per-request noise; when not given, drawn uniform in 0.01-0.06 per surface. */
  requestSd?: number;
  /** Relative per-launch offset; when not given, drawn uniform in 0-0.02 per surface. */
  launchSd?: number;
}

/** A grid neighbour carrying less than this share of an isolated peak's height gives no hint of it. */
const NEEDLE_HINT = 0.1;
/** Several peaks: strict local maxima within this of the best. */
const PEAKS_WITHIN = 0.03;
/** Plateau: at least this many configurations within PLATEAU_WITHIN of the best. */
const PLATEAU_SIZE = 3;
const PLATEAU_WITHIN = 0.005;
/** The sweeps' tolerance: an isolated peak matters when the best elsewhere is more than this below it. */
const TOLERANCE = 0.01;
const FLOOR = 0.45;

type Vec = [number, number, number];
const dot = (a: Vec, b: Vec) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const sub = (a: Vec, b: Vec): Vec => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const scale = (a: Vec, k: number): Vec => [a[0] * k, a[1] * k, a[2] * k];
const unit = (a: Vec): Vec => scale(a, 1 / Math.hypot(...a));
const cross = (a: Vec, b: Vec): Vec => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];


const uniform = (rand: () => number, lo: number, hi: number) => lo + (hi - lo) * rand();
const logUniform = (rand: () => number, lo: number, hi: number) => Math.exp(uniform(rand, Math.log(lo), Math.log(hi)));

/** An ellipsoidal distance: |(x - c) . e_i| / w_i over an orthonormal basis. */
interface Shape {
  centre: Vec;
  basis: [Vec, Vec, Vec];
  widths: Vec;
}
const distance = (s: Shape, x: Vec) => Math.hypot(...s.basis.map((e, i) => dot(sub(x, s.centre), e) / s.widths[i]));

function randomBasis(rand: () => number): [Vec, Vec, Vec] {
  const a = unit([normal(rand), normal(rand), normal(rand)]);
  let b: Vec = [normal(rand), normal(rand), normal(rand)];
  b = unit(sub(b, scale(a, dot(a, b))));
  return [a, b, cross(a, b)];
}

/** A ridge's basis: along it, across it in the budget/topk plane, and the rest. */
function ridgeBasis(rand: () => number, mixesWindow: boolean): [Vec, Vec, Vec] {
  const angle = uniform(rand, 0, Math.PI);
  const inPlane: Vec = [Math.cos(angle), Math.sin(angle), 0];
  // Mixing the window: a window component 0.3-0.8 times the budget/topk part (either sign).
  const along = mixesWindow ? unit([inPlane[0], inPlane[1], uniform(rand, 0.3, 0.8) * (rand() < 0.5 ? -1 : 1)]) : inPlane;
  const across: Vec = [-Math.sin(angle), Math.cos(angle), 0];
  return [along, across, cross(along, across)];
}

function drawCentre(rand: () => number, points: GridPoint[]): Vec {
  if (rand() < 0.35) return [...points[Math.floor(rand() * points.length)].x];
  const axis = () => (rand() < 0.25 ? (rand() < 0.5 ? 0 : 1) : rand());
  return [axis(), axis(), rand() < 0.7 ? (rand() < 0.5 ? 0 : 1) : rand()];
}

/** Pure: each point's grid position: its index in the sorted budgets, topks and windows. */
function gridSteps(points: GridPoint[]): Map<string, Vec> {
  const w = (p: GridPoint) => (p.window === "none" ? Infinity : p.window);
  const sorted = <T>(f: (p: GridPoint) => T) => [...new Set(points.map(f))].sort((a, b) => (a as number) - (b as number));
  const budgets = sorted((p) => p.budget);
  const topks = sorted((p) => p.topk);
  const windows = sorted(w);
  return new Map(points.map((p) => [p.name, [budgets.indexOf(p.budget), topks.indexOf(p.topk), windows.indexOf(w(p))] as Vec]));
}

/** Pure: the points one grid step from each point along one axis. */
function neighbourhoods(points: GridPoint[]): Map<string, string[]> {
  const steps = gridSteps(points);
  return new Map(points.map((p) => [p.name, points.filter((q) => Math.abs(sub(steps.get(p.name)!, steps.get(q.name)!).reduce((s, v) => s + Math.abs(v), 0) - 1) < 1e-9).map((q) => q.name)]));
}

/** Pure: where a point lies in the budget/topk plane of the grid: lacking a neighbour on neither axis, one, or both. */
export function locationOf(points: GridPoint[], name: string): Location {
  const steps = gridSteps(points);
  const me = steps.get(name);
  if (!me) throw new Error(`locationOf: ${name} is not a point of the grid`);
  const has = (axis: number, d: number) => points.some((q) => {
    const s = steps.get(q.name)!;
    return s[axis] === me[axis] + d && s.every((v, i) => i === axis || v === me[i]);
  });
  const bounded = [0, 1].filter((axis) => !has(axis, -1) || !has(axis, 1)).length;
  return bounded === 0 ? "interior" : bounded === 1 ? "edge" : "corner";
}

function oomRegion(rand: () => number, points: GridPoint[]): Set<string> {
  if (rand() < 0.35) return new Set();
  const [wb, wt, ww, wbt] = [rand(), rand(), rand(), rand() * rand()];
  const [pb, pt] = [logUniform(rand, 0.5, 2), logUniform(rand, 0.5, 2)];
  const need = (p: GridPoint) => wb * p.x[0] ** pb + wt * p.x[1] ** pt + ww * p.x[2] + wbt * p.x[0] * p.x[1];
  const count = Math.max(1, Math.round(rand() * 0.5 * points.length));
  const needs = points.map(need).sort((a, b) => b - a);
  // The threshold at the count-th largest need; configurations tied with it fail too, unless
  // that passes half the grid, then the threshold moves above them.
  let threshold = needs[count - 1];
  if (points.filter((p) => need(p) >= threshold).length > points.length / 2) threshold = needs.filter((n) => n > threshold).at(-1) ?? Infinity;
  return new Set(points.filter((p) => need(p) >= threshold).map((p) => p.name));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function checkSd(v: number | undefined, what: string): void {
  if (v !== undefined && !(Number.isFinite(v) && v >= 0 && v < 1)) throw new Error(`family: ${what} must be a relative standard deviation in [0, 1), got ${v}`);
}

/**
 * The isolated peak's draw as the generator made it (for bench/adaptive/feasibility.ts, which
 * asks what a sweep could know of where it is): not part of the surface.
 */
export interface IsolatedDraw {
  /** The configurations it could have been put on (working, in the upper half, not the best), in the points' order. */
  candidates: string[];
  /** The index drawn among them (uniform), and the one used (the probe's, when it gives one). */
  drawnIndex: number;
  point: string;
  sigma: number;
  /** The relative raise of its own configuration. */
  height: number;
  /** Every working configuration's relative rate before and after the raise (the same scale). */
  before: Map<string, number>;
  after: Map<string, number>;
}

/** Inspects (and may redirect) the isolated peak's draw; every random draw is made as without it. */
export interface SurfaceProbe {
  /** Puts the isolated peak on this index of its candidates instead of the drawn one (the draw is still made, so every later draw is unchanged). */
  centreIndex?: number;
  /** Receives the isolated peak's draw (not called on a surface without one). */
  isolated?: (d: IsolatedDraw) => void;
}

/** Pure: one surface of the family over `points`, a function of `seed` (any integer) and the options; `probe` (tools only) sees or moves the isolated peak's draw. */
export function generateSurface(points: GridPoint[], seed: number, o: FamilyOptions = {}, probe: SurfaceProbe = {}): GeneratedSurface {
  if (points.length < 2) throw new Error(`family: a surface needs at least two grid points, got ${points.length}`);
  checkSd(o.requestSd, "requestSd");
  checkSd(o.launchSd, "launchSd");
  // mulberry32 seeded with nearby numbers starts with nearby draws: mix spreads them.
  const rand = prng(mix(seed, 0));
  // Drawn whether given or not, so that the options change the noise and nothing else.
  const drawnNoise = [uniform(rand, 0.01, 0.06), uniform(rand, 0, 0.02)];
  const requestSd = o.requestSd ?? drawnNoise[0];
  const launchSd = o.launchSd ?? drawnNoise[1];
  const best = uniform(rand, 110, 250);
  const spread = uniform(rand, 0.1, 0.4);
  const drawn = new Set<Feature>();

  // Main shape.
  const ridge = rand() < 0.4;
  const mixesWindow = ridge && rand() < 0.35;
  const main: Shape = ridge
    ? { centre: drawCentre(rand, points), basis: ridgeBasis(rand, mixesWindow), widths: [logUniform(rand, 1.5, 5), logUniform(rand, 0.06, 0.3), logUniform(rand, 0.3, 1.5)] }
    : { centre: drawCentre(rand, points), basis: randomBasis(rand), widths: [logUniform(rand, 0.25, 1), logUniform(rand, 0.25, 1), logUniform(rand, 0.25, 1)] };
  drawn.add(ridge ? "ridge" : "peak");
  if (mixesWindow) drawn.add("ridge-window");
  const gamma = uniform(rand, 1, 2.5);

  const oom = oomRegion(rand, points);
  const feasible = points.filter((p) => !oom.has(p.name));
  // Relative to the median of the working configurations: best / median = 1 + spread.
  const raw = new Map(feasible.map((p) => [p.name, -(distance(main, p.x) ** gamma)]));
  const rawTop = Math.max(...raw.values());
  const rawMid = median([...raw.values()]);
  const k = rawTop > rawMid ? Math.log(1 + spread) / (rawTop - rawMid) : 0;
  const rel = new Map([...raw].map(([n, g]) => [n, Math.max(FLOOR, Math.exp(k * (g - rawMid)))]));
  const topOf = () => Math.max(...rel.values());

  // Several peaks of similar height.
  if (rand() < 0.3) {
    const count = rand() < 0.5 ? 1 : 2;
    const mainTop = topOf();
    for (let i = 0; i < count; i++) {
      let centre = drawCentre(rand, points);
      for (let tries = 0; tries < 20 && Math.hypot(...sub(centre, main.centre)) < 0.4; tries++) centre = drawCentre(rand, points);
      const width = uniform(rand, 0.15, 0.5);
      const top = mainTop * (1 + uniform(rand, -0.03, 0.03));
      for (const p of feasible) {
        const v = top * (1 + spread) ** -((Math.hypot(...sub(p.x, centre)) / width) ** 2);
        rel.set(p.name, Math.max(rel.get(p.name)!, v));
      }
    }
  }

  // Plateau: the best few squeezed into 0.4 %, in order.
  if (rand() < 0.2) {
    const size = 3 + Math.floor(rand() * 4);
    const sorted = [...rel.values()].sort((a, b) => b - a);
    const cap = sorted[Math.min(size, sorted.length) - 1];
    const top = sorted[0];
    if (top > cap) for (const [n, v] of rel) if (v > cap) rel.set(n, cap * (1 + (0.004 * (v - cap)) / (top - cap)));
  }

  // An isolated peak, sigma grid steps wide.
  let isolated: { point: string; sigma: number; without: number } | undefined;
  if (rand() < 0.25) {
    const mid = median([...rel.values()]);
    const top = topOf();
    const candidates = feasible.filter((p) => rel.get(p.name)! >= mid && rel.get(p.name)! < top);
    if (candidates.length > 0) {
      const drawnIndex = Math.floor(rand() * candidates.length);
      if (probe.centreIndex !== undefined && !(Number.isInteger(probe.centreIndex) && probe.centreIndex >= 0 && probe.centreIndex < candidates.length)) throw new Error(`family: probe.centreIndex ${probe.centreIndex} is not an index of the ${candidates.length} candidates`);
      const centre = candidates[probe.centreIndex ?? drawnIndex];
      const sigma = logUniform(rand, 0.3, 1);
      const height = Math.max(0, (top * (1 + uniform(rand, -0.02, 0.08))) / rel.get(centre.name)! - 1);
      const steps = gridSteps(points);
      const at = steps.get(centre.name)!;
      const before = new Map(rel);
      for (const p of feasible) {
        const d = Math.hypot(...sub(steps.get(p.name)!, at));
        rel.set(p.name, rel.get(p.name)! * (1 + height * Math.exp(-(d * d) / (2 * sigma * sigma))));
      }
      isolated = { point: centre.name, sigma, without: Math.max(...[...before].filter(([n]) => n !== centre.name).map(([, v]) => v)) };
      probe.isolated?.({ candidates: candidates.map((p) => p.name), drawnIndex, point: centre.name, sigma, height, before, after: new Map(rel) });
    }
  }

  // Long context.
  const longBase = uniform(rand, 0.7, 0.9);
  const longCost: Vec = [uniform(rand, 0, 0.15), uniform(rand, 0, 0.15), uniform(rand, 0, 0.15)];

  const top = topOf();
  const truth: Record<string, PointTruth> = {};
  for (const p of points) {
    const r = rel.get(p.name);
    if (r === undefined) {
      truth[p.name] = { kind: "oom" };
      continue;
    }
    const short = (best * r) / top;
    truth[p.name] = { kind: "ok", short, long: short * longBase * Math.exp(-dot(longCost, p.x as Vec)) };
  }

  // Labels from the finished surface.
  const values = feasible.map((p) => ({ name: p.name, v: rel.get(p.name)! })).sort((a, b) => b.v - a.v || a.name.localeCompare(b.name));
  const optimum = values[0];
  const features = new Set<Feature>(drawn);
  if (oom.size > 0) features.add("oom");
  const near = neighbourhoods(points);
  const localMaxima = values.filter((e) => e.v >= optimum.v * (1 - PEAKS_WITHIN) && near.get(e.name)!.every((n) => !rel.has(n) || rel.get(n)! < e.v));
  if (localMaxima.length >= 2) features.add("multi-peak");
  if (values.filter((e) => e.v >= optimum.v * (1 - PLATEAU_WITHIN)).length >= PLATEAU_SIZE) features.add("plateau");
  if (isolated && isolated.point === optimum.name) {
    // It matters when a sweep that misses it misses the tolerance too: the best elsewhere, before it was raised, is more than 1 % below.
    const elsewhere = Math.max(...values.filter((e) => e.name !== optimum.name).map((e) => e.v));
    if (Math.max(elsewhere, isolated.without) < optimum.v * (1 - TOLERANCE)) {
      features.add("isolated-peak");
      if (Math.exp(-1 / (2 * isolated.sigma * isolated.sigma)) < NEEDLE_HINT) features.add("needle");
    }
  }
  return {
    seed,
    truth,
    requestSd,
    launchSd,
    features: FEATURES.filter((f) => features.has(f)),
    optimum: { point: optimum.name, short: (best * optimum.v) / top, location: locationOf(points, optimum.name) },
  };
}

/**
 * Pure: the seed of a family from a git commit: its first eight hex digits as a number, so
 * that the headline's seed is never chosen by hand and a reader can check it.
 */
export function familySeedOf(commit: string): number {
  if (!/^[0-9a-f]{8,40}$/i.test(commit)) throw new Error(`familySeedOf: expected a git commit hash (8 to 40 hex digits), got ${JSON.stringify(commit)}`);
  return parseInt(commit.slice(0, 8), 16);
}

/** Pure: n surfaces from one seed; surface i is drawn from the sub-seed mix(seed, i) (its `seed`). */
export function drawFamily(points: GridPoint[], seed: number, n: number, o: FamilyOptions = {}): GeneratedSurface[] {
  if (!(Number.isInteger(n) && n >= 0)) throw new Error(`drawFamily: n must be a whole number, got ${n}`);
  return Array.from({ length: n }, (_, i) => generateSurface(points, mix(seed, i + 1), o));
}

/**
 * Pure: a surface as the replay's table: each configuration's means with the surface's
 * per-request sd; no acceptance length (the generator has no model of it); the coding check
 * passes; a launch costs `launchSeconds`, one that runs out of memory half of it (it fails at
 * CUDA graph capture, after the weights load, as bench/adaptive/model.ts has it); every launch
 * draws the surface's persistent offset (`launchSd`).
 */
export function toReplayTable(surface: GeneratedSurface, launchSeconds: number): Record<string, ReplayEntry> {
  if (!(launchSeconds > 0)) throw new Error(`toReplayTable: launchSeconds must be positive, got ${launchSeconds}`);
  const out: Record<string, ReplayEntry> = {};
  for (const [name, t] of Object.entries(surface.truth)) {
    switch (t.kind) {
      case "ok":
        out[name] = { short: { mean: t.short, sd: surface.requestSd }, long: { mean: t.long, sd: surface.requestSd }, acceptLength: null, codingPassed: true, launchSeconds, launchSd: surface.launchSd };
        break;
      case "oom":
        out[name] = { failure: { cause: "Capture cuda graph failed: CUDA out of memory", outOfMemory: true }, short: { mean: 0, sd: 0 }, long: null, acceptLength: null, codingPassed: true, launchSeconds: launchSeconds / 2 };
        break;
      default: {
        const never: never = t;
        throw new Error(`toReplayTable: unknown truth ${JSON.stringify(never)}`);
      }
    }
  }
  return out;
}

/** Pure: the true short-context rate of every configuration that starts (known only in simulation). */
export function truthOf(surface: GeneratedSurface): Map<string, number> {
  return new Map(Object.entries(surface.truth).flatMap(([n, t]) => (t.kind === "ok" ? [[n, t.short] as [string, number]] : [])));
}

/** Quantiles of a sample: min, 10th, 25th, median, 75th, 90th percentile, max (nearest rank). */
export interface Spread {
  min: number;
  p10: number;
  p25: number;
  median: number;
  p75: number;
  p90: number;
  max: number;
}

function spreadOf(xs: number[]): Spread {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  return { min: s[0], p10: q(0.1), p25: q(0.25), median: q(0.5), p75: q(0.75), p90: q(0.9), max: s[s.length - 1] };
}

export interface FamilyDescription {
  surfaces: number;
  /** Surfaces with each feature. */
  features: Record<Feature, number>;
  /** Surfaces whose optimum lies in the interior, on an edge or in a corner of the budget/topk plane. */
  optimum: Record<Location, number>;
  /** Best / second best - 1 (short context). */
  gap: Spread;
  /** Surfaces by the gap: under 0.5 %, 0.5-1 %, 1-2 %, 2-5 %, 5 % and more. */
  gapBuckets: { label: string; surfaces: number }[];
  /** Configurations within 1 % of the best (the best included). */
  withinTolerance: Spread;
  /** Surfaces by that count: 1, 2, 3, 4-5, 6 and more. */
  withinToleranceBuckets: { label: string; surfaces: number }[];
  /** Best / median of the working configurations - 1. */
  bestOverMedian: Spread;
  /** Share of the grid out of memory. */
  oomShare: Spread;
  best: Spread;
  requestSd: Spread;
  launchSd: Spread;
}

/** Pure: what a family holds, for the results: features, where optima lie, how separable the best is. */
export function describeFamily(surfaces: GeneratedSurface[]): FamilyDescription {
  if (surfaces.length === 0) throw new Error("describeFamily: no surfaces");
  const features = Object.fromEntries(FEATURES.map((f) => [f, surfaces.filter((s) => s.features.includes(f)).length])) as Record<Feature, number>;
  const optimum = { interior: 0, edge: 0, corner: 0 };
  const gaps: number[] = [];
  const within: number[] = [];
  const overMedian: number[] = [];
  const oomShare: number[] = [];
  for (const s of surfaces) {
    optimum[s.optimum.location]++;
    const all = Object.values(s.truth);
    const rates = all.flatMap((t) => (t.kind === "ok" ? [t.short] : [])).sort((a, b) => b - a);
    gaps.push(rates.length > 1 ? rates[0] / rates[1] - 1 : Infinity);
    within.push(rates.filter((r) => r >= rates[0] * (1 - TOLERANCE)).length);
    overMedian.push(rates[0] / median(rates) - 1);
    oomShare.push((all.length - rates.length) / all.length);
  }
  const bucket = (xs: number[], edges: number[], labels: string[]) => labels.map((label, i) => ({ label, surfaces: xs.filter((x) => x >= edges[i] && x < edges[i + 1]).length }));
  return {
    surfaces: surfaces.length,
    features,
    optimum,
    gap: spreadOf(gaps),
    gapBuckets: bucket(gaps, [0, 0.005, 0.01, 0.02, 0.05, Infinity], ["< 0.5 %", "0.5-1 %", "1-2 %", "2-5 %", ">= 5 %"]),
    withinTolerance: spreadOf(within),
    withinToleranceBuckets: bucket(within, [1, 2, 3, 4, 6, Infinity], ["1", "2", "3", "4-5", ">= 6"]),
    bestOverMedian: spreadOf(overMedian),
    oomShare: spreadOf(oomShare),
    best: spreadOf(surfaces.map((s) => s.optimum.short)),
    requestSd: spreadOf(surfaces.map((s) => s.requestSd)),
    launchSd: spreadOf(surfaces.map((s) => s.launchSd)),
  };
}

/** Pure: the description as Markdown lines for a results file. */
export function renderFamilyMarkdown(d: FamilyDescription): string {
  const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : "-");
  const row = (what: string, s: Spread, f: (x: number) => string) => `| ${what} | ${f(s.min)} | ${f(s.p10)} | ${f(s.median)} | ${f(s.p90)} | ${f(s.max)} |`;
  const share = (n: number) => `${n} (${pct(n / d.surfaces)})`;
  return [
    `${d.surfaces} surfaces. Features: ${FEATURES.map((f) => `${f} ${share(d.features[f])}`).join(", ")}.`,
    `Optimum (budget/topk plane): interior ${share(d.optimum.interior)}, edge ${share(d.optimum.edge)}, corner ${share(d.optimum.corner)}.`,
    `Best over second best: ${d.gapBuckets.map((b) => `${b.label}: ${b.surfaces}`).join(", ")}.`,
    `Configurations within 1 % of the best: ${d.withinToleranceBuckets.map((b) => `${b.label}: ${b.surfaces}`).join(", ")}.`,
    "",
    "| | min | 10th | median | 90th | max |",
    "|---|---:|---:|---:|---:|---:|",
    row("best / second best - 1", d.gap, pct),
    row("configurations within 1 % of the best", d.withinTolerance, String),
    row("best / median - 1", d.bestOverMedian, pct),
    row("share out of memory", d.oomShare, pct),
    row("best tok/s", d.best, (x) => x.toFixed(1)),
    row("per-request sd", d.requestSd, pct),
    row("per-launch sd", d.launchSd, pct),
  ].join("\n");
}
