// Faults injected into a simulated host, read from one JSON file on the host so that
// `npm run simhost -- fault NAME SPEC` can change them between runs.
import * as fs from "node:fs";

export const CRASH_KINDS = ["oom", "not-enough-memory", "unbalanced", "cuda-graph", "error"] as const;

export interface Faults {
  /** Seconds between a GPU process exiting and its memory being free (real drivers: seconds). */
  gpuReleaseDelaySeconds: number;
  /**
   * Crash while loading, with one of SGLang's memory failures (torch's CUDA OOM, "Not
   * enough memory", "memory capacity is unbalanced"), a CUDA graph capture failure, or
   * another load error.
   */
  crashDuringLoad: (typeof CRASH_KINDS)[number] | null;
  /** Hang while loading: the port never opens while this stays set; cleared, the load goes on. */
  hangDuringLoad: boolean;
  /**
   * \`nvidia-smi\` hangs while this is set (a wedged driver, common on GPU hosts): every call
   * blocks without output until the fault is cleared, then answers. Not scoped by \`match\`:
   * the driver is the host's.
   */
  hangNvidiaSmi: boolean;
  /**
   * \`python -m sglang.launch_server --help\` hangs while this is set (an import stuck on a
   * network filesystem or a wedged CUDA init); cleared, it answers. Not scoped by \`match\`.
   */
  hangHelp: boolean;
  /** Multiplies the load time. */
  loadSlowdown: number;
  /** Crash this many seconds after becoming ready. */
  crashAfterReadySeconds: number | null;
  /**
   * For this many seconds after the server began to serve, both health routes answer 503 while
   * requests are served: SGLang's one health handler (srt/entrypoints/http_server.py,
   * health_generate) answers 503 while the server status is Starting, i.e. until its warm-up
   * request has finished, and the HTTP routes serve meanwhile. (A slow scheduler does NOT fail
   * the check: any scheduler output counts as alive.) The unit's start gate, and so systemd's
   * "active", lag behind serving. Read when the server starts.
   */
  healthGenerateLagSeconds: number;
  /** Generations return garbage instead of text. */
  corruptOutput: boolean;
  /**
   * Generations are accepted and not answered while this is set (a stuck scheduler; server
   * info still answers); they stay in flight, and run once it is cleared. Health checks, on
   * both routes, get no scheduler output either: 503 after SGLANG_HEALTH_CHECK_TIMEOUT.
   */
  hangGenerations: boolean;
  /** On SIGTERM, notice it this much later (the drain starts late). */
  ignoreSigtermSeconds: number;
  /** After the drain, keep answering /v1/models and the server-info routes this long before exiting. */
  staleSeconds: number;
  /**
   * Server args (as /get_server_info names them) a server must have for the faults above
   * to hit it, e.g. {"speculative_ddtree_budget": 16}: a fault in the new configuration
   * that spares the old one. Null: every server. The GPU release delay is the driver's
   * and applies to every process regardless.
   */
  match: Record<string, string | number | boolean | null> | null;
}

export const NO_FAULTS: Faults = {
  gpuReleaseDelaySeconds: 0,
  crashDuringLoad: null,
  hangDuringLoad: false,
  hangNvidiaSmi: false,
  hangHelp: false,
  loadSlowdown: 1,
  crashAfterReadySeconds: null,
  healthGenerateLagSeconds: 0,
  corruptOutput: false,
  hangGenerations: false,
  ignoreSigtermSeconds: 0,
  staleSeconds: 0,
  match: null,
};

export const FAULTS_FILE = process.env.DFLASH_SIM_FAULTS ?? "/etc/dflash-sim/faults.json";

/** Pure: validates a partial fault spec (unknown keys are an error, so typos are caught). */
export function parseFaults(input: unknown): Faults {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new Error("fault spec must be a JSON object, e.g. {\"gpuReleaseDelaySeconds\": 5}");
  }
  const out: Faults = { ...NO_FAULTS };
  for (const [key, value] of Object.entries(input)) {
    if (!(key in NO_FAULTS)) {
      throw new Error(`unknown fault "${key}"; known faults: ${Object.keys(NO_FAULTS).join(", ")}`);
    }
    const k = key as keyof Faults;
    const bad = () => new Error(`fault "${key}" has an invalid value ${JSON.stringify(value)}`);
    switch (k) {
      case "crashDuringLoad":
        if (value !== null && !CRASH_KINDS.includes(value)) throw bad();
        out.crashDuringLoad = value;
        break;
      case "hangDuringLoad":
      case "hangNvidiaSmi":
      case "hangHelp":
      case "corruptOutput":
      case "hangGenerations":
        if (typeof value !== "boolean") throw bad();
        out[k] = value;
        break;
      case "crashAfterReadySeconds":
        if (value !== null && (typeof value !== "number" || value < 0)) throw bad();
        out.crashAfterReadySeconds = value;
        break;
      case "match":
        if (value !== null && (typeof value !== "object" || Array.isArray(value))) throw bad();
        out.match = value as Faults["match"];
        break;
      case "gpuReleaseDelaySeconds":
      case "healthGenerateLagSeconds":
      case "loadSlowdown":
      case "ignoreSigtermSeconds":
      case "staleSeconds":
        if (typeof value !== "number" || !Number.isFinite(value) || value < 0) throw bad();
        out[k] = value;
        break;
      default: {
        const never: never = k;
        throw new Error(`unhandled fault ${String(never)}`);
      }
    }
  }
  return out;
}

/** Pure: the faults that hit a server with these args (all but the host's own, the GPU delay and the hangs of nvidia-smi and --help, drop out if `match` differs). */
export function faultsFor(f: Faults, args: Record<string, unknown>): Faults {
  if (f.match === null || Object.entries(f.match).every(([k, v]) => args[k] === v)) return f;
  return { ...NO_FAULTS, gpuReleaseDelaySeconds: f.gpuReleaseDelaySeconds, hangNvidiaSmi: f.hangNvidiaSmi, hangHelp: f.hangHelp };
}

export function readFaults(file = FAULTS_FILE): Faults {
  try {
    return parseFaults(JSON.parse(fs.readFileSync(file, "utf8")));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return NO_FAULTS;
    throw e;
  }
}
