// The simulator's performance model: deterministic, pure, and exported so that
// benchmarks can be checked against it (it is the ground truth of a simulated host).
//
// Shape taken from the DFlash/DDTree papers rather than fitted numbers:
// - a drafter block of B tokens is accepted up to a saturating length;
// - a DDTree of budget N raises acceptance (tau), with diminishing returns, while the
//   verification cost grows linearly with N, so speed peaks at an intermediate budget;
// - the drafter attends to the whole context unless a draft window caps it, so a window
//   saves drafter work at long context (at a small cost in acceptance);
// - acceptance depends on the text: repetitive context is easy to draft (a drafter copies
//   what it saw in its window, as n-gram and DFlash drafters do), and so is what a model
//   writes after its natural end of answer when ignore_eos forces it on. `acceptLength`
//   is natural, varied text; `effectiveAcceptLength` is a given text.
import type { ServerArgs } from "./flags";
import { DEFAULT_SURFACE, PerfSurface, surfaceGain } from "./surface";

export interface SpecSettings {
  algorithm: string | null;
  blockSize: number;
  budget: number | null;
  topk: number;
  window: number | null;
  compactCache: boolean;
  steps: number;
}

export interface PerfPoint {
  /** Mean accepted tokens per verification step (SGLang's accept length). */
  acceptLength: number;
  /** Seconds per verification step for one request running alone. */
  stepSeconds: number;
  /** Single-stream decode tokens/s. */
  decodeTokensPerSecond: number;
}

/** Target step time without speculation at short context (~33 tok/s, a large MoE at batch 1). */
const TARGET_STEP_SECONDS = 0.03;
const DRAFT_STEP_SECONDS = 0.004;
const PREFILL_TOKENS_PER_SECOND = 20000;

export function specSettings(args: ServerArgs, env: Record<string, string | undefined>): SpecSettings {
  const num = (v: unknown): number | null => (typeof v === "number" ? v : null);
  const algorithm = typeof args.speculative_algorithm === "string" ? args.speculative_algorithm : null;
  return {
    algorithm,
    blockSize: num(args.speculative_num_draft_tokens) ?? 16,
    budget: num(args.speculative_ddtree_budget),
    topk: algorithm === "DDTREE" ? Number(env.SGLANG_DDTREE_MAX_TOPK ?? 4) : (num(args.speculative_eagle_topk) ?? 1),
    window: num(args.speculative_draft_window_size),
    compactCache: args.speculative_dflash_compact_cache === true,
    steps: num(args.speculative_num_steps) ?? 3,
  };
}

export function acceptLength(s: SpecSettings, contextTokens: number, surface: PerfSurface = DEFAULT_SURFACE): number {
  const chain = 1 + 5 * (1 - Math.exp(-s.blockSize / 8));
  let tau: number;
  switch (s.algorithm) {
    case null:
      return 1;
    case "DFLASH":
      tau = chain;
      break;
    case "DDTREE": {
      const budget = s.budget ?? s.blockSize;
      const topkFit = Math.max(0.5, 1 - 0.05 * Math.abs(s.topk - surface.topkBest));
      tau = chain * (1 + 0.45 * (1 - Math.exp(-budget / 8)) * topkFit);
      break;
    }
    default:
      tau = 1 + 2.5 * (1 - Math.exp(-s.steps / 3));
  }
  if (s.window !== null && contextTokens > s.window) tau *= 0.97;
  return Math.max(1, tau);
}

/** What the drafter sees of the text it drafts a token from (see `effectiveAcceptLength`). */
export interface TextTraits {
  /** `repetitionOf` the text inside the draft window, in [0, 1]. */
  repetition: number;
  /** The token comes after the model's natural end of answer (only ignore_eos gets there). */
  postEos: boolean;
}

/** A window that is all repetition drafts 1.8 times as far as natural text. */
const REPETITION_GAIN = 0.8;
/**
 * Text past the natural end (ignore_eos) is easy to draft: models fall into loops and
 * filler there, which drafters predict well; benchmarks that force it flatter speculation.
 */
const POST_EOS_GAIN = 1.6;

/**
 * Mean accepted tokens per verification step for a given text: the natural `acceptLength`,
 * raised by the repetition inside the draft window and after the natural end, capped at
 * what one step can accept (the block for DFLASH/DDTREE; draft steps + the bonus token for
 * chain drafters). Equals `acceptLength` for natural text (repetition 0, not post-EOS).
 */
export function effectiveAcceptLength(s: SpecSettings, contextTokens: number, t: TextTraits, surface: PerfSurface = DEFAULT_SURFACE): number {
  const natural = acceptLength(s, contextTokens, surface);
  if (s.algorithm === null) return natural;
  const perStep = s.algorithm === "DFLASH" || s.algorithm === "DDTREE" ? s.blockSize : s.steps + 1;
  const repetition = Math.min(1, Math.max(0, t.repetition));
  const raised = natural * (1 + REPETITION_GAIN * repetition) * (t.postEos ? POST_EOS_GAIN : 1);
  return Math.min(raised, Math.max(natural, perStep));
}

/** The model at one context length; `surface` (./surface.ts) reshapes it over the settings. */
export function perfAt(s: SpecSettings, contextTokens: number, speedScale = 1, surface: PerfSurface = DEFAULT_SURFACE): PerfPoint {
  const targetContext = 1 + (contextTokens / 65536) * 0.5;
  const tau = acceptLength(s, contextTokens, surface);
  let step = TARGET_STEP_SECONDS * targetContext;
  if (s.algorithm !== null) {
    const nodes = s.algorithm === "DDTREE" ? (s.budget ?? s.blockSize) : s.algorithm === "DFLASH" ? s.blockSize : s.steps * Math.max(1, s.topk);
    const draftContext = s.window !== null ? Math.min(contextTokens, s.window) : contextTokens;
    const draft = DRAFT_STEP_SECONDS * (1 + (draftContext / 32768) * 1.5) * (s.compactCache ? 0.9 : 1);
    step = (step * (1 + surface.nodeCost * nodes) + draft) / surfaceGain(surface, s);
  }
  step /= speedScale;
  return { acceptLength: round(tau), stepSeconds: step, decodeTokensPerSecond: round(tau / step) };
}

/**
 * Ground truth of a whole generation: decode tokens/s from the first to the last of
 * `outputTokens` tokens, as the context grows by one token per token.
 */
export function generationDecodeRate(s: SpecSettings, promptTokens: number, outputTokens: number, speedScale = 1, surface: PerfSurface = DEFAULT_SURFACE): number {
  let seconds = 0;
  for (let k = 1; k < outputTokens; k++) seconds += 1 / perfAt(s, promptTokens + k, speedScale, surface).decodeTokensPerSecond;
  return seconds > 0 ? (outputTokens - 1) / seconds : perfAt(s, promptTokens, speedScale, surface).decodeTokensPerSecond;
}

/**
 * Seconds from request arrival to the first token, for a prompt of `promptTokens` of which
 * the first `cachedTokens` come from the prefix cache: only the rest is prefilled
 * (srt/managers/schedule_batch.py: extend_input_len = len(fill_ids) - len(prefix_indices)).
 */
export function timeToFirstToken(promptTokens: number, s: SpecSettings, speedScale = 1, cachedTokens = 0, surface: PerfSurface = DEFAULT_SURFACE): number {
  const prefilled = promptTokens - Math.min(Math.max(0, cachedTokens), promptTokens);
  return 0.02 / speedScale + prefilled / (PREFILL_TOKENS_PER_SECOND * speedScale) + perfAt(s, promptTokens, speedScale, surface).stepSeconds;
}

/** Per-request slowdown when `running` requests share the batch (aggregate throughput still rises). */
export function batchSlowdown(running: number): number {
  return 1 + 0.08 * Math.max(0, running - 1);
}

/** Rough token count of a text: one token per 4 characters, at least 1. */
export function countTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** A repeated passage shows as word n-grams seen before; 6 words rarely repeat by chance. */
const NGRAM_WORDS = 6;

/** Whitespace as JavaScript's \s: words of `repetitionOf` are runs of anything else, compared exactly. */
function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/** Each word 6-gram of a text: where it starts and ends, and its previous and next occurrence. */
interface NgramIndex {
  start: Int32Array;
  end: Int32Array;
  /** Index of the same n-gram's previous occurrence, -1 if none. */
  prev: Int32Array;
  /** Index of the same n-gram's next occurrence, -1 if none. */
  next: Int32Array;
}

function ngramIndex(text: string): NgramIndex {
  // Each word as two 32-bit hashes of its characters (FNV-1a and djb2), so that no word is
  // ever cut out of the text as a string: this runs on every request's whole context.
  const most = (text.length >> 1) + 1;
  const wordStart = new Int32Array(most);
  const wordEnd = new Int32Array(most);
  const wordH1 = new Int32Array(most);
  const wordH2 = new Int32Array(most);
  let words = 0;
  for (let i = 0; i < text.length; ) {
    if (isSpace(text.charCodeAt(i))) {
      i++;
      continue;
    }
    let h1 = 2166136261 | 0;
    let h2 = 5381;
    wordStart[words] = i;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (isSpace(c)) break;
      h1 = Math.imul(h1 ^ c, 16777619);
      h2 = Math.imul(h2, 33) ^ c;
    }
    wordEnd[words] = i;
    wordH1[words] = h1;
    wordH2[words] = h2;
    words++;
  }
  const n = Math.max(0, words - NGRAM_WORDS + 1);
  const idx: NgramIndex = { start: new Int32Array(n), end: new Int32Array(n), prev: new Int32Array(n).fill(-1), next: new Int32Array(n).fill(-1) };
  // The last occurrence of each n-gram, by its two 32-bit hashes, in an open-addressing
  // table (a chance collision of both is about n^2 / 2^64: none in any text this sees).
  const slots = 1 << Math.ceil(Math.log2(2 * n + 2));
  const slotH1 = new Int32Array(slots);
  const slotH2 = new Int32Array(slots);
  const slotLast = new Int32Array(slots).fill(-1);
  for (let i = 0; i < n; i++) {
    let h1 = 2166136261 | 0;
    let h2 = 5381;
    for (let j = i; j < i + NGRAM_WORDS; j++) {
      h1 = Math.imul(h1 ^ wordH1[j], 16777619);
      h2 = Math.imul(h2, 33) ^ wordH2[j];
    }
    idx.start[i] = wordStart[i];
    idx.end[i] = wordEnd[i + NGRAM_WORDS - 1];
    let slot = (h1 ^ Math.imul(h2, 0x9e3779b1)) & (slots - 1);
    while (slotLast[slot] >= 0 && (slotH1[slot] !== h1 || slotH2[slot] !== h2)) slot = (slot + 1) & (slots - 1);
    const seen = slotLast[slot];
    if (seen >= 0) {
      idx.prev[i] = seen;
      idx.next[seen] = i;
    }
    slotH1[slot] = h1;
    slotH2[slot] = h2;
    slotLast[slot] = i;
  }
  return idx;
}

/**
 * How repetitive a text is, in [0, 1]: the fraction of its word 6-grams that already
 * occurred earlier in it. A sentence repeated 100 times gives about 0.99; varied prose, or
 * a document of distinct records, about 0. One pass over the text (it runs per request).
 */
export function repetitionOf(text: string): number {
  const { prev } = ngramIndex(text);
  let repeated = 0;
  for (let i = 0; i < prev.length; i++) if (prev[i] >= 0) repeated++;
  return prev.length ? repeated / prev.length : 0;
}

/**
 * `repetitionOf(text.slice(from, to))` for each of `windows` (character offsets), counting
 * the n-grams wholly inside a window, in one pass: both ends of the windows must never move
 * back. Gives the draft window's repetition for every token of a generation at the cost of
 * one `repetitionOf`.
 */
export function windowRepetitions(text: string, windows: ReadonlyArray<readonly [from: number, to: number]>): number[] {
  const { start, end, prev, next } = ngramIndex(text);
  const n = start.length;
  let lo = 0; // first n-gram starting at or after `from`
  let hi = 0; // first n-gram ending after `to`
  let repeated = 0; // n-grams in [lo, hi) whose previous occurrence is in [lo, hi) too
  const out: number[] = [];
  let before: readonly [number, number] = [0, 0];
  for (const w of windows) {
    if (w[0] < before[0] || w[1] < before[1]) throw new Error(`windowRepetitions: window [${w[0]}, ${w[1]}) moves back from [${before[0]}, ${before[1]})`);
    before = w;
    for (; lo < n && start[lo] < w[0]; lo++) {
      // Leaving: the next occurrence (if inside) no longer has its previous one in the window.
      if (lo < hi && next[lo] >= 0 && next[lo] < hi) repeated--;
    }
    if (hi < lo) hi = lo;
    for (; hi < n && end[hi] <= w[1]; hi++) if (prev[hi] >= lo) repeated++;
    out.push(hi > lo ? repeated / (hi - lo) : 0);
  }
  return out;
}

/**
 * The effective acceptance of every output token as the drafter meets it. The context of
 * token k is the prompt (`countTokens` 4-character tokens), `joiner`, then output tokens
 * 0..k-1; the drafter's text is the last `s.window` tokens of that context when a draft
 * window is set, else all of it (DFlash's drafter attends to the whole context unless
 * --speculative-draft-window-size caps its KV cache). Tokens from `naturalEnd` on are post-EOS.
 */
export function acceptancePerToken(s: SpecSettings, prompt: string, joiner: string, output: readonly string[], naturalEnd: number, surface: PerfSurface = DEFAULT_SURFACE): number[] {
  const promptTokens = countTokens(prompt);
  if (s.algorithm === null) return output.map(() => 1);
  const outputStart: number[] = [];
  let at = prompt.length + joiner.length;
  for (const token of output) {
    outputStart.push(at);
    at += token.length;
  }
  outputStart.push(at);
  const tokenStart = (t: number) => (t < promptTokens ? Math.min(4 * t, prompt.length) : outputStart[t - promptTokens]);
  const windows = output.map((_, k) => {
    const context = promptTokens + k;
    return [tokenStart(s.window === null ? 0 : Math.max(0, context - s.window)), tokenStart(context)] as const;
  });
  const repetition = windowRepetitions(prompt + joiner + output.join(""), windows);
  return output.map((_, k) => effectiveAcceptLength(s, promptTokens + k, { repetition: repetition[k], postEos: k >= naturalEnd }, surface));
}
