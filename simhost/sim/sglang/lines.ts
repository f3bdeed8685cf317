// The SGLangs users run, one "line" each, and everything the simulator does differently between
// them, one trait each, with the file of sgl-project/sglang (under python/sglang/) it follows:
// - "release": v0.5.21, the newest release (tag commit e00930c54890, 2026-09-30; on PyPI
//   2026-10-01). Releases are tagged from main, so it holds everything main had at 001067ff,
//   where main's traits below were read.
// - "main": main's newest dated commit found, 37ae292e6f84 (2026-10-09, nightly
//   0.5.22.dev20261009). Same traits as the release in everything simulated.
// - "v0.5.19" (2026-09-07): kept because users still run it; the traits the release line had
//   before v0.5.20 and v0.5.21 came out.
// The shutdown code (srt/managers/tokenizer_manager.py, sigterm_watchdog) was read at v0.5.20's
// tag (94602c9c2b7c, 2026-09-18) and is assumed unchanged in v0.5.21 and main. What every line
// does alike (resolved /server_info, the DFlash block size as the draft tokens, the 15 s scheduler
// wait after the drain, a fatal "unbalanced" check, a ValueError for an unknown algorithm, a
// scheduler crash ending in SIGQUIT and the main process's SIGKILL of itself) is in
// ./launch_server.ts and the fidelity table of docs/design/simulated-hosts.md. A host picks its
// line in its SGLang config (`simhost start NAME --sglang '{"line":"v0.5.19"}'`); main is the
// default. The fault table (bench/faults.ts) runs SGLANG_LINES; ALL_SGLANG_LINES adds v0.5.19.

export type SglangLine = "release" | "main" | "v0.5.19";
/** The two lines the fault table runs: the newest release and main. */
export const SGLANG_LINES: readonly SglangLine[] = ["release", "main"];
/** Every line the simulator knows. */
export const ALL_SGLANG_LINES: readonly SglangLine[] = ["release", "main", "v0.5.19"];

export interface LineTraits {
  /** The version /server_info reports. */
  version: string;
  /**
   * srt/entrypoints/engine.py, _launch_subprocesses: the start-up line. v0.5.19 prints the
   * dataclass repr, `server_args=ServerArgs(api_key='...', ...)`; main (since before 001067ff),
   * and so v0.5.21, print `server_args={'api_key': '...', ...}` (resolved_dict()). Both hold
   * every secret in clear.
   */
  startupArgs: "dataclass" | "dict";
  /**
   * srt/server_args_config_parser.py, ConfigArgumentMerger: how a `--config` YAML key of a
   * field that has a deprecated alias (DeprecatedAliasStoreAction) is merged. "canonical-refused"
   * (v0.5.19): the merger finds the alias's action first and refuses even the canonical key
   * (issue #36326, open at v0.5.19's date); "alias-refused" (main at 001067ff, v0.5.21): the
   * canonical key is merged, the alias key refused.
   */
  configAliasKeys: "canonical-refused" | "alias-refused";
  /**
   * A missing --model-path: argparse's "the following arguments are required" (exit 2) in
   * v0.5.19; main (and v0.5.21) `sglang serve` checks it after parsing and exits 1.
   */
  modelPathRequiredByArgparse: boolean;
  /**
   * srt/managers/tokenizer_manager.py, sigterm_watchdog: how the drain ends, after the ShutdownReq
   * and the schedulers' wait of up to 15 s. "self-sigkill" (v0.5.19):
   * kill_process_tree(include_parent=True), the main process dies by SIGKILL. "asgi" (read at
   * v0.5.20's tag; assumed for v0.5.21 and main): a WARNING naming schedulers still alive after
   * 15 s, kill_process_tree(include_parent=False) of the children only, then the server-stop hook
   * hands the exit to uvicorn, which stops listening, logs its shutdown lines and returns:
   * exit status 0.
   */
  drainExit: "self-sigkill" | "asgi";
}

export const LINES: Readonly<Record<SglangLine, LineTraits>> = {
  release: {
    version: "0.5.21-sim",
    startupArgs: "dict",
    configAliasKeys: "alias-refused",
    modelPathRequiredByArgparse: false,
    drainExit: "asgi",
  },
  main: {
    version: "0.5.22.dev0-sim",
    startupArgs: "dict",
    configAliasKeys: "alias-refused",
    modelPathRequiredByArgparse: false,
    drainExit: "asgi",
  },
  "v0.5.19": {
    version: "0.5.19-sim",
    startupArgs: "dataclass",
    configAliasKeys: "canonical-refused",
    modelPathRequiredByArgparse: true,
    drainExit: "self-sigkill",
  },
};

/**
 * Python's repr of a value (str, None, bool, number), as both start-up forms print it. A str
 * holding a `'` and no `"` is quoted with `"` and its `'` left bare (Objects/unicodeobject.c,
 * unicode_repr); otherwise `'`, with `'` escaped.
 */
export function pyRepr(v: unknown): string {
  if (typeof v === "string") {
    const escaped = v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
    return v.includes("'") && !v.includes('"') ? `"${escaped}"` : `'${escaped.replace(/'/g, "\\'")}'`;
  }
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  return String(v);
}

/** The start-up line's server args in the line's form. */
export function startupArgsLine(line: SglangLine, args: Record<string, unknown>): string {
  const entries = Object.entries(args);
  return LINES[line].startupArgs === "dataclass"
    ? `server_args=ServerArgs(${entries.map(([k, v]) => `${k}=${pyRepr(v)}`).join(", ")})`
    : `server_args={${entries.map(([k, v]) => `'${k}': ${pyRepr(v)}`).join(", ")}}`;
}

/**
 * srt/utils/common.py, get_bool_env_var: lower-cased; "true"/"1" are true, "false"/"0" false,
 * anything else false (with a warning). Unset: `fallback`.
 */
export function boolEnv(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  return ["true", "1"].includes(value.toLowerCase());
}
