// A minimal streaming client of SGLang's two APIs that records what a user feels: when each
// chunk arrived and how many tokens it carried. Timed requests use the native /generate
// (bench_serving's default backend: per-request prompt length, cached tokens, verify
// steps); the coding check uses chat completions (the chat template, as users ask). Plain
// HTTP (fetch + SSE), parsed here so that every chunk's arrival time is ours.

export interface Endpoint {
  /** e.g. http://127.0.0.1:30000 */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Aborts every request of the benchmark (its timeout). */
  signal?: AbortSignal;
}

/** A request's own time limit, ended early by the benchmark's. */
export function requestSignal(ep: { signal?: AbortSignal }, timeoutMs: number): AbortSignal {
  return ep.signal ? AbortSignal.any([AbortSignal.timeout(timeoutMs), ep.signal]) : AbortSignal.timeout(timeoutMs);
}

export interface StreamResult {
  ttftMs: number;
  /** Gaps between content chunks after the first (a chunk may carry several tokens). */
  itlMs: number[];
  e2eMs: number;
  outputTokens: number;
  promptTokens: number;
  /** Decode tokens/s of this request: tokens after the first over the time after the first. */
  decodeTokensPerSecond: number;
  text: string;
}

/** The JSON of each `data:` line of a server-sent event stream, as it arrives (`[DONE]` left out). */
async function* sseData(body: unknown): AsyncGenerator<unknown> {
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const bytes of body as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let sep: number;
    while ((sep = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, sep);
      buffer = buffer.slice(sep + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data !== "[DONE]") yield JSON.parse(data);
      }
    }
  }
}

function headers(ep: Endpoint): Record<string, string> {
  return { "content-type": "application/json", ...(ep.apiKey ? { authorization: `Bearer ${ep.apiKey}` } : {}) };
}

/**
 * One streaming chat completion (the chat template applied, as a user asks). Throws with the
 * server's answer on an HTTP error. `ignoreEos` (SGLang and vLLM honour it) forces exactly
 * `maxTokens`; text after the model's natural end is easy to draft and flatters speculation,
 * so the benchmark never sets it.
 */
export async function streamChat(ep: Endpoint, prompt: string, maxTokens: number, timeoutMs = 600_000, ignoreEos = false): Promise<StreamResult> {
  const started = performance.now();
  const res = await fetch(`${ep.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: headers(ep),
    body: JSON.stringify({
      model: ep.model,
      messages: [{ role: "user", content: prompt }],
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
      ignore_eos: ignoreEos,
    }),
    signal: requestSignal(ep, timeoutMs),
  });
  if (!res.ok || !res.body) throw new Error(`POST ${ep.baseUrl}/v1/chat/completions: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
  let first = 0;
  let last = 0;
  const gaps: number[] = [];
  let text = "";
  let chunks = 0;
  let usage: { completion_tokens?: number; prompt_tokens?: number } | undefined;
  for await (const data of sseData(res.body)) {
    const msg = data as { choices?: { delta?: { content?: string | null } }[]; usage?: typeof usage };
    if (msg.usage) usage = msg.usage;
    const content = msg.choices?.[0]?.delta?.content;
    if (!content) continue;
    const now = performance.now();
    if (first === 0) first = now;
    else gaps.push(now - last);
    last = now;
    chunks++;
    text += content;
  }
  if (first === 0) throw new Error(`${ep.baseUrl}: the stream ended without any content`);
  const end = performance.now();
  const outputTokens = usage?.completion_tokens ?? chunks;
  const decodeSeconds = (last - first) / 1000;
  return {
    ttftMs: first - started,
    itlMs: gaps,
    e2eMs: end - started,
    outputTokens,
    promptTokens: usage?.prompt_tokens ?? 0,
    decodeTokensPerSecond: decodeSeconds > 0 ? (outputTokens - 1) / decodeSeconds : NaN,
    text,
  };
}

/** One request of the native API as bench_serving's `sglang` backend sees it. */
export interface GenerateResult {
  ttftMs: number;
  e2eMs: number;
  /** Per chunk: ms since the previous chunk (the first: since the request), tokens it carried. */
  chunks: { gapMs: number; tokens: number }[];
  outputTokens: number;
  promptTokens: number;
  cachedTokens: number | null;
  /** Verification steps of this request; null without speculative decoding. */
  specVerifyCt: number | null;
  finishReason: string;
  text: string;
}

interface GenerateMeta {
  prompt_tokens?: number;
  completion_tokens?: number;
  cached_tokens?: number;
  spec_verify_ct?: number;
  finish_reason?: { type?: string } | string | null;
}

/**
 * One streaming request of SGLang's native `/generate`, the API bench_serving's default
 * backend measures: every chunk carries `meta_info` with the tokens so far, the prompt's
 * length in the server's own tokens, how many of them came from the prefix cache, and (with
 * speculative decoding) the verification steps, so acceptance is this request's own.
 * SGLang streams the text so far (cumulative) in each chunk.
 */
export async function streamGenerate(ep: Endpoint, text: string, sampling: { maxNewTokens: number; ignoreEos?: boolean }, timeoutMs = 600_000): Promise<GenerateResult> {
  const started = performance.now();
  const res = await fetch(`${ep.baseUrl}/generate`, {
    method: "POST",
    headers: headers(ep),
    body: JSON.stringify({ text, sampling_params: { max_new_tokens: sampling.maxNewTokens, temperature: 0, ignore_eos: sampling.ignoreEos ?? false }, stream: true }),
    signal: requestSignal(ep, timeoutMs),
  });
  if (!res.ok || !res.body) throw new Error(`POST ${ep.baseUrl}/generate: HTTP ${res.status} ${(await res.text()).slice(0, 300)}`);
  let last = started;
  let first = 0;
  let seen = 0;
  let out = "";
  let meta: GenerateMeta = {};
  const chunks: GenerateResult["chunks"] = [];
  for await (const data of sseData(res.body)) {
    const msg = data as { text?: string; meta_info?: GenerateMeta; error?: unknown };
    if (msg.error) throw new Error(`POST ${ep.baseUrl}/generate: ${JSON.stringify(msg.error).slice(0, 300)}`);
    if (msg.meta_info) meta = msg.meta_info;
    if (typeof msg.text === "string") out = msg.text;
    const tokens = (meta.completion_tokens ?? seen) - seen;
    if (tokens <= 0) continue;
    const now = performance.now();
    if (first === 0) first = now;
    chunks.push({ gapMs: now - last, tokens });
    last = now;
    seen += tokens;
  }
  if (first === 0) throw new Error(`${ep.baseUrl}/generate: the stream ended without any token`);
  const reason = typeof meta.finish_reason === "string" ? meta.finish_reason : (meta.finish_reason?.type ?? "unknown");
  return {
    ttftMs: first - started,
    e2eMs: performance.now() - started,
    chunks,
    outputTokens: seen,
    promptTokens: meta.prompt_tokens ?? 0,
    cachedTokens: typeof meta.cached_tokens === "number" ? meta.cached_tokens : null,
    specVerifyCt: typeof meta.spec_verify_ct === "number" ? meta.spec_verify_ct : null,
    finishReason: reason,
    text: out,
  };
}

/** The server's prompt length for `text` (one token generated): how the workload calibrates. */
export async function promptTokensOf(ep: Endpoint, text: string): Promise<number> {
  const r = await streamGenerate(ep, text, { maxNewTokens: 1 }, 120_000);
  if (!r.promptTokens) throw new Error(`${ep.baseUrl}/generate reported no prompt_tokens: cannot measure prompt lengths in the server's tokens`);
  return r.promptTokens;
}

/** The model's context length: SGLang's /v1/models `max_model_len`; undefined when not reported. */
export async function contextLength(ep: Endpoint): Promise<number | undefined> {
  const res = await fetch(`${ep.baseUrl}/v1/models`, { headers: headers(ep), signal: requestSignal(ep, 30_000) }).catch(() => undefined);
  if (!res?.ok) return undefined;
  const body = (await res.json().catch(() => ({}))) as { data?: { max_model_len?: number }[] };
  const n = body.data?.[0]?.max_model_len;
  return typeof n === "number" && n > 0 ? n : undefined;
}

/** SGLang's /flush_cache (empties the prefix cache; refused while requests run). True when it did. */
export async function flushCache(ep: Endpoint): Promise<boolean> {
  const res = await fetch(`${ep.baseUrl}/flush_cache`, { method: "POST", headers: headers(ep), signal: requestSignal(ep, 30_000) }).catch(() => undefined);
  return res?.ok === true;
}
