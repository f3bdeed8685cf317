// bench_serving's formulas, written out here independently of run.ts (as its
// calculate_metrics computes them, with numpy's linear percentiles), over raw records, and
// every field of a phase checked against them. Records are varied (chunks of several
// tokens, a failed attempt, a retried one, a no-speculation phase) so that a formula that
// only holds on uniform data fails.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { MAX_ATTEMPTS, phaseStats, RawRecord } from "../../../components/benchmark/run";

/** numpy.percentile, linear interpolation. */
function npPercentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (rank - lo);
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** bench_serving's metrics of successful outputs over `durS` seconds. */
function benchServing(outputs: { ttft: number; latency: number; outputLen: number; promptLen: number; itl: number[] }[], durS: number) {
  const tpots = outputs.filter((o) => o.outputLen > 1).map((o) => (o.latency - o.ttft) / (o.outputLen - 1));
  const itls = outputs.flatMap((o) => o.itl);
  const ttfts = outputs.map((o) => o.ttft);
  const e2e = outputs.map((o) => o.latency);
  const total = outputs.reduce((a, o) => a + o.outputLen, 0);
  return {
    completed: outputs.length,
    total_input_tokens: outputs.reduce((a, o) => a + o.promptLen, 0),
    total_output_tokens: total,
    request_throughput: outputs.length / durS,
    output_throughput: total / durS,
    mean_ttft_ms: mean(ttfts),
    median_ttft_ms: npPercentile(ttfts, 50),
    p99_ttft_ms: npPercentile(ttfts, 99),
    mean_tpot_ms: mean(tpots),
    median_tpot_ms: npPercentile(tpots, 50),
    p99_tpot_ms: npPercentile(tpots, 99),
    mean_itl_ms: mean(itls),
    median_itl_ms: npPercentile(itls, 50),
    p99_itl_ms: npPercentile(itls, 99),
    mean_e2e_latency_ms: mean(e2e),
    median_e2e_latency_ms: npPercentile(e2e, 50),
    p99_e2e_latency_ms: npPercentile(e2e, 99),
  };
}

/**
 * bench_serving's sglang backend, on the same stream: the first chunk sets TTFT; each later
 * chunk's gap is divided over the tokens it brought (completion_tokens moved by n).
 */
function sglangBackendItl(chunks: [number, number][]): number[] {
  const out: number[] = [];
  chunks.forEach(([gap, n], i) => {
    if (i > 0) for (let k = 0; k < n; k++) out.push(gap / n);
  });
  return out;
}

function records(): RawRecord[] {
  const base = { phase: "concurrency-4", concurrency: 4, context_tokens: 128, kind: "chat", finish_reason: "length" };
  const rs: RawRecord[] = [];
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < 17; i++) {
    const chunks: [number, number][] = [[120 + rnd() * 400, 1]];
    let tokens = 1;
    while (tokens < 64) {
      const n = Math.min(64 - tokens, 1 + Math.floor(rnd() * 7));
      chunks.push([5 + rnd() * 60, n]);
      tokens += n;
    }
    const ttft = chunks[0][0];
    const e2e = chunks.reduce((a, [g]) => a + g, 0) + rnd() * 3;
    rs.push({ ...base, attempt: 1, ok: true, prompt_tokens: 120 + i, cached_tokens: i % 5 === 0 ? 16 : 0, output_tokens: tokens, ttft_ms: ttft, e2e_ms: e2e, chunks, spec_verify_ct: 10 + i });
  }
  // A request that failed once and then succeeded (counts once), and one that failed every attempt.
  rs.push({ ...base, attempt: 1, ok: false, error: "HTTP 503" });
  for (let a = 1; a <= MAX_ATTEMPTS; a++) rs.push({ ...base, attempt: a, ok: false, error: "connection reset" });
  return rs;
}

test("every field of a phase is bench_serving's formula over the raw records", () => {
  const rs = records();
  const dur = 12.345;
  const st = phaseStats("concurrency-4", 4, 128, rs, dur);
  const ok = rs.filter((r) => r.ok);
  const want = benchServing(
    ok.map((r) => ({ ttft: r.ttft_ms!, latency: r.e2e_ms!, outputLen: r.output_tokens!, promptLen: r.prompt_tokens!, itl: sglangBackendItl(r.chunks!) })),
    dur,
  );
  for (const [k, v] of Object.entries(want)) {
    const got = (st as unknown as Record<string, number>)[k];
    assert.ok(Math.abs(got - v) <= Math.max(0.011, Math.abs(v) * 1e-4), `${k}: ours ${got}, bench_serving ${v}`);
  }
  assert.equal(st.failed, 1, "a request that failed every attempt counts once; a retried success is not a failure");
  // The per-chunk ITL is vLLM's: gaps between chunks as they came.
  const gaps = ok.flatMap((r) => r.chunks!.slice(1).map(([g]) => g));
  assert.ok(Math.abs(st.median_chunk_itl_ms - npPercentile(gaps, 50)) < 0.011);
  // Decode rate: 1/TPOT per request; its median and spread.
  const rates = ok.map((r) => (1000 * (r.output_tokens! - 1)) / (r.e2e_ms! - r.ttft_ms!));
  assert.ok(Math.abs(st.decode_tokens_per_s - npPercentile(rates, 50)) < 0.011);
  assert.ok(Math.abs(st.decode_tokens_per_s_min - Math.min(...rates)) < 0.011 && Math.abs(st.decode_tokens_per_s_max - Math.max(...rates)) < 0.011);
  // Acceptance of exactly these requests: their tokens over their verify steps.
  const steps = ok.reduce((a, r) => a + r.spec_verify_ct!, 0);
  assert.ok(Math.abs(st.accept_length! - want.total_output_tokens / steps) < 0.001);
  assert.equal(st.cached_tokens, 16 * 4);
  assert.deepEqual(st.finish_reasons, { length: 17 });
});

test("without speculation (no spec_verify_ct) the phase reports no acceptance length; a phase with no success is an error", () => {
  const rs = records().map((r) => (r.ok ? { ...r, spec_verify_ct: null } : r));
  assert.equal(phaseStats("short", 1, 128, rs, 3).accept_length, null);
  assert.throws(() => phaseStats("short", 1, 128, rs.filter((r) => !r.ok), 3), /phase short: no request succeeded \(connection reset\)/);
});
