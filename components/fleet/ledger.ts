// A client ledger: requests sent through the fleet's balancer at a fixed rate (open loop: a
// slow answer never delays the next request), a share of them streaming, each outcome
// recorded. What a user of the fleet sees during a rollout: `completed` (a whole answer, its
// usage saying all `maxTokens` tokens, streamed or not), `failed` (an HTTP error, or no
// connection), `cut` (an answer that began and ended short: without [DONE], with fewer tokens,
// or a body that broke off), `garbled` (a whole answer that is not text: U+FFFD or control
// characters, raw or escaped in the JSON). OpenAI-compatible chat completions; `ignore_eos` so
// every answer has its full length.

export interface LedgerOptions {
  /** The balancer's URL, e.g. http://127.0.0.13:8080 */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Requests started per second. */
  perSecond: number;
  /** Every Nth request streams (3: a third of them). */
  streamEvery: number;
  maxTokens: number;
  /** A request's own time limit; past it, it counts as failed (or cut, once its stream began). */
  timeoutMs: number;
}

export interface Outcome {
  /** ms since the ledger started, when the request was sent. */
  at: number;
  stream: boolean;
  result: "completed" | "failed" | "cut" | "garbled";
  /** ms from send to the answer's end. */
  ms: number;
  why?: string;
}

export interface LedgerReport {
  sent: number;
  completed: number;
  failed: number;
  cut: number;
  garbled: number;
  streaming: number;
  seconds: number;
  /** Each outcome that was not a completion. */
  problems: Outcome[];
  /** Completed requests per 10 s window of send time (the capacity the clients saw). */
  completedPer10s: number[];
}

/** One request through the balancer, and how it ended (a ledger's; also a test's long stream). */
export async function oneRequest(o: Pick<LedgerOptions, "baseUrl" | "model" | "apiKey" | "maxTokens" | "timeoutMs"> & { signal?: AbortSignal }, stream: boolean): Promise<Pick<Outcome, "result" | "why">> {
  let res: Response;
  try {
    res = await fetch(`${o.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify({ model: o.model, messages: [{ role: "user", content: "Explain speculative decoding briefly." }], max_tokens: o.maxTokens, ignore_eos: true, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }),
      signal: o.signal ? AbortSignal.any([AbortSignal.timeout(o.timeoutMs), o.signal]) : AbortSignal.timeout(o.timeoutMs),
    });
  } catch (e) {
    return { result: "failed", why: `no answer: ${(e as Error).message}` };
  }
  if (!res.ok) return { result: "failed", why: `HTTP ${res.status}: ${(await res.text().catch(() => "")).slice(0, 200)}` };
  let body = "";
  try {
    if (!stream) body = await res.text();
    else for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) body += Buffer.from(chunk).toString("utf8");
  } catch (e) {
    return { result: "cut", why: `the answer broke off: ${(e as Error).message}` };
  }
  // Not text: what a broken server sends (the simulator's corruptOutput), raw or JSON-escaped.
  if (/\uFFFD|\\ufffd|\\u00(0[0-8bcef]|1[0-9a-f])/i.test(body)) return { result: "garbled", why: `the answer is not text: ${JSON.stringify(body.slice(0, 120))}` };
  if (stream) {
    if (!/^data: \[DONE\]$/m.test(body)) return { result: "cut", why: `the stream ended without [DONE] after ${body.length} bytes` };
    // A server that aborts a stream still ends it with [DONE] (after an error chunk): only the
    // whole length, in the usage chunk, is a completion.
    const tokens = [...body.matchAll(/"completion_tokens":\s*(\d+)/g)].map((m) => Number(m[1])).at(-1);
    return tokens === o.maxTokens ? { result: "completed" } : { result: "cut", why: `the stream ended with ${tokens ?? "no"} completion tokens of ${o.maxTokens}` };
  }
  try {
    const j = JSON.parse(body) as { usage?: { completion_tokens?: number } };
    return j.usage?.completion_tokens === o.maxTokens ? { result: "completed" } : { result: "cut", why: `${j.usage?.completion_tokens ?? "no"} completion tokens of ${o.maxTokens}` };
  } catch {
    return { result: "cut", why: `not a whole JSON answer (${body.length} bytes)` };
  }
}

/** Starts sending; `stop` sends no more, waits for the requests in flight, and reports. */
export function startLedger(o: LedgerOptions): { stop: () => Promise<LedgerReport>; sent: () => number } {
  const t0 = performance.now();
  const outcomes: Promise<Outcome>[] = [];
  let n = 0;
  const send = () => {
    const stream = n % o.streamEvery === 0;
    n++;
    const at = performance.now() - t0;
    outcomes.push(oneRequest(o, stream).then((r) => ({ at, stream, ms: performance.now() - t0 - at, ...r })));
  };
  send();
  const timer = setInterval(send, 1000 / o.perSecond);
  return {
    sent: () => n,
    async stop() {
      clearInterval(timer);
      const all = await Promise.all(outcomes);
      const seconds = (performance.now() - t0) / 1000;
      const windows = Array.from({ length: Math.ceil(seconds / 10) }, () => 0);
      for (const x of all) if (x.result === "completed") windows[Math.floor(x.at / 10_000)]++;
      const count = (r: Outcome["result"]) => all.filter((x) => x.result === r).length;
      return { sent: all.length, completed: count("completed"), failed: count("failed"), cut: count("cut"), garbled: count("garbled"), streaming: all.filter((x) => x.stream).length, seconds, problems: all.filter((x) => x.result !== "completed"), completedPer10s: windows };
    },
  };
}
