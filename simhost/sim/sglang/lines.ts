// The two SGLangs users run: the last release and main. Everything the simulator does
// differently between them is here, one trait each, with the file of sgl-project/sglang
// (under python/sglang/) it follows. A host picks its line in its SGLang config
// (`simhost start --sglang-line release`); main is the default.

export type SglangLine = "release" | "main";
export const SGLANG_LINES: readonly SglangLine[] = ["release", "main"];

export interface LineTraits {
  /** The version /server_info reports. */
  version: string;
  /**
   * srt/entrypoints/engine.py, _launch_subprocesses: the start-up line. Releases print the
   * dataclass repr, `server_args=ServerArgs(api_key='...', ...)`; main prints
   * `server_args={'api_key': '...', ...}` (resolved_dict()). Both hold every secret in clear.
   */
  startupArgs: "dataclass" | "dict";
  /**
   * srt/entrypoints/http_server.py, server_info: releases return dataclasses.asdict(server_args)
   * (the values given); main returns resolved_dict() (served_model_name filled in, the DFlash
   * block size copied into speculative_num_draft_tokens).
   */
  resolvedServerInfo: boolean;
  /**
   * srt/arg_groups/speculative_hook.py (main): --speculative-dflash-block-size is copied into
   * speculative_num_draft_tokens; both set and different is an error. Releases keep the two
   * fields apart.
   */
  blockSizeIsDraftTokens: boolean;
  /**
   * srt/managers/tokenizer_manager.py, sigterm_watchdog: after the last "Remaining number of
   * requests 0", main sends the schedulers a ShutdownReq and waits for them up to this many
   * seconds before kill_process_tree; releases kill at once (null).
   */
  schedulerShutdownWaitSeconds: number | null;
  /**
   * srt/model_executor/model_runner.py, init_torch_distributed: whether "The memory capacity
   * is unbalanced" is fatal when SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is unset (main: yes,
   * the variable defaults to true; releases: a warning).
   */
  imbalanceFatalByDefault: boolean;
  /**
   * srt/speculative/spec_info.py, SpeculativeAlgorithm.from_string: an unknown name is a
   * KeyError of the enum lookup in releases, `ValueError: Unknown speculative algorithm name`
   * on main.
   */
  unknownAlgorithm: (name: string) => string;
  /**
   * srt/server_args.py: `--speculative-dflash-draft-window-size`, a deprecated alias of
   * `--speculative-draft-window-size` (DeprecatedAliasStoreAction, help=argparse.SUPPRESS),
   * exists in releases; main's msgspec arg groups (srt/arg_groups/) dropped it.
   */
  windowAlias: boolean;
  /**
   * A missing --model-path: argparse's "the following arguments are required" (exit 2) in
   * releases; on main `sglang serve` checks it after parsing and exits 1.
   */
  modelPathRequiredByArgparse: boolean;
}

export const LINES: Readonly<Record<SglangLine, LineTraits>> = {
  release: {
    version: "0.5.6-sim",
    startupArgs: "dataclass",
    resolvedServerInfo: false,
    blockSizeIsDraftTokens: false,
    schedulerShutdownWaitSeconds: null,
    imbalanceFatalByDefault: false,
    unknownAlgorithm: (name) => `KeyError: '${name}'`,
    windowAlias: true,
    modelPathRequiredByArgparse: true,
  },
  main: {
    version: "0.5.7.dev0-sim",
    startupArgs: "dict",
    resolvedServerInfo: true,
    blockSizeIsDraftTokens: true,
    schedulerShutdownWaitSeconds: 15,
    imbalanceFatalByDefault: true,
    unknownAlgorithm: (name) => `ValueError: Unknown speculative algorithm name: ${name}`,
    windowAlias: false,
    modelPathRequiredByArgparse: false,
  },
};

/** Python's repr of a value (str, None, bool, number), as both start-up forms print it. */
export function pyRepr(v: unknown): string {
  if (typeof v === "string") return `'${v.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
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
