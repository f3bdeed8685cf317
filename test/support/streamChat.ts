// One streamed chat completion against a server (simulated SGLang), for tests that need a
// request in flight.

/** Streams a chat completion from `baseUrl` (http://ADDRESS:PORT); whether it ended with [DONE] (false when cut, or never answered). */
export async function streamChat(baseUrl: string, maxTokens: number): Promise<boolean> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    // ignore_eos: the request runs its full length (the answer to "hello" ends far sooner).
    body: JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, stream: true, ignore_eos: true }),
  }).catch(() => undefined);
  if (!res) return false;
  let text = "";
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
  } catch {
    return false;
  }
  return text.includes("data: [DONE]");
}
