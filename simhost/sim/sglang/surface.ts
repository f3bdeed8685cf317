// The shape of the performance model's surface over the DDTree settings, as a host's
// configuration may override it (`surface` in the simulator's sglang.json), so that a sweep
// strategy is measured against several shapes rather than tuned to one. Not a fact of
// SGLang: a yardstick. The default is the model of ./perf.ts unchanged (no bumps, no
// out-of-memory region, no noise); an override changes:
// - the cost of a tree node in the target's verification pass (`nodeCost`) and the topk the
//   drafter fits best (`topkBest`), which move the model's own peak;
// - bumps: a speed factor 1 + height * exp(-d^2 / 2) around a point of the grid, d measured
//   in octaves of budget, topk and window divided by the bump's widths (a width left out
//   ignores that axis); a ridge measures d along budget/topk (trees as wide as they are deep
//   win), so the good settings lie on a diagonal;
// - an out-of-memory region: a tree of budget x topk nodes (x `windowNoneFactor` without a
//   draft window, whose drafter KV cache is the whole context) from `treeNodes` on does not
//   fit: the load fails with torch's CUDA out-of-memory, as a too large CUDA graph capture does
//   (srt/model_executor/cuda_graph_runner.py);
// - noise: each request's step time is multiplied by 1 + sd * z, z a standard normal drawn
//   from a hash of the seed, the settings, the launch and the request's number in the
//   server's life (so a run is reproducible, and two requests differ);
// - launch-to-launch noise (`noise.launchSd`, defaults to 0.015 where a `noise` section is
//   given; none without one, so a surface without noise stays deterministic): each start of
//   the server draws one more factor 1 + launchSd * z, from the seed, the settings and the
//   launch's ordinal on the host (./launches.ts), and every request of that server's life is
//   slowed by it. Repeated passes on one server share it and cannot average it away; only
//   another launch draws another. Real servers differ so (a CUDA graph captured anew, another
//   memory layout, another clock), but how much is not measured for SGLang with DFlash that
//   we know of: 1.5 % is an assumption. What is known points both ways: repeated runs on one
//   live server spread little (SGLang 0.1-0.3 % coefficient of variation at concurrency 1-16,
//   2.5 % at 32, in vllm-project/vllm#53436), a freshly restarted vLLM served 3 % more
//   throughput than the same server after an hour of other benchmarks (vllm-project/vllm
//   #42484), and whole reproductions elsewhere land 6-14 % apart
//   (anyscale/llm-continuous-batching-benchmarks#4; another machine, not only another launch).
import type { SpecSettings } from "./perf";

export interface SurfaceBump {
  /** Relative speed gain at the centre (0.1: 10 % faster). */
  height: number;
  budget: number;
  topk: number;
  /** Window in tokens, or "none" (counted as 65536). */
  window?: number | "none";
  /** Widths in octaves per axis; an axis without a width does not matter. */
  widths: { budget?: number; topk?: number; window?: number };
  /** Measure budget's distance along budget/topk (a diagonal ridge) instead of budget alone. */
  ridge?: boolean;
}

export interface PerfSurface {
  /** Relative verification cost of one tree node. Defaults to 0.012. */
  nodeCost: number;
  /** The topk the drafter fits best. Defaults to 4. */
  topkBest: number;
  bumps: SurfaceBump[];
  /** Trees of this many nodes (budget x topk, x windowNoneFactor without a window) and more fail to load. */
  oom: { treeNodes: number; windowNoneFactor: number } | null;
  /**
   * Measurement noise: `sd` per request, `launchSd` per start of the server (persistent over
   * its life), both relative; `seed` makes them reproducible. `launchSd` defaults to
   * DEFAULT_LAUNCH_SD.
   */
  noise: { sd: number; launchSd: number; seed: number } | null;
}

/** The launch-to-launch sd a surface with noise gets unless it says otherwise: an assumption (see above). */
export const DEFAULT_LAUNCH_SD = 0.015;

export const DEFAULT_SURFACE: PerfSurface = { nodeCost: 0.012, topkBest: 4, bumps: [], oom: null, noise: null };

const octaves = (tokens: number | "none" | null | undefined) => Math.log2(tokens === "none" || tokens === null || tokens === undefined ? 65536 : tokens);

function fail(what: string): never {
  throw new Error(`surface: ${what}`);
}

const num = (v: unknown, what: string, min = -Infinity): number => (typeof v === "number" && Number.isFinite(v) && v >= min ? v : fail(`${what} must be a number${min > -Infinity ? ` >= ${min}` : ""}, got ${JSON.stringify(v)}`));

function only(o: Record<string, unknown>, keys: string[], what: string): void {
  const unknown = Object.keys(o).filter((k) => !keys.includes(k));
  if (unknown.length) fail(`${what} has unknown key(s) ${unknown.join(", ")} (known: ${keys.join(", ")})`);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Checks a surface override (JSON) and fills in the defaults; unknown keys are an error. */
export function parseSurface(raw: unknown): PerfSurface {
  if (raw === undefined || raw === null) return DEFAULT_SURFACE;
  if (!isObject(raw)) fail(`must be an object, got ${JSON.stringify(raw)}`);
  only(raw, ["nodeCost", "topkBest", "bumps", "oom", "noise"], "surface");
  const bumps = raw.bumps ?? [];
  if (!Array.isArray(bumps)) fail("bumps must be a list");
  return {
    nodeCost: raw.nodeCost === undefined ? DEFAULT_SURFACE.nodeCost : num(raw.nodeCost, "nodeCost", 0),
    topkBest: raw.topkBest === undefined ? DEFAULT_SURFACE.topkBest : num(raw.topkBest, "topkBest", 1),
    bumps: bumps.map((b: unknown, i) => {
      if (!isObject(b)) fail(`bumps[${i}] must be an object`);
      only(b, ["height", "budget", "topk", "window", "widths", "ridge"], `bumps[${i}]`);
      const widths = b.widths ?? {};
      if (!isObject(widths)) fail(`bumps[${i}].widths must be an object`);
      only(widths, ["budget", "topk", "window"], `bumps[${i}].widths`);
      const w = (k: string) => (widths[k] === undefined ? undefined : num(widths[k], `bumps[${i}].widths.${k}`, 1e-6));
      const window = b.window === undefined || b.window === "none" ? b.window : num(b.window, `bumps[${i}].window`, 1);
      return {
        height: num(b.height, `bumps[${i}].height`, -0.99),
        budget: num(b.budget, `bumps[${i}].budget`, 1),
        topk: num(b.topk, `bumps[${i}].topk`, 1),
        ...(window !== undefined ? { window: window as number | "none" } : {}),
        widths: { budget: w("budget"), topk: w("topk"), window: w("window") },
        ...(b.ridge !== undefined ? { ridge: b.ridge === true } : {}),
      };
    }),
    oom: raw.oom === undefined || raw.oom === null ? null : isObject(raw.oom) ? (only(raw.oom, ["treeNodes", "windowNoneFactor"], "oom"), { treeNodes: num(raw.oom.treeNodes, "oom.treeNodes", 1), windowNoneFactor: raw.oom.windowNoneFactor === undefined ? 1 : num(raw.oom.windowNoneFactor, "oom.windowNoneFactor", 0) }) : fail("oom must be an object or null"),
    noise:
      raw.noise === undefined || raw.noise === null
        ? null
        : isObject(raw.noise)
          ? (only(raw.noise, ["sd", "launchSd", "seed"], "noise"), { sd: num(raw.noise.sd, "noise.sd", 0), launchSd: raw.noise.launchSd === undefined ? DEFAULT_LAUNCH_SD : num(raw.noise.launchSd, "noise.launchSd", 0), seed: num(raw.noise.seed ?? 1, "noise.seed") })
          : fail("noise must be an object or null"),
  };
}

/** Pure: the speed factor of the surface's bumps for these settings (1 without bumps). */
export function surfaceGain(surface: PerfSurface, s: SpecSettings): number {
  if (s.algorithm === null || surface.bumps.length === 0) return 1;
  const budget = Math.log2(s.budget ?? s.blockSize);
  const topk = Math.log2(Math.max(1, s.topk));
  const window = octaves(s.window);
  let gain = 1;
  for (const b of surface.bumps) {
    const axis = (d: number, width: number | undefined) => (width === undefined ? 0 : (d / width) ** 2);
    const budgetD = b.ridge ? budget - topk - (Math.log2(b.budget) - Math.log2(b.topk)) : budget - Math.log2(b.budget);
    const d2 = axis(budgetD, b.widths.budget) + (b.ridge ? 0 : axis(topk - Math.log2(b.topk), b.widths.topk)) + axis(window - octaves(b.window), b.widths.window);
    gain *= 1 + b.height * Math.exp(-d2 / 2);
  }
  return gain;
}

/** Pure: whether these settings fall in the surface's out-of-memory region. */
export function outOfMemory(surface: PerfSurface, s: SpecSettings): boolean {
  if (!surface.oom || s.algorithm !== "DDTREE") return false;
  const nodes = (s.budget ?? s.blockSize) * s.topk * (s.window === null ? surface.oom.windowNoneFactor : 1);
  return nodes >= surface.oom.treeNodes;
}

/**
 * FNV-1a of a string, 32 bits, then murmur3's finaliser: FNV-1a alone barely mixes the last
 * characters, so keys that differ only there (a request's number, "a" and "b" below) gave
 * correlated uniforms and normals off by 5 % in mean and sd.
 */
function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A standard normal by Box-Muller from two hashes of `key`: the same key, the same draw. */
function normalOf(key: string): number {
  const u1 = (hash(`${key}|a`) + 1) / 4294967297;
  const u2 = hash(`${key}|b`) / 4294967296;
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

const settingsKey = (s: SpecSettings) => `${s.algorithm}|${s.budget}|${s.topk}|${s.window}|${s.compactCache}`;

/**
 * Pure: the step-time factor of request number `request` of launch `launch` of a server with
 * these settings (1 without noise): 1 + sd * z, clamped so that a step never takes less than
 * a fifth of its time. The launch is part of the key: another start of the same configuration
 * draws other requests.
 */
export function requestNoise(surface: PerfSurface, s: SpecSettings, launch: number, request: number): number {
  if (!surface.noise || surface.noise.sd === 0) return 1;
  return Math.max(0.2, 1 + surface.noise.sd * normalOf(`${surface.noise.seed}|${settingsKey(s)}|${launch}|${request}`));
}

/**
 * Pure: the step-time factor every request of launch number `launch` (its ordinal on the
 * host) of a server with these settings shares (1 without noise): 1 + launchSd * z, clamped
 * as a request's. Drawn apart from the requests' (its own key), so it is not one of them.
 */
export function launchOffset(surface: PerfSurface, s: SpecSettings, launch: number): number {
  if (!surface.noise || surface.noise.launchSd === 0) return 1;
  return Math.max(0.2, 1 + surface.noise.launchSd * normalOf(`${surface.noise.seed}|launch|${settingsKey(s)}|${launch}`));
}
