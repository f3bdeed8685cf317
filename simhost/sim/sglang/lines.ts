// The two SGLangs users run: the last release, v0.5.19 (2026-09-07), and main (read at
// 001067ff). Everything the simulator does differently between them is here, one trait each,
// with the file of sgl-project/sglang (under python/sglang/) it follows; a release behaviour
// is the source at the release, or the PRs merged before its date. No older release is
// simulated: v0.5.17-0.5.19 already behave as main does in everything the tool observes except
// the traits below. What both do (resolved /server_info, the DFlash block size as the draft
// tokens, the 15 s scheduler wait after the drain, a fatal "unbalanced" check, a ValueError for an
// unknown algorithm) is in ./launch_server.ts and the fidelity table of docs/design/simulated-hosts.md. A host picks its
// line in its SGLang config (`simhost start --sglang-line release`); main is the default.

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
   * srt/server_args_config_parser.py, ConfigArgumentMerger: how a `--config` YAML key of a
   * field that has a deprecated alias (DeprecatedAliasStoreAction) is merged. "canonical-refused":
   * the merger finds the alias's action first and refuses even the canonical key (issue
   * #36326, open at v0.5.19's date); "alias-refused" (main): the canonical key is merged, the
   * alias key refused.
   */
  configAliasKeys: "canonical-refused" | "alias-refused";
  /**
   * A missing --model-path: argparse's "the following arguments are required" (exit 2) in
   * releases; on main `sglang serve` checks it after parsing and exits 1.
   */
  modelPathRequiredByArgparse: boolean;
}

export const LINES: Readonly<Record<SglangLine, LineTraits>> = {
  release: {
    version: "0.5.19-sim",
    startupArgs: "dataclass",
    configAliasKeys: "canonical-refused",
    modelPathRequiredByArgparse: true,
  },
  main: {
    version: "0.5.20.dev0-sim",
    startupArgs: "dict",
    configAliasKeys: "alias-refused",
    modelPathRequiredByArgparse: false,
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
