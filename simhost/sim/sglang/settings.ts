// The SGLang simulator's settings: the keys of a host's /etc/dflash-sim/sglang.json (what
// `npm run simhost -- start --sglang JSON` writes and `configure NAME JSON` merges), each with
// what it takes and its default, in one list. The simulator reads its file through
// parseSimConfig; the CLI checks a user's JSON with checkSimSettings before anything is
// touched (with a "did you mean"), and its --help lists the same keys (settingsHelp). A key
// not in the list is refused, naming the valid ones. Pure; it imports nothing outside
// simhost/sim (it is compiled into the hosts' simulator).
import { BUILD_PROFILES, type BuildProfile } from "./flags";
import { ALL_SGLANG_LINES, type SglangLine } from "./lines";
import { parseSurface, type PerfSurface } from "./surface";

export interface SimConfig {
  profile: BuildProfile;
  /** The newest release, main or v0.5.19 (./lines.ts). */
  line: SglangLine;
  /** Fixed load time; when absent it scales with model size. */
  loadSeconds?: number;
  loadSecondsPerGiB: number;
  warmupSeconds: number;
  /**
   * How long the schedulers take to exit once main's drain sends them ShutdownReq (read at
   * shutdown); the tokenizer waits for them up to the line's limit (15 s), then kills the tree.
   */
  schedulerExitSeconds: number;
  /** Multiplies every speed of the performance model (benchmarks of the client itself). */
  speedScale: number;
  /** Reported by /server_info; the line's own when absent. */
  version?: string;
  /** How long nodes of a multi-node start wait for each other. */
  rendezvousSeconds: number;
  /**
   * Endpoints this SGLang version lacks (404), e.g. ["/get_server_info"] for a version
   * after its removal, or ["/server_info"] for one from before it existed.
   */
  removedEndpoints: string[];
  /** The performance model's shape over the settings (./surface.ts); its default when absent. */
  surface: PerfSurface;
}

/** The defaults of every setting that has one (the surface's: ./surface.ts). */
const DEFAULTS: Omit<SimConfig, "surface"> = { profile: "upstream", line: "main", loadSecondsPerGiB: 0.005, warmupSeconds: 0.5, schedulerExitSeconds: 0.5, speedScale: 1, rendezvousSeconds: 120, removedEndpoints: [] };

type Check = (value: unknown) => string | undefined;
const seconds: Check = (v) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? undefined : "a number of seconds, 0 or more");
const oneOf = (words: readonly string[]): Check => (v) => (typeof v === "string" && words.includes(v) ? undefined : `one of ${words.map((w) => JSON.stringify(w)).join(", ")}`);

/** Every setting: what it is, what it takes (checked), its default in words. */
export const SIM_SETTINGS: Record<keyof SimConfig, { about: string; check: Check; default: string }> = {
  profile: { about: "the SGLang build simulated", check: oneOf(BUILD_PROFILES), default: `"${DEFAULTS.profile}"; simhost start: Pulumi.yaml's sglangBuild` },
  line: { about: "the SGLang line simulated: the newest release (v0.5.21), main or v0.5.19", check: oneOf(ALL_SGLANG_LINES), default: `"${DEFAULTS.line}"` },
  loadSeconds: { about: "seconds the weights take to load", check: seconds, default: "from the model's size, at loadSecondsPerGiB" },
  loadSecondsPerGiB: { about: "load seconds per GiB of weights, where loadSeconds is not set", check: seconds, default: String(DEFAULTS.loadSecondsPerGiB) },
  warmupSeconds: { about: "seconds of warm-up after the load", check: seconds, default: String(DEFAULTS.warmupSeconds) },
  schedulerExitSeconds: { about: "seconds the schedulers take to exit after a drain (read at shutdown)", check: seconds, default: String(DEFAULTS.schedulerExitSeconds) },
  speedScale: { about: "multiplies every speed of the performance model", check: (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? undefined : "a positive number"), default: String(DEFAULTS.speedScale) },
  version: { about: "the version /server_info reports", check: (v) => (typeof v === "string" && v !== "" ? undefined : "non-empty text"), default: "the line's own" },
  rendezvousSeconds: { about: "how long the nodes of a multi-node start wait for each other", check: seconds, default: String(DEFAULTS.rendezvousSeconds) },
  removedEndpoints: { about: 'endpoints this version lacks (404), e.g. ["/get_server_info"]', check: (v) => (Array.isArray(v) && v.every((e) => typeof e === "string" && e.startsWith("/")) ? undefined : 'a list of paths, e.g. ["/get_server_info"]'), default: "[]" },
  surface: {
    about: "the performance model's shape over the DDTree settings, e.g. the contents of bench/surfaces/two-peaks.json",
    check: (v) => {
      try {
        parseSurface(v);
        return undefined;
      } catch (e) {
        return (e as Error).message;
      }
    },
    default: "the simulator's own model",
  },
};

/** The valid keys, in the list's order. */
export const SIM_SETTING_KEYS = Object.keys(SIM_SETTINGS) as (keyof SimConfig)[];

/**
 * Pure: `raw` checked as (some of) the simulator's settings: an object whose every key is a
 * setting and whose every value is of its kind; throws naming the first that is not, with the
 * valid keys and, given `suggest` (the CLI's `closest`), the nearest one. Returns it.
 */
export function checkSimSettings(raw: unknown, suggest?: (word: string, candidates: string[]) => string | undefined): Record<string, unknown> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error(`the simulator's settings must be a JSON object, e.g. {"profile":"ddtree-fork"}; got ${JSON.stringify(raw)}`);
  const settings = raw as Record<string, unknown>;
  for (const [key, value] of Object.entries(settings)) {
    if (!Object.hasOwn(SIM_SETTINGS, key)) {
      const near = suggest?.(key, SIM_SETTING_KEYS);
      throw new Error(`unknown setting ${key}${near ? `; did you mean ${near}?` : ";"} valid: ${SIM_SETTING_KEYS.join(", ")}`);
    }
    const wrong = SIM_SETTINGS[key as keyof SimConfig].check(value);
    if (wrong !== undefined) throw new Error(`setting ${key} must be ${wrong}; got ${JSON.stringify(value)}`);
  }
  return settings;
}

/** Pure: the simulator's configuration from its file's contents (undefined: no file), checked, with the defaults. */
export function parseSimConfig(raw: unknown): SimConfig {
  const given = checkSimSettings(raw ?? {});
  return { ...DEFAULTS, ...given, surface: parseSurface(given.surface) } as SimConfig;
}

/** Pure: the settings as a help text lists them, one a line: key, what it is, what it takes by default. */
export function settingsHelp(indent = "  "): string {
  const width = Math.max(...SIM_SETTING_KEYS.map((k) => k.length)) + 2;
  return SIM_SETTING_KEYS.map((k) => `${indent}${k.padEnd(width)}${SIM_SETTINGS[k].about} (default: ${SIM_SETTINGS[k].default})`).join("\n");
}
