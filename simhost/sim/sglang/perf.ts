// The simulator's performance model: deterministic, pure, and exported so that
// benchmarks can be checked against it (it is the ground truth of a simulated host).
//
// Shape taken from the DFlash/DDTree papers rather than fitted numbers:
// - a drafter block of B tokens is accepted up to a saturating length;
// - a DDTree of budget N raises acceptance (tau), with diminishing returns, while the
//   verification cost grows linearly with N, so speed peaks at an intermediate budget;
// - the drafter attends to the whole context unless a draft window caps it, so a window
//   saves drafter work at long context (at a small cost in acceptance).
import type { ServerArgs } from "./flags";

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

export function acceptLength(s: SpecSettings, contextTokens: number): number {
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
      const topkFit = Math.max(0.5, 1 - 0.05 * Math.abs(s.topk - 4));
      tau = chain * (1 + 0.45 * (1 - Math.exp(-budget / 8)) * topkFit);
      break;
    }
    default:
      tau = 1 + 2.5 * (1 - Math.exp(-s.steps / 3));
  }
  if (s.window !== null && contextTokens > s.window) tau *= 0.97;
  return Math.max(1, tau);
}

export function perfAt(s: SpecSettings, contextTokens: number, speedScale = 1): PerfPoint {
  const targetContext = 1 + (contextTokens / 65536) * 0.5;
  const tau = acceptLength(s, contextTokens);
  let step = TARGET_STEP_SECONDS * targetContext;
  if (s.algorithm !== null) {
    const nodes = s.algorithm === "DDTREE" ? (s.budget ?? s.blockSize) : s.algorithm === "DFLASH" ? s.blockSize : s.steps * Math.max(1, s.topk);
    const draftContext = s.window !== null ? Math.min(contextTokens, s.window) : contextTokens;
    const draft = DRAFT_STEP_SECONDS * (1 + (draftContext / 32768) * 1.5) * (s.compactCache ? 0.9 : 1);
    step = step * (1 + 0.012 * nodes) + draft;
  }
  step /= speedScale;
  return { acceptLength: round(tau), stepSeconds: step, decodeTokensPerSecond: round(tau / step) };
}

/**
 * Ground truth of a whole generation: decode tokens/s from the first to the last of
 * `outputTokens` tokens, as the context grows by one token per token.
 */
export function generationDecodeRate(s: SpecSettings, promptTokens: number, outputTokens: number, speedScale = 1): number {
  let seconds = 0;
  for (let k = 1; k < outputTokens; k++) seconds += 1 / perfAt(s, promptTokens + k, speedScale).decodeTokensPerSecond;
  return seconds > 0 ? (outputTokens - 1) / seconds : perfAt(s, promptTokens, speedScale).decodeTokensPerSecond;
}

/** Seconds from request arrival to the first token, for a prompt of `promptTokens`. */
export function timeToFirstToken(promptTokens: number, s: SpecSettings, speedScale = 1): number {
  return 0.02 / speedScale + promptTokens / (PREFILL_TOKENS_PER_SECOND * speedScale) + perfAt(s, promptTokens, speedScale).stepSeconds;
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
