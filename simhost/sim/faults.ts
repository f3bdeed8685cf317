// Faults injected into a simulated host, read from one JSON file on the host so that
// `npm run simhost -- fault NAME SPEC` can change them between runs.
import * as fs from "node:fs";

export interface Faults {
  /** Seconds between a GPU process exiting and its memory being free (real drivers: seconds). */
  gpuReleaseDelaySeconds: number;
  /** Crash while loading weights: CUDA out-of-memory or another error. */
  crashDuringLoad: "oom" | "error" | null;
  /** Hang while loading: the port never opens. */
  hangDuringLoad: boolean;
  /** Multiplies the load time. */
  loadSlowdown: number;
  /** Crash this many seconds after becoming ready. */
  crashAfterReadySeconds: number | null;
  /** Generations return garbage instead of text. */
  corruptOutput: boolean;
  /** On SIGTERM, keep serving everything (old config) this long before shutting down. */
  ignoreSigtermSeconds: number;
  /** On SIGTERM, stop generating but keep answering /v1/models and /get_server_info this long. */
  staleSeconds: number;
}

export const NO_FAULTS: Faults = {
  gpuReleaseDelaySeconds: 0,
  crashDuringLoad: null,
  hangDuringLoad: false,
  loadSlowdown: 1,
  crashAfterReadySeconds: null,
  corruptOutput: false,
  ignoreSigtermSeconds: 0,
  staleSeconds: 0,
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
        if (value !== null && value !== "oom" && value !== "error") throw bad();
        out.crashDuringLoad = value;
        break;
      case "hangDuringLoad":
      case "corruptOutput":
        if (typeof value !== "boolean") throw bad();
        out[k] = value;
        break;
      case "crashAfterReadySeconds":
        if (value !== null && (typeof value !== "number" || value < 0)) throw bad();
        out.crashAfterReadySeconds = value;
        break;
      case "gpuReleaseDelaySeconds":
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

export function readFaults(file = FAULTS_FILE): Faults {
  try {
    return parseFaults(JSON.parse(fs.readFileSync(file, "utf8")));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return NO_FAULTS;
    throw e;
  }
}
