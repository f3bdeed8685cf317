// Simulated `python -m sglang.launch_server`: same command line, same phases and
// journal lines, same HTTP endpoints as the real server where our tool can observe
// them; the model and the GPUs are simulated (see ../gpu.ts and ./perf.ts).
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as path from "node:path";
import { BUILD_PROFILES, BuildProfile, ServerArgs, flagTable, parseArgs, parseConfigFile } from "./flags";
import { GpuStore } from "../gpu";
import { faultsFor, readFaults } from "../faults";
import { SpecSettings, batchSlowdown, countTokens, perfAt, specSettings, timeToFirstToken } from "./perf";
import { completionText } from "./text";

interface SimConfig {
  profile: BuildProfile;
  /** Fixed load time; when absent it scales with model size. */
  loadSeconds?: number;
  loadSecondsPerGiB: number;
  warmupSeconds: number;
  shutdownSeconds: number;
  /** Multiplies every speed of the performance model (benchmarks of the client itself). */
  speedScale: number;
  version: string;
  /** How long nodes of a multi-node start wait for each other. */
  rendezvousSeconds: number;
}

/** The simulator never prints or reports the API key. */
function redacted(args: ServerArgs): ServerArgs {
  return args.api_key === null ? args : { ...args, api_key: "<redacted>" };
}

const CONFIG_FILE = process.env.DFLASH_SIM_SGLANG_CONFIG ?? "/etc/dflash-sim/sglang.json";

function readConfig(): SimConfig {
  const defaults: SimConfig = { profile: "upstream", loadSecondsPerGiB: 0.005, warmupSeconds: 0.5, shutdownSeconds: 0.3, speedScale: 1, version: "0.5.6-sim", rendezvousSeconds: 120 };
  let raw: Partial<SimConfig> = {};
  try {
    raw = JSON.parse(fs.readFileSync(CONFIG_FILE, "utf8"));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  const cfg = { ...defaults, ...raw };
  if (!BUILD_PROFILES.includes(cfg.profile)) throw new Error(`${CONFIG_FILE}: unknown profile ${cfg.profile}`);
  return cfg;
}

const stamp = (rank?: number) => `[${new Date().toISOString().replace("T", " ").slice(0, 19)}${rank === undefined ? "" : ` TP${rank}`}]`;
const log = (msg: string, rank?: number) => process.stdout.write(`${stamp(rank)} ${msg}\n`);
const sleep = (s: number) => new Promise<void>((r) => setTimeout(r, s * 1000));

function die(status: number, text: string): never {
  process.stderr.write(text.endsWith("\n") ? text : text + "\n");
  process.exit(status);
}

function modelSizeGiB(modelPath: string, what: string): number {
  const cfgFile = path.join(modelPath, "config.json");
  if (!fs.existsSync(cfgFile)) {
    die(1, `Traceback (most recent call last):\n  File "sglang/srt/hf_transformers_utils.py", line 160, in get_config\nOSError: ${what} ${modelPath} is not a local folder and is not a valid model identifier`);
  }
  const cfg = JSON.parse(fs.readFileSync(cfgFile, "utf8"));
  return typeof cfg.sim_size_gib === "number" ? cfg.sim_size_gib : 16;
}

function oomTraceback(gpu: number, wantedMiB: number, usedMiB: number, totalMiB: number): string {
  const gib = (m: number) => (m / 1024).toFixed(2);
  return [
    "Traceback (most recent call last):",
    '  File "sglang/srt/managers/scheduler.py", line 2812, in run_scheduler_process',
    '  File "sglang/srt/model_executor/model_runner.py", line 241, in __init__',
    `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ${gib(wantedMiB)} GiB. GPU ${gpu} has a total capacity of ${gib(totalMiB)} GiB of which ${gib(totalMiB - usedMiB)} GiB is free. Of the allocated memory ${gib(usedMiB)} GiB is allocated by other processes.`,
  ].join("\n");
}

/** Checks SGLang does after parsing (server_args.__post_init__ and friends). */
function validate(args: ServerArgs, gpus: number): string | undefined {
  const alg = args.speculative_algorithm;
  const nnodes = args.nnodes as number;
  if ((args.tp_size as number) % nnodes !== 0) return `ValueError: tp_size ${args.tp_size} must be divisible by nnodes ${nnodes}`;
  if ((args.tp_size as number) / nnodes > gpus) return `RuntimeError: tp_size ${args.tp_size} over ${nnodes} node(s) needs ${(args.tp_size as number) / nnodes} GPUs per node; ${gpus} visible`;
  if (nnodes > 1 && !/^[^:]+:\d+$/.test(String(args.dist_init_addr ?? ""))) return "ValueError: --dist-init-addr host:port is required when nnodes > 1";
  if ((args.node_rank as number) >= nnodes) return `ValueError: node_rank ${args.node_rank} must be < nnodes ${nnodes}`;
  if ((alg === "DFLASH" || alg === "DDTREE") && !args.speculative_draft_model_path) return `ValueError: --speculative-draft-model-path is required for ${alg}`;
  if (alg === "DDTREE" && args.speculative_ddtree_budget === null) return "ValueError: --speculative-ddtree-budget is required for DDTREE";
  const window = args.speculative_draft_window_size;
  const draft = (args.speculative_num_draft_tokens as number | null) ?? 16;
  if (typeof window === "number" && window < draft) return `ValueError: speculative_draft_window_size (${window}) must be >= speculative_num_draft_tokens (${draft})`;
  return undefined;
}

type Phase = "loading" | "warmup" | "ready" | "stopping";

class Server {
  phase: Phase = "loading";
  running = new Set<http.ServerResponse>();
  queued = 0;
  promptTokensTotal = 0;
  generationTokensTotal = 0;
  requestsTotal = 0;
  lastThroughput = 0;
  httpServer?: http.Server;

  constructor(
    readonly args: ServerArgs,
    readonly spec: SpecSettings,
    readonly config: SimConfig,
  ) {}

  modelId(): string {
    return (this.args.served_model_name as string | null) ?? (this.args.model_path as string);
  }

  serverInfo(): Record<string, unknown> {
    const info: Record<string, unknown> = { ...redacted(this.args), version: this.config.version };
    if (this.spec.algorithm === "DDTREE") info.speculative_ddtree_topk = this.spec.topk;
    info.internal_states = [{ avg_spec_accept_length: perfAt(this.spec, 0).acceptLength, last_gen_throughput: this.lastThroughput }];
    return info;
  }

  metrics(): string {
    const name = JSON.stringify(this.modelId());
    const lines = [
      ["sglang:num_running_reqs", "gauge", this.running.size],
      ["sglang:num_queue_reqs", "gauge", this.queued],
      ["sglang:token_usage", "gauge", this.running.size ? 0.01 * this.running.size : 0],
      ["sglang:gen_throughput", "gauge", this.lastThroughput],
      ["sglang:spec_accept_length", "gauge", perfAt(this.spec, 0).acceptLength],
      ["sglang:prompt_tokens_total", "counter", this.promptTokensTotal],
      ["sglang:generation_tokens_total", "counter", this.generationTokensTotal],
      ["sglang:num_requests_total", "counter", this.requestsTotal],
    ] as const;
    const out: string[] = [];
    for (const [metric, type, value] of lines) {
      out.push(`# HELP ${metric} ${metric.slice(7).replace(/_/g, " ")}.`, `# TYPE ${metric} ${type}`, `${metric}{model_name=${name}} ${value}`);
    }
    return out.join("\n") + "\n";
  }

  authorized(req: http.IncomingMessage): boolean {
    const key = this.args.api_key;
    return !key || req.headers.authorization === `Bearer ${key}`;
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const route = `${req.method} ${url.pathname}`;
    const staleAllowed = route === "GET /v1/models" || route === "GET /get_server_info" || route === "GET /server_info";
    if (this.phase === "stopping" && !staleAllowed) return void res.destroy();
    if (!this.authorized(req) && url.pathname !== "/health" && url.pathname !== "/metrics") return json(401, { error: "Unauthorized" });
    switch (route) {
      case "GET /health":
      case "GET /health_generate":
        return this.phase === "ready" ? json(200, {}) : json(503, { error: "server is warming up" });
      case "GET /v1/models":
        return json(200, { object: "list", data: [{ id: this.modelId(), object: "model", created: 0, owned_by: "sglang", root: this.args.model_path, max_model_len: this.args.context_length ?? 262144 }] });
      case "GET /get_server_info":
      case "GET /server_info":
        return json(200, this.serverInfo());
      case "GET /get_load":
        return json(200, [{ dp_rank: 0, num_reqs: this.running.size, num_waiting_reqs: this.queued, num_tokens: 0 }]);
      case "GET /metrics":
        if (!this.args.enable_metrics) return json(404, { detail: "Not Found" });
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
        return void res.end(this.metrics());
      case "POST /flush_cache":
        return this.running.size ? json(400, { error: "Cache not flushed: requests are running" }) : json(200, {});
      case "POST /v1/chat/completions":
        return void this.readBody(req, res, (body) => this.chat(body, res));
      case "POST /generate":
        return void this.readBody(req, res, (body) => this.nativeGenerate(body, res));
      default:
        return json(404, { detail: "Not Found" });
    }
  }

  readBody(req: http.IncomingMessage, res: http.ServerResponse, fn: (body: Record<string, unknown>) => void): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        return void res.end(JSON.stringify({ error: "invalid JSON body" }));
      }
      fn(body);
    });
  }

  notReady(res: http.ServerResponse): boolean {
    if (this.phase === "ready") return false;
    res.writeHead(503, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: "server is not ready" }));
    return true;
  }

  /**
   * Produces `text` for `res` at the performance model's pace: the first token after the
   * prefill time, then tokens as verification steps accept them. `onPiece` gets each
   * batch of tokens as they are accepted; `onDone` runs once all are out.
   */
  generate(res: http.ServerResponse, promptTokens: number, text: string[], onPiece: (piece: string, first: boolean) => void, onDone: () => void): void {
    this.running.add(res);
    this.requestsTotal++;
    this.promptTokensTotal += promptTokens;
    res.on("close", () => this.running.delete(res));
    const firstTokenAt = Date.now() + timeToFirstToken(promptTokens, this.spec, this.config.speedScale) * 1000;
    let emitted = 0;
    let credit = 0;
    let last = firstTokenAt;
    const tick = () => {
      if (res.destroyed) return;
      const now = Date.now();
      if (now >= firstTokenAt) {
        const perf = perfAt(this.spec, promptTokens + emitted, this.config.speedScale);
        const rate = perf.decodeTokensPerSecond / batchSlowdown(this.running.size);
        credit += emitted === 0 ? 1 : ((now - last) / 1000) * rate;
        last = now;
        const n = Math.min(text.length - emitted, Math.floor(credit));
        if (n > 0) {
          credit -= n;
          onPiece(text.slice(emitted, emitted + n).join(""), emitted === 0);
          emitted += n;
          this.generationTokensTotal += n;
        }
      }
      if (emitted >= text.length) {
        const seconds = (Date.now() - firstTokenAt) / 1000;
        if (seconds > 0) this.lastThroughput = Math.round(((text.length - 1) / seconds) * 100) / 100;
        this.running.delete(res);
        onDone();
        return;
      }
      const rateNow = perfAt(this.spec, promptTokens, this.config.speedScale).decodeTokensPerSecond;
      const wait = now < firstTokenAt ? firstTokenAt - now : Math.max(1, Math.min(20, (1000 * (1 - credit)) / Math.max(1, rateNow)));
      setTimeout(tick, wait);
    };
    tick();
  }

  chat(body: Record<string, unknown>, res: http.ServerResponse): void {
    if (this.notReady(res)) return;
    const messages = Array.isArray(body.messages) ? (body.messages as { content?: unknown }[]) : [];
    const prompt = messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n");
    const promptTokens = countTokens(prompt);
    const maxTokens = typeof body.max_tokens === "number" ? body.max_tokens : typeof body.max_completion_tokens === "number" ? body.max_completion_tokens : 128;
    const text = completionText(prompt, maxTokens, faultsFor(readFaults(), this.args).corruptOutput);
    const stream = body.stream === true;
    const includeUsage = stream && (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const base = { id: `chatcmpl-${Date.now().toString(16)}${Math.floor(Math.random() * 1e6).toString(16)}`, created: Math.floor(Date.now() / 1000), model: this.modelId() };
    const usage = { prompt_tokens: promptTokens, completion_tokens: text.length, total_tokens: promptTokens + text.length };
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    if (stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    this.generate(
      res,
      promptTokens,
      text,
      (piece, first) => {
        if (stream) send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: first ? { role: "assistant", content: piece } : { content: piece }, finish_reason: null }] });
      },
      () => {
        if (stream) {
          send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "length" }] });
          if (includeUsage) send({ ...base, object: "chat.completion.chunk", choices: [], usage });
          res.end("data: [DONE]\n\n");
        } else {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: text.join("") }, finish_reason: "length" }], usage }));
        }
      },
    );
  }

  /** SGLang's native API: meta_info carries spec_verify_ct, the verification steps of this request. */
  nativeGenerate(body: Record<string, unknown>, res: http.ServerResponse): void {
    if (this.notReady(res)) return;
    const prompt = typeof body.text === "string" ? body.text : "";
    const params = (body.sampling_params ?? {}) as { max_new_tokens?: number };
    const maxTokens = typeof params.max_new_tokens === "number" ? params.max_new_tokens : 128;
    const promptTokens = countTokens(prompt);
    const text = completionText(prompt, maxTokens, faultsFor(readFaults(), this.args).corruptOutput);
    const started = Date.now();
    this.generate(res, promptTokens, text, () => undefined, () => {
      const acceptLength = perfAt(this.spec, promptTokens, this.config.speedScale).acceptLength;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          text: text.join(""),
          meta_info: {
            id: `gen-${started.toString(16)}`,
            prompt_tokens: promptTokens,
            completion_tokens: text.length,
            spec_verify_ct: Math.max(1, Math.round(text.length / acceptLength)),
            finish_reason: { type: "length", length: text.length },
            e2e_latency: (Date.now() - started) / 1000,
          },
        }),
      );
    });
  }

  /** A real shutdown aborts what is in flight; a tool that does not drain loses it. */
  abortInFlight(): void {
    for (const res of this.running) res.destroy();
    this.running.clear();
  }
}

async function main(): Promise<void> {
  const config = readConfig();
  const table = flagTable(config.profile);
  const parsed = parseArgs(process.argv.slice(2), table);
  if (parsed.kind === "help") {
    process.stdout.write(parsed.text);
    return;
  }
  if (parsed.kind === "error") die(parsed.status, parsed.stderr);
  const args = parsed.args;
  if (typeof args.config === "string") {
    // Like SGLang: values from the YAML file, overridden by flags given on the command line.
    let text = "";
    try {
      text = fs.readFileSync(args.config, "utf8");
    } catch (e) {
      die(1, `FileNotFoundError: [Errno 2] No such file or directory: '${args.config}'`);
    }
    const fromFile = parseConfigFile(text, table);
    if (fromFile.kind === "error") die(2, fromFile.stderr);
    const given = new Set(process.argv.slice(2).filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]));
    for (const [dest, value] of Object.entries(fromFile.values)) {
      const spec = table.find((f) => f.dest === dest)!;
      if (![spec.name, ...(spec.aliases ?? [])].some((n) => given.has(n))) args[dest] = value;
    }
  }
  const faults = faultsFor(readFaults(), args);
  const gpus = new GpuStore();
  const gpuConfig = gpus.config();
  const spec = specSettings(args, process.env);
  const server = new Server(args, spec, config);
  const releaseDelayMs = faults.gpuReleaseDelaySeconds * 1000;

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log(`Received ${signal}, shutting down.`);
    // Faults are read when they act, so they can be injected into a running server.
    const now = faultsFor(readFaults(), args);
    if (now.ignoreSigtermSeconds > 0) await sleep(now.ignoreSigtermSeconds);
    server.phase = "stopping";
    server.abortInFlight();
    if (now.staleSeconds > 0) await sleep(now.staleSeconds);
    await sleep(config.shutdownSeconds);
    server.httpServer?.close();
    gpus.markExited(process.pid);
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  const invalid = validate(args, gpuConfig.count);
  if (invalid) die(1, `Traceback (most recent call last):\n  File "sglang/srt/server_args.py", line 611, in __post_init__\n${invalid}`);
  const shown = Object.entries(redacted(args)).map(([k, v]) => `${k}=${typeof v === "string" ? `'${v}'` : v === null ? "None" : v === true ? "True" : v === false ? "False" : v}`);
  log(`server_args=ServerArgs(${shown.join(", ")})`);

  const tp = args.tp_size as number;
  const nnodes = args.nnodes as number;
  const nodeRank = args.node_rank as number;
  const localTp = tp / nnodes;
  const weightsGiB = modelSizeGiB(args.model_path as string, "model");
  const drafterGiB = args.speculative_draft_model_path ? modelSizeGiB(args.speculative_draft_model_path as string, "draft model") : 0;
  const loadSeconds = (config.loadSeconds ?? (weightsGiB + drafterGiB) * config.loadSecondsPerGiB) * faults.loadSlowdown;

  for (let r = 0; r < localTp; r++) log("Init torch distributed begin.", nodeRank * localTp + r);
  const perRankMiB = Math.floor((args.mem_fraction_static as number) * gpuConfig.memoryMiB);
  const ranks = Array.from({ length: localTp }, (_, i) => i);
  const short = gpus.allocate(process.pid, "python3", ranks, perRankMiB, releaseDelayMs);
  if (short) die(1, oomTraceback(short.index, perRankMiB, short.usedMiB, short.totalMiB));
  process.on("exit", () => gpus.markExited(process.pid));
  const weightsPerRankMiB = ((weightsGiB + drafterGiB) * 1024) / tp;
  if (weightsPerRankMiB > perRankMiB) die(1, oomTraceback(0, weightsPerRankMiB, perRankMiB, gpuConfig.memoryMiB));

  if (nnodes > 1) await rendezvous(String(args.dist_init_addr), nnodes, nodeRank, config.rendezvousSeconds);

  log(`Load weight begin. avail mem=${(gpuConfig.memoryMiB / 1024).toFixed(2)} GB`, 0);
  if (args.quantization === "compressed-tensors" || args.quantization === "moe_wna16") {
    for (let r = 0; r < tp; r++) log("Using CompressedTensorsWNA16MarlinMoEMethod", r);
  }
  if (faults.hangDuringLoad) {
    log("Loading safetensors checkpoint shards:  37% Completed | 23/62", 0);
    // Stuck for good, like a hung NCCL init: the process lives on, the port never opens.
    setInterval(() => undefined, 1 << 30);
    await new Promise(() => undefined);
  }
  if (faults.crashDuringLoad) {
    await sleep(loadSeconds / 2);
    if (faults.crashDuringLoad === "oom") die(1, oomTraceback(3, 8192, gpuConfig.memoryMiB - 2048, gpuConfig.memoryMiB));
    die(1, "Traceback (most recent call last):\n  File \"sglang/srt/model_loader/loader.py\", line 388, in load_model\nRuntimeError: Error(s) in loading state_dict: size mismatch for model.layers.3.mlp.experts.w13_weight");
  }
  await sleep(loadSeconds);
  log(`Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=${((gpuConfig.memoryMiB - weightsPerRankMiB) / 1024).toFixed(2)} GB, mem usage=${(weightsPerRankMiB / 1024).toFixed(2)} GB.`, 0);
  log(`KV Cache is allocated. #tokens: ${Math.floor((perRankMiB - weightsPerRankMiB) * 40)}`, 0);
  if (spec.algorithm) log(`Speculative decoding: algorithm=${spec.algorithm}, draft tokens=${spec.blockSize}, budget=${spec.budget ?? "-"}, topk=${spec.topk}, window=${spec.window ?? "full"}`, 0);
  if (nodeRank > 0) {
    // Only the first node serves HTTP; the others run their ranks until a peer goes away.
    log(`Node ${nodeRank} of ${nnodes} ready; requests are served by node 0 (${args.dist_init_addr}).`);
    return;
  }

  const httpServer = http.createServer((req, res) => server.handle(req, res));
  server.httpServer = httpServer;
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(args.port as number, args.host as string, () => resolve());
  }).catch((e: Error) => die(1, `OSError: [Errno 98] error while attempting to bind on address ('${args.host}', ${args.port}): ${e.message}`));
  server.phase = "warmup";
  log(`INFO:     Started server process [${process.pid}]`);
  log(`INFO:     Uvicorn running on http://${args.host}:${args.port} (Press CTRL+C to quit)`);
  await sleep(config.warmupSeconds);
  if (stopping) return;
  server.phase = "ready";
  log("The server is fired up and ready to roll!");
  if (faults.crashAfterReadySeconds !== null) {
    await sleep(faults.crashAfterReadySeconds);
    die(1, "Traceback (most recent call last):\n  File \"sglang/srt/managers/scheduler.py\", line 2830, in run_scheduler_process\nRuntimeError: CUDA error: an illegal memory access was encountered");
  }
}

/**
 * Multi-node start: node 0 listens on --dist-init-addr and waits for every other node;
 * afterwards any node going away aborts the rest, as an NCCL communicator does.
 */
async function rendezvous(addr: string, nnodes: number, rank: number, timeoutSeconds: number): Promise<void> {
  const [host, portText] = [addr.slice(0, addr.lastIndexOf(":")), addr.slice(addr.lastIndexOf(":") + 1)];
  const port = Number(portText);
  const abort = (why: string) => die(1, `Traceback (most recent call last):\n  File "torch/distributed/distributed_c10d.py", line 4159, in barrier\nRuntimeError: NCCL communicator was aborted on node ${rank}: ${why}`);
  const deadline = Date.now() + timeoutSeconds * 1000;
  if (rank === 0) {
    const peers = new Set<number>();
    await new Promise<void>((resolve) => {
      const srv = net.createServer((sock) => {
        sock.setEncoding("utf8");
        sock.once("data", (d: string) => {
          const peer = Number(d.trim());
          peers.add(peer);
          sock.on("close", () => abort(`node ${peer} exited`));
          if (peers.size === nnodes - 1) resolve();
        });
      });
      srv.on("error", (e) => abort(`cannot listen on ${addr}: ${e.message}`));
      srv.listen(port, host);
      const timer = setInterval(() => {
        if (Date.now() > deadline) abort(`timed out after ${timeoutSeconds} s waiting for ${nnodes - 1 - peers.size} node(s) to join at ${addr}`);
        if (peers.size === nnodes - 1) clearInterval(timer);
      }, 250);
    });
    log(`All ${nnodes} nodes joined at ${addr}.`);
    return;
  }
  for (;;) {
    const sock = await new Promise<net.Socket | undefined>((resolve) => {
      const c = net.connect(port, host);
      c.once("connect", () => resolve(c));
      c.once("error", () => resolve(undefined));
    });
    if (sock) {
      sock.write(`${rank}\n`);
      sock.on("close", () => abort(`lost node 0 at ${addr}`));
      sock.on("error", () => undefined);
      log(`Joined node 0 at ${addr} as node ${rank}.`);
      return;
    }
    if (Date.now() > deadline) abort(`timed out after ${timeoutSeconds} s connecting to node 0 at ${addr}`);
    await sleep(0.25);
  }
}

main().catch((e) => die(1, `Traceback (most recent call last):\n${(e as Error).stack ?? e}`));
