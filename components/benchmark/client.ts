// A minimal OpenAI-compatible streaming client that measures what a user feels: time to
// first token, inter-token latency, decode throughput. Plain HTTP (fetch + SSE), so it
// works against any OpenAI-compatible server (a real SGLang, vLLM, our simulator).

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

function headers(ep: Endpoint): Record<string, string> {
  return { "content-type": "application/json", ...(ep.apiKey ? { authorization: `Bearer ${ep.apiKey}` } : {}) };
}

/** One streaming chat completion. Throws with the server's answer on an HTTP error. */
export async function streamChat(ep: Endpoint, prompt: string, maxTokens: number, timeoutMs = 600_000): Promise<StreamResult> {
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
      // SGLang and vLLM honour this; others ignore it. Fixed lengths make runs comparable.
      ignore_eos: true,
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
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let sep: number;
    while ((sep = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, sep);
      buffer = buffer.slice(sep + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") continue;
        const msg = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; usage?: typeof usage };
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
    }
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

/**
 * SGLang's native /generate reports `spec_verify_ct` (verification steps) per request, so
 * the acceptance length of exactly our requests is completion tokens / verify steps.
 * Undefined when the server has no such API (not SGLang).
 */
export async function nativeAcceptLength(ep: Endpoint, prompts: string[], maxTokens: number): Promise<number | undefined> {
  let tokens = 0;
  let steps = 0;
  for (const text of prompts) {
    const res = await fetch(`${ep.baseUrl}/generate`, {
      method: "POST",
      headers: headers(ep),
      body: JSON.stringify({ text, sampling_params: { max_new_tokens: maxTokens, temperature: 0, ignore_eos: true } }),
      signal: requestSignal(ep, 600_000),
    });
    if (!res.ok) return undefined;
    const meta = ((await res.json()) as { meta_info?: { completion_tokens?: number; spec_verify_ct?: number } }).meta_info;
    if (!meta?.completion_tokens || !meta.spec_verify_ct) return undefined;
    tokens += meta.completion_tokens;
    steps += meta.spec_verify_ct;
  }
  return steps > 0 ? tokens / steps : undefined;
}
