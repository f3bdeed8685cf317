// The generation routes of the simulated server: OpenAI chat completions and SGLang's
// native /generate, paced by the performance model (./perf.ts) and answered by the
// simulated model (./text.ts). Paths in sgl-project/sglang, python/sglang/:
// - the prefix cache (./radix_cache.ts): cached_tokens in meta_info, and only the uncached
//   part of a prompt is prefilled; --disable-radix-cache turns it off (ChunkCache);
// - the context check (srt/managers/tokenizer_manager.py, _validate_one_request): prompt +
//   max_new_tokens >= context length is a ValueError. Without streaming that is HTTP 400
//   (http_server.py _create_error_response; serving_base.py create_error_response); while
//   streaming, the 200 stream carries it as an error event, then [DONE] (http_server.py
//   generate_request's stream_results; serving_chat.py _generate_chat_stream);
// - finish reasons (srt/managers/schedule_batch.py, Req.check_finished): max_new_tokens,
//   else the model's EOS unless ignore_eos;
// - meta_info (tokenizer_manager.py, _handle_batch_output): spec_verify_ct and
//   spec_accept_length only with speculative decoding on; streaming /generate sends the
//   text so far (cumulative), as SGLang does unless --incremental-streaming-output;
// - usage.prompt_tokens_details (entrypoints/openai/usage_processor.py): {cached_tokens}
//   with --enable-cache-report when any prompt token was cached, else null.
// The pace of each token follows its effective acceptance (perf.ts, acceptancePerToken):
// the repetition of the text in the drafter's window (the last --speculative-draft-window-size
// tokens of prompt + output so far, or all of it without a window), raised again past the
// model's natural end. A chat prompt is its messages' contents joined by newlines (no chat
// template), so chat and /generate share cached prefixes.
import type * as http from "node:http";
import type { ServerArgs } from "./flags";
import { SpecSettings, acceptLength, acceptancePerToken, batchSlowdown, countTokens, perfAt, timeToFirstToken } from "./perf";
import { Completion, completionText } from "./text";
import { PerfSurface, launchOffset, requestNoise } from "./surface";
import { RadixCache } from "./radix_cache";
import { faultsFor, readFaults } from "../faults";

/** Tokens the prefix cache holds at most before evicting (SGLang: what the KV pool holds). */
const RADIX_CACHE_TOKENS = 4_000_000;
/** The EOS token a "stop" finish reports as matched (Qwen's <|im_end|>). */
const EOS_TOKEN_ID = 151645;

export interface GenerationSettings {
  args: ServerArgs;
  spec: SpecSettings;
  speedScale: number;
  /** The shape of the performance model over the settings, and its measurement noise (./surface.ts). */
  surface: PerfSurface;
  /** This start's ordinal on the host (./launches.ts): the key of its launch-to-launch noise. */
  launch: number;
  /** The model's context length (what /v1/models reports as max_model_len). */
  contextLength: number;
  modelId: () => string;
  /** The scheduler's log_prefill_stats: a prefill publishes the gauges. */
  onPrefill: () => void;
  log: (msg: string) => void;
}

/** One request, whichever API it came by. */
interface Job {
  prompt: string;
  /** Between prompt and output in the cached sequence: chat turns are joined by newlines. */
  joiner: string;
  promptTokens: number;
  completion: Completion;
  /** Effective acceptance of each output token (perf.ts, acceptancePerToken). */
  accept: number[];
  cachedTokens: number;
}

/** What a burst of accepted tokens carries to the API that streams it. */
interface Progress {
  piece: string;
  first: boolean;
  last: boolean;
  /** Output tokens so far, and the verification steps they took. */
  completionTokens: number;
  verifyCt: number;
}

export class Generation {
  readonly running = new Set<http.ServerResponse>();
  promptTokensTotal = 0;
  generationTokensTotal = 0;
  requestsTotal = 0;
  lastThroughput = 0;
  /** When the scheduler last sent anything out (ms; 0: never): the tokenizer's last_receive_tstamp. */
  lastOutputAt = 0;
  /** Over finished requests: tokens and verification steps (avg_spec_accept_length). */
  private verifiedTokens = 0;
  private verifySteps = 0;
  private readonly cache: RadixCache | null;
  /** The step-time factor this server's life shares (./surface.ts, launchOffset); 1 without noise. */
  readonly launchFactor: number;

  constructor(readonly settings: GenerationSettings) {
    this.cache = settings.args.disable_radix_cache === true ? null : new RadixCache(RADIX_CACHE_TOKENS);
    this.launchFactor = launchOffset(settings.surface, settings.spec, settings.launch);
  }

  /** Accepted tokens per verification step over the requests served so far; the model's own before any. */
  avgAcceptLength(): number {
    const tau = this.verifySteps > 0 ? this.verifiedTokens / this.verifySteps : acceptLength(this.settings.spec, 0, this.settings.surface);
    return Math.round(tau * 1000) / 1000;
  }

  /** scheduler.py flush_cache: only when nothing runs or waits; false otherwise. */
  flushCache(): boolean {
    if (this.running.size > 0) return false;
    this.cache?.reset();
    return true;
  }

  chat(body: Record<string, unknown>, res: http.ServerResponse): void {
    if (faultsFor(readFaults(), this.settings.args).hangGenerations) return this.hang(res, () => this.chat(body, res));
    const messages = Array.isArray(body.messages) ? (body.messages as { content?: unknown }[]) : [];
    const prompt = messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n");
    const maxTokens = typeof body.max_tokens === "number" ? body.max_tokens : typeof body.max_completion_tokens === "number" ? body.max_completion_tokens : 128;
    const stream = body.stream === true;
    const tooLong = this.contextError(countTokens(prompt), maxTokens);
    if (tooLong) {
      const error = { object: "error", message: tooLong, type: "BadRequestError", param: null, code: 400 };
      if (!stream) return void res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify(error));
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      return void res.end(`data: ${JSON.stringify({ error })}\n\ndata: [DONE]\n\n`);
    }
    const job = this.plan(prompt, "\n", maxTokens, body.ignore_eos === true);
    const { tokens, finishReason } = job.completion;
    const includeUsage = stream && (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const base = { id: `chatcmpl-${Date.now().toString(16)}${Math.floor(Math.random() * 1e6).toString(16)}`, created: Math.floor(Date.now() / 1000), model: this.settings.modelId() };
    const cacheReport = this.settings.args.enable_cache_report === true && job.cachedTokens > 0;
    const usage = { prompt_tokens: job.promptTokens, completion_tokens: tokens.length, total_tokens: job.promptTokens + tokens.length, prompt_tokens_details: cacheReport ? { cached_tokens: job.cachedTokens } : null };
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    if (stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    this.run(
      res,
      job,
      (p) => {
        if (stream) send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: p.first ? { role: "assistant", content: p.piece } : { content: p.piece }, finish_reason: null }] });
      },
      () => {
        if (stream) {
          send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: finishReason }] });
          if (includeUsage) send({ ...base, object: "chat.completion.chunk", choices: [], usage });
          res.end("data: [DONE]\n\n");
        } else {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: tokens.join("") }, finish_reason: finishReason }], usage }));
        }
      },
    );
  }

  /** SGLang's native API: meta_info on every chunk, spec_verify_ct being this request's verification steps. */
  native(body: Record<string, unknown>, res: http.ServerResponse): void {
    if (faultsFor(readFaults(), this.settings.args).hangGenerations) return this.hang(res, () => this.native(body, res));
    const prompt = typeof body.text === "string" ? body.text : "";
    const params = (body.sampling_params ?? {}) as { max_new_tokens?: unknown; ignore_eos?: unknown };
    const maxTokens = typeof params.max_new_tokens === "number" ? params.max_new_tokens : 128;
    const stream = body.stream === true;
    const tooLong = this.contextError(countTokens(prompt), maxTokens);
    if (tooLong) {
      this.settings.log(`[http_server] Error: ${tooLong}`);
      const error = { error: { message: tooLong } };
      if (!stream) return void res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify(error));
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      return void res.end(`data: ${JSON.stringify(error)}\n\ndata: [DONE]\n\n`);
    }
    const job = this.plan(prompt, "", maxTokens, params.ignore_eos === true);
    const { finishReason } = job.completion;
    const started = Date.now();
    const id = `gen-${started.toString(16)}${Math.floor(Math.random() * 1e6).toString(16)}`;
    const meta = (p: Progress) => ({
      id,
      finish_reason: !p.last ? null : finishReason === "stop" ? { type: "stop", matched: EOS_TOKEN_ID } : { type: "length", length: p.completionTokens },
      prompt_tokens: job.promptTokens,
      completion_tokens: p.completionTokens,
      cached_tokens: job.cachedTokens,
      ...(this.settings.spec.algorithm ? { spec_verify_ct: p.verifyCt, spec_accept_length: p.verifyCt > 0 ? p.completionTokens / p.verifyCt : p.completionTokens } : {}),
      e2e_latency: (Date.now() - started) / 1000,
    });
    let text = "";
    let final: Progress | undefined;
    if (stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    this.run(
      res,
      job,
      (p) => {
        text += p.piece;
        final = p;
        if (stream) res.write(`data: ${JSON.stringify({ text, meta_info: meta(p), index: 0 })}\n\n`);
      },
      () => {
        if (stream) return void res.end("data: [DONE]\n\n");
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ text, meta_info: meta(final!) }));
      },
    );
  }

  /** tokenizer_manager.py _validate_one_request: the message when prompt + completion do not fit. */
  private contextError(promptTokens: number, maxTokens: number): string | undefined {
    const limit = this.settings.contextLength;
    const total = promptTokens + maxTokens;
    if (total < limit) return undefined;
    return `Requested token count exceeds the model's maximum context length of ${limit} tokens. You requested a total of ${total} tokens: ${promptTokens} tokens from the input messages and ${maxTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`;
  }

  /** The answer, how fast each token is accepted, and how much of the prompt is cached. */
  private plan(prompt: string, joiner: string, maxTokens: number, ignoreEos: boolean): Job {
    const promptTokens = countTokens(prompt);
    const completion = completionText(prompt, maxTokens, faultsFor(readFaults(), this.settings.args).corruptOutput, ignoreEos);
    // match_prefix runs on all but the last prompt token: at least one is always computed.
    const cachedTokens = this.cache ? Math.max(0, Math.min(this.cache.match(prompt), promptTokens - 1)) : 0;
    return { prompt, joiner, promptTokens, completion, accept: acceptancePerToken(this.settings.spec, prompt, joiner, completion.tokens, completion.naturalEnd, this.settings.surface), cachedTokens };
  }

  /**
   * Produces the job's tokens for `res` at the performance model's pace: the first token
   * when the prefill of the uncached prompt ends, then one burst per verification step, as
   * SGLang streams what each step accepted. A step lasts the model's step time (slowed by
   * the batch) and accepts tokens while its credit covers them, token k costing
   * 1 / (its effective acceptance): on average a step accepts that many. The credit starts
   * at half a step, so the steps taken are the rounded sum of the costs, as spec_verify_ct
   * counts them. `onPiece` gets each burst; `onDone` runs once all are out.
   */
  private run(res: http.ServerResponse, job: Job, onPiece: (p: Progress) => void, onDone: () => void): void {
    const { spec, speedScale, surface } = this.settings;
    const tokens = job.completion.tokens;
    const cost = (k: number) => 1 / job.accept[k];
    // The surface's measurement noise: one draw per request, by its number in this server's
    // life, on top of this launch's own offset, which every request shares.
    const noise = requestNoise(surface, spec, this.settings.launch, this.requestsTotal) * this.launchFactor;
    const stepMs = (k: number) => perfAt(spec, job.promptTokens + k, speedScale, surface).stepSeconds * noise * batchSlowdown(this.running.size) * 1000;
    // The gauges are set when a prefill batch runs (log_prefill_stats), from the running
    // batch without the requests this prefill just admitted.
    this.settings.onPrefill();
    this.running.add(res);
    this.requestsTotal++;
    this.promptTokensTotal += job.promptTokens;
    res.on("close", () => this.running.delete(res));
    const firstTokenAt = Date.now() + timeToFirstToken(job.promptTokens, spec, speedScale, job.cachedTokens, surface) * 1000;
    let dueAt = firstTokenAt;
    let emitted = 0;
    let credit = 0.5;
    // Verification steps of this request: the first token comes from the prefill, every
    // later burst from one step (SGLang's spec_verify_ct counts decode steps only).
    let steps = 0;
    const tick = () => {
      if (res.destroyed) return;
      // Every step due by now (a late timer merges them into one burst, as a late read would).
      let n = 0;
      while (Date.now() >= dueAt && emitted + n < tokens.length) {
        if (emitted + n === 0) {
          // cache_unfinished_req: the prompt is in the tree once prefilled.
          this.cache?.insert(job.prompt);
          n = 1;
        } else {
          steps++;
          credit += 1;
          while (emitted + n < tokens.length && credit >= cost(emitted + n)) {
            credit -= cost(emitted + n);
            n++;
          }
        }
        dueAt += stepMs(emitted + n);
      }
      if (n > 0) {
        const first = emitted === 0;
        emitted += n;
        this.generationTokensTotal += n;
        this.lastOutputAt = Date.now();
        onPiece({ piece: tokens.slice(emitted - n, emitted).join(""), first, last: emitted === tokens.length, completionTokens: emitted, verifyCt: steps });
      }
      if (emitted < tokens.length) return void setTimeout(tick, Math.max(0, dueAt - Date.now()));
      const seconds = (Date.now() - firstTokenAt) / 1000;
      if (seconds > 0) this.lastThroughput = Math.round(((tokens.length - 1) / seconds) * 100) / 100;
      // cache_finished_req: prompt and output stay in the tree for the next turn.
      this.cache?.insert(job.prompt + job.joiner + tokens.join(""));
      this.verifiedTokens += tokens.length;
      this.verifySteps += steps;
      this.running.delete(res);
      onDone();
    };
    tick();
  }

  /**
   * A request the stuck scheduler does not answer: it stays in rid_to_state, counted by the
   * drain, until its client goes away (the tokenizer aborts a disconnected request). Once the
   * fault is cleared (the scheduler unstuck) it runs as usual: `resume`.
   */
  private hang(res: http.ServerResponse, resume: () => void): void {
    this.running.add(res);
    const poll = setInterval(() => {
      if (res.destroyed) return void clearInterval(poll);
      if (faultsFor(readFaults(), this.settings.args).hangGenerations) return;
      clearInterval(poll);
      this.running.delete(res);
      resume();
    }, 200);
    res.on("close", () => {
      clearInterval(poll);
      this.running.delete(res);
    });
  }
}
