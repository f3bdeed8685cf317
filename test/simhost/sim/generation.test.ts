// The simulator's generation routes (simhost/sim/sglang/generation.ts), held to what real
// SGLang returns (paths under python/sglang/ of sgl-project/sglang), and to the performance
// model: acceptance follows the text, so repetitive or post-EOS text reads high.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { acceptLength, countTokens, generationDecodeRate, specSettings } from "../../../simhost/sim/sglang/perf";
import { completionText } from "../../../simhost/sim/sglang/text";
import { GenerateMeta, freePort, generate, launch, sandbox, status, until, withServingSim } from "../../support/localSim";

const dflash = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];
const SPEC = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});
const post = (port: number, route: string, body: object) => fetch(`http://127.0.0.1:${port}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const meta = async (port: number, body: object): Promise<GenerateMeta> => (await generate(port, body)).events[0].meta_info!;

/** ~1000 tokens, each kind ending in a request for a long answer (natural end 4096: no post-EOS below that). */
const repeated = "Note t: speculative decoding drafts several tokens and verifies them in one pass. ".repeat(48) + "Summarize the notes above in detail.";
const varied = Array.from({ length: 70 }, (_, i) => `Record ${i}: order ${(i * 7919) % 10007} shipped to depot ${(i * 31) % 97} on day ${i % 365}.`).join("\n") + "\nSummarize the records above in detail.";

// tokenizer_manager.py: spec_verify_ct per request; spec_accept_length = completion_tokens / spec_verify_ct.
test("acceptance follows the text: a repeated sentence drafts far better than varied text; ignore_eos past the end flatters too", async () => {
  await withServingSim({ speedScale: 20 }, dflash, async ({ port }) => {
    const info = async () => ((await (await fetch(`http://127.0.0.1:${port}/server_info`)).json()) as { internal_states: { avg_spec_accept_length: number }[] }).internal_states[0].avg_spec_accept_length;
    assert.equal(await info(), Math.round(acceptLength(SPEC, 0) * 1000) / 1000, "the model's own before any request");
    const natural = await meta(port, { text: varied, sampling_params: { max_new_tokens: 400 } });
    const flattered = await meta(port, { text: repeated, sampling_params: { max_new_tokens: 400 } });
    const truth = acceptLength(SPEC, countTokens(varied));
    assert.ok(countTokens(varied) > 900 && countTokens(repeated) > 900);
    assert.ok(Math.abs(natural.spec_accept_length! / truth - 1) <= 0.05, `varied: ${natural.spec_accept_length} vs acceptLength ${truth}`);
    assert.ok(flattered.spec_accept_length! > 1.4 * natural.spec_accept_length!, `repeated ${flattered.spec_accept_length} vs varied ${natural.spec_accept_length}`);
    // "hi" ends by itself after 48..207 tokens; ignore_eos makes the rest post-EOS.
    const end = completionText("hi", 1000, false).naturalEnd;
    const postEos = await meta(port, { text: "hi", sampling_params: { max_new_tokens: end + 600, ignore_eos: true } });
    assert.ok(postEos.spec_accept_length! > 1.3 * truth, `post-EOS ${postEos.spec_accept_length}`);
    // /server_info: over the requests served so far.
    const served = [natural, flattered, postEos];
    const average = served.reduce((a, m) => a + m.completion_tokens, 0) / served.reduce((a, m) => a + m.spec_verify_ct!, 0);
    assert.equal(await info(), Math.round(average * 1000) / 1000);
  });
});

// schedule_batch.py Req.check_finished: max_new_tokens, else EOS unless ignore_eos.
test("finish reasons: the model's own end is 'stop' unless ignore_eos; max tokens are 'length'", async () => {
  await withServingSim({ speedScale: 20 }, dflash, async ({ port }) => {
    const end = completionText("hi", 1000, false).naturalEnd;
    const stopped = await meta(port, { text: "hi", sampling_params: { max_new_tokens: 1000 } });
    assert.deepEqual([stopped.completion_tokens, stopped.finish_reason], [end, { type: "stop", matched: 151645 }]);
    const forced = await meta(port, { text: "hi", sampling_params: { max_new_tokens: 300, ignore_eos: true } });
    assert.deepEqual([forced.completion_tokens, forced.finish_reason], [300, { type: "length", length: 300 }]);
    assert.equal((await meta(port, { text: "hi" })).completion_tokens, Math.min(128, end), "max_new_tokens defaults to 128");

    const chat = async (extra: object) => (await (await post(port, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 1000, ...extra })).json()) as { choices: { finish_reason: string }[]; usage: { completion_tokens: number; prompt_tokens_details: unknown } };
    const own = await chat({});
    assert.deepEqual([own.choices[0].finish_reason, own.usage.completion_tokens], ["stop", end]);
    const long = await chat({ ignore_eos: true, max_tokens: 300 });
    assert.deepEqual([long.choices[0].finish_reason, long.usage.completion_tokens], ["length", 300]);
    assert.equal(own.usage.prompt_tokens_details, null, "no --enable-cache-report");
  });
});

// http_server.py generate_request: SSE of `data: {text, meta_info, index}`, then [DONE];
// the text is cumulative (no --incremental-streaming-output).
test("streaming /generate: every chunk parses, text is cumulative, the last carries finish_reason", async () => {
  await withServingSim({ speedScale: 5 }, dflash, async ({ port }) => {
    const body = { text: varied, sampling_params: { max_new_tokens: 120 } };
    const r = await generate(port, { ...body, stream: true });
    assert.equal(r.done, true);
    assert.ok(r.events.length > 5, `${r.events.length} chunks`);
    const metas = r.events.map((e) => e.meta_info!);
    for (let i = 1; i < metas.length; i++) {
      assert.ok(metas[i].completion_tokens > metas[i - 1].completion_tokens);
      assert.ok(r.events[i].text!.startsWith(r.events[i - 1].text!), "cumulative text");
      assert.equal(metas[i - 1].finish_reason, null);
    }
    const last = metas.at(-1)!;
    assert.deepEqual(last.finish_reason, { type: "length", length: 120 });
    assert.equal(last.completion_tokens, 120);
    assert.equal(last.spec_accept_length, last.completion_tokens / last.spec_verify_ct!);
    assert.ok(r.events.every((e) => e.index === 0 && e.meta_info!.prompt_tokens === countTokens(varied)));
    assert.equal(r.events.at(-1)!.text, (await generate(port, body)).events[0].text, "the same text as without streaming");
  });
});

// Speculative decoding streams what each verification step accepted: chunks of about the
// acceptance length, one per step, at the decode rate the performance model predicts.
test("tokens arrive in bursts of about the acceptance length, at the model's decode rate", async () => {
  await withServingSim({}, dflash, async ({ port }) => {
    const r = await generate(port, { text: varied, sampling_params: { max_new_tokens: 400 }, stream: true });
    const tokens = r.events.map((e) => e.meta_info!.completion_tokens);
    assert.equal(tokens.at(-1), 400);
    const perChunk = (400 - tokens[0]) / (tokens.length - 1);
    const tau = acceptLength(SPEC, countTokens(varied));
    assert.ok(Math.abs(perChunk / tau - 1) < 0.1, `${perChunk.toFixed(2)} tokens per chunk, acceptance ${tau.toFixed(2)}`);
    const rate = (400 - tokens[0]) / ((r.atMs.at(-1)! - r.atMs[0]) / 1000);
    const want = generationDecodeRate(SPEC, countTokens(varied), 400);
    assert.ok(Math.abs(rate / want - 1) < 0.05, `${rate.toFixed(1)} tokens/s vs ${want.toFixed(1)}`);
  });
});

// tokenizer_manager.py _validate_one_request: prompt + max_new_tokens >= context length is a
// ValueError. Without streaming: HTTP 400 (serving_base.py create_error_response;
// http_server.py _create_error_response). Streaming: an error event in the 200 stream.
test("context length: from config.json or --context-length; too long a request is refused with SGLang's message", async () => {
  const sb = sandbox({ speedScale: 20 });
  fs.writeFileSync(path.join(sb.dir, "model/config.json"), JSON.stringify({ sim_size_gib: 590, max_position_embeddings: 4096 }));
  const port = await freePort();
  const server = launch(sb.env, dflash(sb.dir, port));
  try {
    await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    const models = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: { max_model_len: number }[] };
    assert.equal(models.data[0].max_model_len, 4096);
    const prompt = "x ".repeat(4000 * 2); // 4000 tokens
    const message = "Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a total of 4196 tokens: 4000 tokens from the input messages and 196 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.";
    const chat = await post(port, "/v1/chat/completions", { messages: [{ role: "user", content: prompt }], max_tokens: 196 });
    assert.equal(chat.status, 400);
    assert.deepEqual(await chat.json(), { object: "error", message, type: "BadRequestError", param: null, code: 400 });
    const streamed = await post(port, "/v1/chat/completions", { messages: [{ role: "user", content: prompt }], max_tokens: 196, stream: true });
    assert.equal(streamed.status, 200, "the stream has begun when the check fails");
    assert.equal(await streamed.text(), `data: ${JSON.stringify({ error: { object: "error", message, type: "BadRequestError", param: null, code: 400 } })}\n\ndata: [DONE]\n\n`);
    const native = await generate(port, { text: prompt, sampling_params: { max_new_tokens: 196 } });
    assert.deepEqual([native.status, native.events[0]], [400, { error: { message } }]);
    const nativeStream = await generate(port, { text: prompt, sampling_params: { max_new_tokens: 196 }, stream: true });
    assert.deepEqual([nativeStream.status, nativeStream.events, nativeStream.done], [200, [{ error: { message } }], true]);
    assert.equal((await generate(port, { text: prompt, sampling_params: { max_new_tokens: 95 } })).status, 200, "4095 tokens fit");
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
  await withServingSim({}, (dir, p) => [...dflash(dir, p), "--context-length", "32768"], async ({ port: p }) => {
    const models = (await (await fetch(`http://127.0.0.1:${p}/v1/models`)).json()) as { data: { max_model_len: number }[] };
    assert.equal(models.data[0].max_model_len, 32768, "--context-length wins");
  });
});
