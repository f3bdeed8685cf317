// Simulated `python -m sglang.launch_server`: same command line, same phases and
// journal lines, same HTTP endpoints as the real server where our tool can observe
// them; the model and the GPUs are simulated (see ../gpu.ts and ./perf.ts).
//
// Where real SGLang is unkind, so is this (paths in sgl-project/sglang, python/sglang/):
// - SIGTERM is a drain (srt/managers/tokenizer_manager.py, SignalHandler.sigterm_handler
//   and sigterm_watchdog): the flag is checked every 5 s; then it waits, 5 s at a time,
//   for every request in flight (new ones are still admitted), with no deadline of its
//   own. How it ends is the line's (./lines.ts drainExit): v0.5.19 with
//   kill_process_tree(include_parent=True), the main process dying by SIGKILL; v0.5.20 on
//   (read at its tag) by killing the children only and handing the exit to uvicorn: exit 0.
//   Before the handle loop exists (while loading) SIGTERM kills at once.
// - with --tokenizer-worker-num N > 1 (srt/managers/multi_tokenizer_mixin.py) each HTTP worker
//   has its own TokenizerManager and watchdog, counting only its own requests, whose ids carry
//   its pid (`<pid>_<hex>`).
// - a scheduler that fails (any GPU-side failure: memory, CUDA graph capture, a load error, a
//   CUDA error while serving) logs its traceback, every TP rank its own, and SIGQUITs the main
//   process, which logs so and SIGKILLs itself (./crash.ts).
// - --log-level hides what is below it, uvicorn's lines too (./logging.ts).
// - /health and /health_generate are one handler (srt/entrypoints/http_server.py,
//   health_generate): 503 while starting and during the drain; else a one-token generation
//   that counts ANY scheduler output since it began (other requests' tokens too) as alive,
//   polled each second up to SGLANG_HEALTH_CHECK_TIMEOUT, then 503 and the server is
//   UnHealthy. SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false answers /health 200 at once.
// - after the drain the schedulers get up to 15 s to exit: a blocking wait in the event loop, so
//   HTTP answers nothing meanwhile; the SIGKILL, or uvicorn closing its socket, then resets the
//   connections left waiting.
// - /get_server_info logs a deprecation warning per call; /server_info and it return
//   every server argument including api_key (http_server.py, server_info; issue #37457).
// - start-up logs the server args with the api key in clear, in the form of the host's
//   SGLang line (srt/entrypoints/engine.py, _launch_subprocesses; see ./lines.ts).
// - what differs between the lines (v0.5.21, main, v0.5.19) is in ./lines.ts, one trait each.
// - /metrics gauges are refreshed at prefill, every 40 decode steps
//   (--decode-log-interval) and every 30 s when idle, not on every scrape
//   (srt/managers/scheduler_metrics_mixin.py, srt/metrics/collector.py).
// - ranks 1.. of a multi-node launch serve only a dummy health check on --port
//   (srt/utils/common.py, launch_dummy_health_check_server).
// - the context length is --context-length, else the model's max_position_embeddings
//   (srt/configs/model_config.py, get_context_length).
// - generation, the prefix cache and the context check: ./generation.ts.
// - /flush_cache logs as the scheduler does (srt/managers/scheduler.py, flush_cache):
//   "Cache flushed successfully!", or a warning naming the requests that kept it.
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as path from "node:path";
import { BuildProfile, ServerArgs, flagTable, knownAlgorithms, mergeConfigFile, parseArgs } from "./flags";
import { planMemory } from "./memory";
import { GpuStore, visibleGpus } from "../gpu";
import { faultsFor, readFaults } from "../faults";
import { SpecSettings, perfAt, specSettings } from "./perf";
import { outOfMemory } from "./surface";
import { parseSimConfig, type SimConfig } from "./settings";
import { Generation } from "./generation";
import { takeLaunchOrdinal } from "./launches";
import { LINES, boolEnv, startupArgsLine, type LineTraits } from "./lines";
import { type CrashLine, type CrashStage, graphCaptureFailed, oneRank, schedulerCrashLines } from "./crash";
import { type LogLevel, levelNumber, shown } from "./logging";

const CONFIG_FILE = process.env.DFLASH_SIM_SGLANG_CONFIG ?? "/etc/dflash-sim/sglang.json";

function readConfig(): SimConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(CONFIG_FILE, "utf8"));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  // One list of settings (./settings.ts): an unknown key or a value of the wrong kind is refused, naming the valid ones.
  try {
    return parseSimConfig(raw);
  } catch (e) {
    throw new Error(`${CONFIG_FILE}: ${(e as Error).message}`);
  }
}

const stamp = (rank?: number) => `[${new Date().toISOString().replace("T", " ").slice(0, 19)}${rank === undefined ? "" : ` TP${rank}`}]`;
/** --log-level as given; set once the command line is parsed. */
let logLevel = "info";
/** A log record of `level` (or a print, "PRINT"), shown if --log-level lets it through. */
const log = (level: LogLevel | "PRINT", msg: string, rank?: number) => {
  if (shown(level, logLevel)) process.stdout.write(`${stamp(rank)} ${msg}\n`);
};
/** tokenizer_manager.py: the watchdog's period, before and during the drain. */
const WATCHDOG_SECONDS = 5;
/** tokenizer_manager.py sigterm_watchdog (v0.5.17 on, PR #28779): the schedulers' time to exit after the drain. */
const SCHEDULER_SHUTDOWN_WAIT_SECONDS = 15;
/** srt/server_args.py: what an unset --max-running-requests resolves to for DFLASH. */
const DFLASH_MAX_RUNNING_REQUESTS = 48;
/** scheduler: --decode-log-interval (default 40) and the idle refresh of 30 s. */
const DECODE_LOG_INTERVAL = 40;
const IDLE_METRICS_SECONDS = 30;
const sleep = (s: number) => new Promise<void>((r) => setTimeout(r, s * 1000));

function die(status: number, text: string): never {
  process.stderr.write(text.endsWith("\n") ? text : text + "\n");
  process.exit(status);
}

function modelConfig(modelPath: string, what: string): Record<string, unknown> {
  const cfgFile = path.join(modelPath, "config.json");
  if (!fs.existsSync(cfgFile)) {
    die(1, `Traceback (most recent call last):\n  File "sglang/srt/hf_transformers_utils.py", line 160, in get_config\nOSError: ${what} ${modelPath} is not a local folder and is not a valid model identifier`);
  }
  return JSON.parse(fs.readFileSync(cfgFile, "utf8"));
}

function modelSizeGiB(modelPath: string, what: string): number {
  const cfg = modelConfig(modelPath, what);
  return typeof cfg.sim_size_gib === "number" ? cfg.sim_size_gib : 16;
}

/** The model's context length: --context-length, else max_position_embeddings, else 262144. */
function contextLength(args: ServerArgs): number {
  if (typeof args.context_length === "number") return args.context_length;
  const fromModel = modelConfig(args.model_path as string, "model").max_position_embeddings;
  return typeof fromModel === "number" ? fromModel : 262144;
}

function traceback(where: string, error: string): string {
  return `Traceback (most recent call last):\n  File "${where}"\n${error}`;
}

/** Checks SGLang does after parsing (server_args.__post_init__ and friends). */
function validate(args: ServerArgs, gpus: number, profile: BuildProfile, blockSize: number): string | undefined {
  const alg = args.speculative_algorithm;
  // No argparse choices: an unknown name fails when the algorithm is looked up
  // (srt/speculative/spec_info.py, SpeculativeAlgorithm.from_string).
  if (typeof alg === "string" && !knownAlgorithms(profile).includes(alg.toUpperCase())) return `ValueError: Unknown speculative algorithm name: ${alg.toUpperCase()}`;
  // srt/arg_groups/speculative_hook.py: the block size stands for the draft tokens.
  const block = args.speculative_dflash_block_size;
  const drafts = args.speculative_num_draft_tokens;
  if (block !== null && drafts !== null && block !== drafts) {
    return "ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ";
  }
  const nnodes = args.nnodes as number;
  if ((args.tp_size as number) % nnodes !== 0) return `ValueError: tp_size ${args.tp_size} must be divisible by nnodes ${nnodes}`;
  if ((args.tp_size as number) / nnodes > gpus) return `RuntimeError: tp_size ${args.tp_size} over ${nnodes} node(s) needs ${(args.tp_size as number) / nnodes} GPUs per node; ${gpus} visible`;
  if (nnodes > 1 && !/^[^:]+:\d+$/.test(String(args.dist_init_addr ?? ""))) return "ValueError: --dist-init-addr host:port is required when nnodes > 1";
  if ((args.node_rank as number) >= nnodes) return `ValueError: node_rank ${args.node_rank} must be < nnodes ${nnodes}`;
  if ((alg === "DFLASH" || alg === "DDTREE") && !args.speculative_draft_model_path) return `ValueError: --speculative-draft-model-path is required for ${alg}`;
  if (alg === "DDTREE" && args.speculative_ddtree_budget === null) return "ValueError: --speculative-ddtree-budget is required for DDTREE";
  // srt/server_args.py (DFLASH): the window holds at least one block, the block size as resolved
  // (--speculative-dflash-block-size, else --speculative-num-draft-tokens, else the drafter's).
  const window = args.speculative_draft_window_size;
  if ((alg === "DFLASH" || alg === "DDTREE") && typeof window === "number" && window < blockSize) {
    return `ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). window_size=${window}, block_size=${blockSize}.`;
  }
  return undefined;
}

/**
 * What /server_info reports (v0.5.17 on and main): the values SGLang resolved, not the ones
 * given. Those the tool can meet: the DFlash block size copied into speculative_num_draft_tokens
 * (srt/arg_groups/speculative_hook.py; else the drafter's own, 16), served_model_name filled in
 * with the model path, and the DFLASH default of 48 running requests.
 */
function resolvedArgs(args: ServerArgs, blockSize: number): ServerArgs {
  const out: ServerArgs = { ...args };
  const alg = args.speculative_algorithm;
  // The block size given stays as given (null when unset); the draft tokens carry the resolved one.
  if (alg === "DFLASH" || alg === "DDTREE") out.speculative_num_draft_tokens = blockSize;
  // srt/server_args.py (DFLASH defaults, PR #25424, merged 2026-05-15: in v0.5.19 and main): an
  // unset --max-running-requests resolves to 48 for DFLASH.
  if (alg === "DFLASH") out.max_running_requests ??= DFLASH_MAX_RUNNING_REQUESTS;
  out.served_model_name ??= args.model_path;
  return out;
}

/**
 * The DFlash block size SGLang resolves: --speculative-dflash-block-size, else
 * --speculative-num-draft-tokens, else the drafter's config (`block_size`), else 16.
 */
function resolvedBlockSize(args: ServerArgs): number {
  if (args.speculative_algorithm !== "DFLASH" && args.speculative_algorithm !== "DDTREE") return ((args.speculative_num_draft_tokens as number | null) ?? 16);
  const given = (args.speculative_dflash_block_size ?? args.speculative_num_draft_tokens) as number | null;
  if (given !== null) return given;
  const drafter = args.speculative_draft_model_path;
  // A drafter config that cannot be read leaves the default, with a warning (the drafter's
  // own load, later, is what fails on a missing folder).
  let fromDrafter: unknown;
  if (typeof drafter === "string") {
    try {
      fromDrafter = (JSON.parse(fs.readFileSync(path.join(drafter, "config.json"), "utf8")) as Record<string, unknown>).block_size;
    } catch (e) {
      log("WARNING", `WARNING: could not read the draft model's config (${(e as Error).message.split("\n")[0]}); using the default DFlash block size 16.`);
    }
  }
  return typeof fromDrafter === "number" ? fromDrafter : 16;
}

/** prometheus_client prints every sample as a Python float: 0 -> "0.0", 3 -> "3.0". */
function promFloat(v: number): string {
  return Number.isInteger(v) ? v.toFixed(1) : String(v);
}

type Phase = "loading" | "warmup" | "ready" | "exiting";

/** http_server.py: HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20)). */
const HEALTH_CHECK_TIMEOUT_SECONDS = Number(process.env.SGLANG_HEALTH_CHECK_TIMEOUT ?? 20);

class Server {
  phase: Phase = "loading";
  /** When the phase became "ready" (ms). */
  readyAt = 0;
  /** Nothing waits in this simulator: every request is admitted at once. */
  readonly queued = 0;
  httpServer?: http.Server;
  /** SIGTERM seen: drain, then exit (tokenizer_manager.gracefully_exit). */
  gracefullyExit = false;
  /** The drain is over (every worker's count reached 0, or a force exit): the watchdogs stop. */
  drained = false;
  /** Which tokenizer worker took each request, round-robin, and the request's id there. */
  readonly admitted = new WeakMap<http.ServerResponse, { worker: number; hex: string }>();
  admittedCount = 0;
  /** The gauges as last published; a scrape reads these, not the live counts. */
  gauges = { running: 0, queued: 0 };
  gaugesAt = Date.now();
  forwardCtDecode = 0;

  /**
   * The schedulers' health check failed (ServerStatus.UnHealthy, e.g. a stuck scheduler): the
   * drain force-exits; a later successful check makes it Up again.
   */
  healthCheckFailed = false;
  /**
   * Until then (ms) health checks answer 503 as while starting, though requests are served: the
   * healthGenerateLagSeconds fault (../faults.ts).
   */
  startingUntil = 0;
  /** The chat and /generate routes, with the prefix cache and the token counters. */
  readonly generation: Generation;

  constructor(
    readonly args: ServerArgs,
    /** What /server_info reports: the args as resolved. */
    readonly reported: ServerArgs,
    readonly spec: SpecSettings,
    readonly config: SimConfig,
    readonly contextLength: number,
    /** This start's ordinal on the host (./launches.ts). */
    launch: number,
  ) {
    this.generation = new Generation({ args, spec, speedScale: config.speedScale, surface: config.surface, launch, contextLength, modelId: () => this.modelId(), onPrefill: () => this.publishGauges(), log: (msg) => log("ERROR", msg) });
  }

  /** Requests in flight, as the drain and the gauges count them. */
  get running(): Set<http.ServerResponse> {
    return this.generation.running;
  }

  /** The tokenizer workers (--tokenizer-worker-num; 1 is the main process's own TokenizerManager). */
  get workers(): number {
    return Math.max(1, this.args.tokenizer_worker_num as number);
  }

  /** A request arrives: the next tokenizer worker takes it (round-robin) and names it. */
  admit(res: http.ServerResponse): void {
    this.admitted.set(res, { worker: this.admittedCount++ % this.workers, hex: randomBytes(16).toString("hex") });
  }

  /**
   * The request ids a worker's watchdog lists: with one worker the simulator's own `req-N`; with
   * several, `<worker pid>_<uuid hex>` (multi_tokenizer_mixin.py prefixes each rid with its worker id).
   */
  remainingRids(worker: number): string[] {
    if (this.workers === 1) return Array.from({ length: this.running.size + this.queued }, (_, i) => `req-${i}`);
    const pid = workerPid(process.pid, this.args, worker);
    return [...this.running].flatMap((res) => {
      const a = this.admitted.get(res);
      return a && a.worker === worker ? [`${pid}_${a.hex}`] : [];
    });
  }

  modelId(): string {
    return (this.args.served_model_name as string | null) ?? (this.args.model_path as string);
  }

  /** Every server argument as resolved, secrets included (http_server.py, server_info). */
  serverInfo(): Record<string, unknown> {
    const info: Record<string, unknown> = { ...this.reported, version: this.config.version ?? LINES[this.config.line].version };
    if (this.spec.algorithm === "DDTREE") info.speculative_ddtree_topk = this.spec.topk;
    info.internal_states = [{ avg_spec_accept_length: this.generation.avgAcceptLength(), last_gen_throughput: this.generation.lastThroughput }];
    return info;
  }

  /** Copies the live counts into the gauges, as the scheduler's log_*_stats do. */
  publishGauges(): void {
    this.gauges = { running: this.running.size, queued: this.queued };
    this.gaugesAt = Date.now();
  }

  /**
   * The scheduler's rhythm: one decode step per perf-model step while anything runs,
   * gauges refreshed every DECODE_LOG_INTERVAL steps, and every IDLE_METRICS_SECONDS
   * while idle.
   */
  startScheduler(): void {
    const tick = () => {
      if (this.running.size > 0) {
        if (++this.forwardCtDecode % DECODE_LOG_INTERVAL === 0) this.publishGauges();
      } else if (Date.now() - this.gaugesAt > IDLE_METRICS_SECONDS * 1000) {
        this.publishGauges();
      }
    };
    setInterval(tick, Math.max(1, perfAt(this.spec, 0, this.config.speedScale, this.config.surface).stepSeconds * 1000)).unref();
  }

  metrics(): string {
    // One series per label set; only the first attention-TP rank's scheduler reports. The
    // gauges carry the rank labels, the token counters only model_name and engine_type
    // (srt/observability/metrics_collector.py).
    const model = `model_name=${JSON.stringify(this.modelId())},engine_type="unified"`;
    const ranked = `${model},tp_rank="0",pp_rank="0",moe_ep_rank="0"`;
    const g = this.generation;
    const lines = [
      ["sglang:num_running_reqs", "gauge", this.gauges.running, ranked],
      ["sglang:num_queue_reqs", "gauge", this.gauges.queued, ranked],
      ["sglang:token_usage", "gauge", this.running.size ? 0.01 * this.running.size : 0, ranked],
      ["sglang:gen_throughput", "gauge", g.lastThroughput, ranked],
      ["sglang:spec_accept_length", "gauge", g.avgAcceptLength(), ranked],
      ["sglang:prompt_tokens_total", "counter", g.promptTokensTotal, model],
      ["sglang:generation_tokens_total", "counter", g.generationTokensTotal, model],
      ["sglang:num_requests_total", "counter", g.requestsTotal, model],
    ] as const;
    const out: string[] = [];
    for (const [metric, type, value, labels] of lines) {
      out.push(`# HELP ${metric} ${metric.slice(7).replace(/_/g, " ")}.`, `# TYPE ${metric} ${type}`, `${metric}{${labels}} ${promFloat(value)}`);
    }
    return out.join("\n") + "\n";
  }

  /**
   * srt/utils/auth.py decide_request_auth (add_api_key_middleware): /health* and /metrics are
   * open; a normal route needs api_key when one is set; an ADMIN_OPTIONAL route (/flush_cache)
   * needs admin_api_key when one is set (api_key is then not accepted), else api_key. A key is
   * `Authorization: <bearer, any case> <key>` or `x-api-key: <key>`.
   */
  authorized(req: http.IncomingMessage, route: string): boolean {
    const admin = route === "POST /flush_cache" || route === "GET /flush_cache";
    const key = (admin ? this.args.admin_api_key : null) ?? this.args.api_key;
    if (!key) return true;
    const auth = req.headers.authorization ?? "";
    const space = auth.indexOf(" ");
    const bearer = space > 0 && auth.slice(0, space).toLowerCase() === "bearer" ? auth.slice(space + 1) : undefined;
    return bearer === key || req.headers["x-api-key"] === key;
  }

  /**
   * http_server.py health_generate, for /health and /health_generate alike. `starting`: the
   * server has not yet finished its warm-up (ServerStatus.Starting).
   */
  health(route: string, res: http.ServerResponse): void {
    if (this.gracefullyExit) {
      log("INFO", "Health check request received during shutdown. Returning 503.");
      return void res.writeHead(503).end();
    }
    if (this.phase !== "ready" || Date.now() < this.startingUntil) return void res.writeHead(503).end();
    if (route === "GET /health" && !boolEnv(process.env.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION, true)) return void res.writeHead(200).end();
    // A one-token generation: any scheduler output after `tic` proves the scheduler alive. A
    // stuck scheduler (hangGenerations) produces none, for this check or anyone's.
    const tic = Date.now();
    const step = perfAt(this.spec, 0, this.config.speedScale, this.config.surface).stepSeconds * 1000;
    const alive = () => !faultsFor(readFaults(), this.args).hangGenerations;
    const poll = (waited: number) =>
      setTimeout(() => {
        if (alive() && Date.now() - tic >= step) {
          this.healthCheckFailed = false;
          return void res.writeHead(200).end();
        }
        if (waited + 1 < HEALTH_CHECK_TIMEOUT_SECONDS) return poll(waited + 1);
        const hms = (t: number) => new Date(t).toISOString().slice(11, 19);
        log("ERROR", `Health check failed. Server couldn't get a response from detokenizer for last ${HEALTH_CHECK_TIMEOUT_SECONDS} seconds. tic start time: ${hms(tic)}. last_heartbeat time: ${hms(this.generation.lastOutputAt || tic)}`);
        this.healthCheckFailed = true;
        res.writeHead(503).end();
      }, 1_000);
    poll(0);
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const route = `${req.method} ${url.pathname}`;
    // After the drain, only the stale-answer fault keeps a few read-only routes alive.
    const staleAllowed = route === "GET /v1/models" || route === "GET /get_server_info" || route === "GET /server_info";
    if (this.phase === "exiting" && !staleAllowed) return void res.destroy();
    if (this.config.removedEndpoints.includes(url.pathname)) return json(404, { detail: "Not Found" });
    // add_api_key_middleware: /health* and /metrics are open, everything else needs the key.
    if (!this.authorized(req, route) && !url.pathname.startsWith("/health") && !url.pathname.startsWith("/metrics")) return json(401, { error: "Unauthorized" });
    switch (route) {
      case "GET /health":
      case "GET /health_generate":
        return this.health(route, res);
      case "GET /v1/models":
        return json(200, { object: "list", data: [{ id: this.modelId(), object: "model", created: 0, owned_by: "sglang", root: this.args.model_path, max_model_len: this.contextLength }] });
      case "GET /get_server_info":
        // Versions that have /server_info deprecate this one; older ones had only this.
        if (!this.config.removedEndpoints.includes("/server_info")) log("WARNING", "Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.");
        return json(200, this.serverInfo());
      case "GET /server_info":
        return json(200, this.serverInfo());
      case "GET /get_load":
        return json(200, [{ dp_rank: 0, num_reqs: this.running.size, num_waiting_reqs: this.queued, num_tokens: 0 }]);
      case "GET /metrics":
        if (!this.args.enable_metrics) return json(404, { detail: "Not Found" });
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
        return void res.end(this.metrics());
      case "GET /flush_cache":
      case "POST /flush_cache":
        // scheduler.py flush_cache: refused while requests run or wait; http_server.py answers text.
        if (this.generation.flushCache()) {
          log("INFO", "Cache flushed successfully!");
          res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
          return void res.end("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n");
        }
        log("WARNING", `Cache not flushed because there are pending requests. #queue-req: ${this.queued}, #running-req: ${this.running.size}`);
        res.writeHead(400, { "content-type": "text/plain; charset=utf-8" });
        return void res.end("Flush cache failed.\n");
      case "POST /v1/chat/completions":
        this.admit(res);
        return void this.readBody(req, res, (body) => {
          if (!this.notReady(res)) this.generation.chat(body, res);
        });
      case "POST /generate":
        this.admit(res);
        return void this.readBody(req, res, (body) => {
          if (!this.notReady(res)) this.generation.native(body, res);
        });
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
}

async function main(): Promise<void> {
  const config = readConfig();
  const traits = LINES[config.line];
  const table = flagTable(config.profile);
  // srt/server_args.py prepare_server_args: `--config FILE` is merged into argv first.
  const merged = mergeConfigFile(
    process.argv.slice(2),
    table,
    (file) => {
      try {
        return fs.readFileSync(file, "utf8");
      } catch {
        return undefined;
      }
    },
    traits.configAliasKeys,
  );
  if (merged.kind === "error") die(1, merged.traceback);
  const parsed = parseArgs(merged.argv, table, traits.modelPathRequiredByArgparse);
  if (parsed.kind === "help") {
    // Fault hangHelp: the import hangs (no output, no exit) until the fault is cleared.
    while (readFaults().hangHelp) await sleep(0.2);
    process.stdout.write(parsed.text);
    return;
  }
  if (parsed.kind === "error") die(parsed.status, parsed.stderr);
  // print_deprecated_warning: before logging is set up, so without a timestamp.
  // srt/arg_groups/argparse_actions.py: printed in bold yellow (ANSI), as SGLang prints it.
  for (const w of parsed.warnings) process.stderr.write(`\x1b[1;33m${w}\x1b[0m\n`);
  const args = parsed.args;
  // srt/utils/common.py configure_logger: getattr(logging, log_level.upper()); a name logging
  // lacks is an AttributeError there (the exact frame is not verified).
  logLevel = String(args.log_level);
  if (levelNumber(logLevel) === undefined) die(1, traceback("sglang/srt/utils/common.py, in configure_logger", `AttributeError: module 'logging' has no attribute '${logLevel.toUpperCase()}'`));
  // sglang/cli/utils.py get_model_path (main): checked after parsing, an exception, exit 1.
  if (args.model_path === null) die(1, traceback("sglang/cli/utils.py, in get_model_path", "Exception: Error: --model-path is required. Please provide the path to the model."));
  const blockSize = resolvedBlockSize(args);
  const reported = resolvedArgs(args, blockSize);
  const faults = faultsFor(readFaults(), args);
  const gpus = new GpuStore();
  const gpuConfig = gpus.config();
  const spec = specSettings(reported, process.env);
  const releaseDelayMs = faults.gpuReleaseDelaySeconds * 1000;

  // CUDA_VISIBLE_DEVICES: the process sees these GPUs (nvidia-smi's indices), as its ranks 0..
  const visible = visibleGpus(process.env.CUDA_VISIBLE_DEVICES, gpuConfig.count);
  const invalid = validate(args, visible.length, config.profile, blockSize);
  if (invalid) die(1, traceback("sglang/srt/server_args.py, in __post_init__", invalid));
  log("INFO", startupArgsLine(config.line, reported));

  const tp = args.tp_size as number;
  const nnodes = args.nnodes as number;
  const nodeRank = args.node_rank as number;
  const localTp = tp / nnodes;
  const weightsGiB = modelSizeGiB(args.model_path as string, "model");
  const drafterGiB = args.speculative_draft_model_path ? modelSizeGiB(args.speculative_draft_model_path as string, "draft model") : 0;
  // Every start that gets this far counts, a failing one too: it is a launch on the host.
  const launch = takeLaunchOrdinal();
  const server = new Server(args, reported, spec, config, contextLength(args), launch);
  // Not a line of SGLang: the simulator says which launch-to-launch draw this start got, so a
  // reader of a sweep's journal can tell a slow launch from a slow configuration.
  if (config.surface.noise) log("INFO", `[simulator] launch ${launch} on this host: every step of this server takes x${server.generation.launchFactor.toFixed(4)} (surface noise.launchSd ${config.surface.noise.launchSd})`);
  const loadSeconds = (config.loadSeconds ?? (weightsGiB + drafterGiB) * config.loadSecondsPerGiB) * faults.loadSlowdown;

  for (let r = 0; r < localTp; r++) log("INFO", "Init torch distributed begin.", nodeRank * localTp + r);
  const ranks = Array.from({ length: localTp }, (_, i) => i);
  const weightsPerRankMiB = ((weightsGiB + drafterGiB) * 1024) / tp;
  let kvCacheMiB = 0;
  const failure = gpus.reserve(process.pid, "python3", releaseDelayMs, (usage) => {
    const plan = planMemory({
      ranks: ranks.map((r) => usage[visible[r]]),
      weightsPerRankMiB,
      memFractionStatic: args.mem_fraction_static as number,
      tpSize: tp,
      // SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK defaults to true: "unbalanced" is fatal.
      strictBalance: boolEnv(process.env.SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK, true),
    });
    for (const w of plan.warnings) log("WARNING", `WARNING ${w}`, 0);
    if (plan.kind === "fail") return { failure: plan };
    kvCacheMiB = plan.kvCacheMiB;
    return { perGpuMiB: Object.fromEntries(ranks.map((r) => [visible[r], plan.perRankMiB])) };
  });
  // A scheduler crash (./crash.ts): the memory check of every rank, or the one rank whose GPU the
  // weights do not fit; every rank's KV cache.
  const crash = (stage: CrashStage, failing: "all" | number, exception: (localRank: number) => string): never =>
    schedulerCrash(schedulerCrashLines({ stage, failing, exception, localRanks: localTp, firstRank: nodeRank * localTp, at: new Date() }));
  if (failure) return crash(failure.stage, failure.stage === "weights" ? (failure.rank ?? 0) : "all", () => failure.error);

  if (nnodes > 1) await rendezvous(String(args.dist_init_addr), nnodes, nodeRank, config.rendezvousSeconds);

  log("INFO", `Load weight begin. avail mem=${(gpuConfig.memoryMiB / 1024).toFixed(2)} GB`, 0);
  if (args.quantization === "compressed-tensors" || args.quantization === "moe_wna16") {
    for (let r = 0; r < tp; r++) log("INFO", "Using CompressedTensorsWNA16MarlinMoEMethod", r);
  }
  if (faults.hangDuringLoad) {
    log("PRINT", "Loading safetensors checkpoint shards:  37% Completed | 23/62", 0);
    // Stuck like a hung NCCL init: the process lives on, the port never opens, for as long
    // as the fault stays set. Clearing it lets the load finish (a test holds a rollout at
    // this point, then lets it go, instead of racing a timer).
    while (faultsFor(readFaults(), args).hangDuringLoad) await sleep(0.2);
  }
  const totalGiB = gpuConfig.memoryMiB / 1024;
  if (outOfMemory(config.surface, spec)) {
    // The surface's out-of-memory region (./surface.ts): the tree's CUDA graph capture does not
    // fit on any rank, half-way through the load (srt/model_executor/cuda_graph_runner.py).
    await sleep(loadSeconds / 2);
    return crash("cuda-graph", "all", (r) => graphCaptureFailed(r, totalGiB, "4.00"));
  }
  if (faults.crashDuringLoad) {
    await sleep(loadSeconds / 2);
    const total = gpuConfig.memoryMiB;
    switch (faults.crashDuringLoad) {
      case "oom":
        // One GPU short: its rank fails, the others' collectives abort.
        return crash("weights", oneRank(localTp), () => `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 3 has a total capacity of ${(total / 1024).toFixed(2)} GiB of which 2.00 GiB is free. Of the allocated memory ${((total - 2048) / 1024).toFixed(2)} GiB is allocated by PyTorch.`);
      case "not-enough-memory":
        return crash("kv-cache", "all", () => `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=${args.mem_fraction_static}`);
      case "unbalanced":
        return crash("balance", "all", () => `RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=41.20, local_gpu_memory=94.50, local_gpu_memory * 0.9=85.05`);
      case "cuda-graph":
        return crash("cuda-graph", "all", (r) => graphCaptureFailed(r, totalGiB, "2.00"));
      case "error":
        return crash("load-error", "all", () => "RuntimeError: Error(s) in loading state_dict: size mismatch for model.layers.3.mlp.experts.w13_weight");
    }
  }
  await sleep(loadSeconds);
  log("INFO", `Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=${((gpuConfig.memoryMiB - weightsPerRankMiB) / 1024).toFixed(2)} GB, mem usage=${(weightsPerRankMiB / 1024).toFixed(2)} GB.`, 0);
  log("INFO", `KV Cache is allocated. #tokens: ${Math.floor(kvCacheMiB * 40)}`, 0);
  if (spec.algorithm) log("INFO", `Speculative decoding: algorithm=${spec.algorithm}, draft tokens=${spec.blockSize}, budget=${spec.budget ?? "-"}, topk=${spec.topk}, window=${spec.window ?? "full"}`, 0);
  if (nodeRank > 0) {
    // Only the first node serves the API; the others answer a dummy health check on
    // --port and run their ranks until a peer goes away.
    dummyHealthServer(args.host as string, args.port as number);
    log("INFO", `Node ${nodeRank} of ${nnodes} ready; requests are served by node 0 (${args.dist_init_addr}).`);
    return;
  }

  const httpServer = http.createServer((req, res) => server.handle(req, res));
  server.httpServer = httpServer;
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(args.port as number, args.host as string, () => resolve());
  }).catch((e: Error) => die(1, `OSError: [Errno 98] error while attempting to bind on address ('${args.host}', ${args.port}): ${e.message}`));
  // The handle loop exists from here on, and with it the SIGTERM drain; until now a
  // SIGTERM ends the process at once (the default action).
  process.on("SIGTERM", () => {
    // tokenizer_manager.py SignalHandler.sigterm_handler: a WARNING (read at v0.5.20's tag; its
    // level on v0.5.19 is not verified).
    log("WARNING", "SIGTERM received. signum=None frame=None. Draining requests and shutting down...");
    // ignoreSigtermSeconds: a process slow to notice (faults act live, read now).
    const late = faultsFor(readFaults(), args).ignoreSigtermSeconds;
    if (late > 0) setTimeout(() => (server.gracefullyExit = true), late * 1000);
    else server.gracefullyExit = true;
  });
  void sigtermWatchdog(server, args, traits);
  server.startScheduler();
  server.phase = "warmup";
  log("INFO", `INFO:     Started server process [${process.pid}]`);
  log("INFO", `INFO:     Uvicorn running on http://${args.host}:${args.port} (Press CTRL+C to quit)`);
  await sleep(config.warmupSeconds);
  if (server.gracefullyExit) return;
  server.phase = "ready";
  server.readyAt = Date.now();
  server.startingUntil = server.readyAt + faults.healthGenerateLagSeconds * 1000;
  log("INFO", "The server is fired up and ready to roll!");
  if (faults.crashAfterReadySeconds !== null) {
    await sleep(faults.crashAfterReadySeconds);
    // Rank 0's kernel fails; the other ranks wait for it in their next broadcast.
    return crash("serving", 0, () => "RuntimeError: CUDA error: an illegal memory access was encountered");
  }
}

/**
 * The simulator's stand-ins for its children's pids, in the order engine.py _launch_subprocesses
 * starts them: the schedulers (one a local TP rank), the detokenizer, then the tokenizer workers.
 */
function schedulerPids(args: ServerArgs): number[] {
  return Array.from({ length: (args.tp_size as number) / (args.nnodes as number) }, (_, r) => process.pid + 1 + r);
}
function workerPid(pid: number, args: ServerArgs, worker: number): number {
  return pid + 1 + (args.tp_size as number) / (args.nnodes as number) + 1 + worker;
}

/** Tokenizer worker i checks 1.3 s after worker i-1 (modulo the 5 s period): their lines interleave. */
const workerPhaseSeconds = (worker: number) => (worker * 1.3) % WATCHDOG_SECONDS;

/** A scheduler crash: its lines on stderr (the logger's records level-filtered), then the main process SIGKILLs itself. */
function schedulerCrash(lines: CrashLine[]): never {
  for (const l of lines) if (shown(l.level, logLevel)) process.stderr.write(`${l.bare ? "" : `${stamp(l.rank)} `}${l.text}\n`);
  // tokenizer_manager.py running_phase_sigquit_handler: kill_process_tree(include_parent=True).
  process.kill(process.pid, "SIGKILL");
  throw new Error("unreachable: the process SIGKILLed itself");
}

/**
 * One tokenizer worker's TokenizerManager.sigterm_watchdog: every 5 s, look for the SIGTERM flag;
 * then every 5 s, count what is in flight for this worker (rid_to_state: queued and running, new
 * requests included) until it logs 0, or a force exit. "forced": the drain ends for every worker.
 */
async function workerWatchdog(server: Server, worker: number): Promise<"drained" | "forced"> {
  await sleep(workerPhaseSeconds(worker));
  while (!server.gracefullyExit) await sleep(WATCHDOG_SECONDS);
  for (;;) {
    if (server.drained) return "forced";
    // A failed health check (a stuck scheduler) ends the wait at once: the requests it holds
    // would never finish.
    if (server.healthCheckFailed) {
      log("ERROR", "Signal SIGTERM received while health check failed. Force exiting.");
      return "forced";
    }
    // get_bool_env_var: "true"/"1" in any case.
    if (boolEnv(process.env.SGL_FORCE_SHUTDOWN, false)) {
      log("ERROR", "Signal SIGTERM received while force shutdown flag set. Force exiting.");
      return "forced";
    }
    const rids = server.remainingRids(worker);
    log("INFO", `Gracefully exiting... Remaining number of requests ${rids.length}. Remaining requests remaining_rids=[${rids.map((r) => `'${r}'`).join(", ")}].`);
    if (rids.length === 0) return "drained";
    await sleep(WATCHDOG_SECONDS);
  }
}

/**
 * The drain (one watchdog per tokenizer worker) and its end: once every worker logged 0, or at a
 * force exit, a ShutdownReq to the schedulers and up to 15 s for them, then the line's end
 * (./lines.ts drainExit).
 */
async function sigtermWatchdog(server: Server, args: ServerArgs, traits: LineTraits): Promise<void> {
  await new Promise<void>((resolve) => {
    let drained = 0;
    for (let w = 0; w < server.workers; w++) {
      void workerWatchdog(server, w).then((how) => {
        if (how === "forced" || ++drained === server.workers) resolve();
      });
    }
  });
  server.drained = true;
  // The schedulers get a ShutdownReq and up to 15 s to exit, in a blocking sleep loop inside the
  // event loop: HTTP answers nothing (the kernel still accepts connections; they are reset when
  // the process or its socket goes). How long the schedulers take is read now, like a fault: a
  // host condition at shutdown. A stuck scheduler (hangGenerations) never takes the ShutdownReq.
  const stuck = faultsFor(readFaults(), args).hangGenerations;
  const exitSeconds = stuck ? Infinity : readConfig().schedulerExitSeconds;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.min(exitSeconds, SCHEDULER_SHUTDOWN_WAIT_SECONDS) * 1000);
  if (traits.drainExit === "asgi" && exitSeconds > SCHEDULER_SHUTDOWN_WAIT_SECONDS) {
    log("WARNING", `Schedulers still alive ${SCHEDULER_SHUTDOWN_WAIT_SECONDS}s after ShutdownReq, killing them before they released: [${schedulerPids(args).join(", ")}]`);
  }
  // staleSeconds: a process whose listener lingers after the drain (read-only routes only).
  const stale = faultsFor(readFaults(), args).staleSeconds;
  if (stale > 0) {
    server.phase = "exiting";
    await sleep(stale);
  }
  if (traits.drainExit === "self-sigkill") {
    // v0.5.19: kill_process_tree(include_parent=True), this process included.
    process.kill(process.pid, "SIGKILL");
    return;
  }
  // v0.5.20 on: kill_process_tree(include_parent=False) (the schedulers and the detokenizer, which
  // the simulator does not have), then the server-stop hook: uvicorn stops listening (new
  // connections refused, those waiting reset), runs the lifespan shutdown and returns; the
  // process exits normally.
  log("INFO", "INFO:     Shutting down");
  server.httpServer?.close();
  server.httpServer?.closeAllConnections();
  log("INFO", "INFO:     Waiting for application shutdown.");
  log("INFO", "INFO:     Application shutdown complete.");
  log("INFO", `INFO:     Finished server process [${process.pid}]`);
  process.exit(0);
}

/** srt/utils/common.py launch_dummy_health_check_server: 200 on /health, /health_generate, /ping. */
function dummyHealthServer(host: string, port: number): void {
  log("INFO", `Starting dummy health check server at ${host}:${port}`);
  http
    .createServer((req, res) => {
      const p = new URL(req.url ?? "/", "http://x").pathname;
      if (req.method === "GET" && (p === "/health" || p === "/health_generate" || p === "/ping")) return void res.writeHead(200).end();
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ detail: "Not Found" }));
    })
    // uvicorn runs it on its own; a failed bind is logged and the rank runs on without it.
    .on("error", (e: Error) => log("ERROR", `ERROR:    [Errno 98] error while attempting to bind on address ('${host}', ${port}): ${e.message}`))
    .listen(port, host);
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
    log("INFO", `All ${nnodes} nodes joined at ${addr}.`);
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
      log("INFO", `Joined node 0 at ${addr} as node ${rank}.`);
      return;
    }
    if (Date.now() > deadline) abort(`timed out after ${timeoutSeconds} s connecting to node 0 at ${addr}`);
    await sleep(0.25);
  }
}

main().catch((e) => die(1, `Traceback (most recent call last):\n${(e as Error).stack ?? e}`));
