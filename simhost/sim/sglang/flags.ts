// The command line of the simulated `python -m sglang.launch_server`, parsed the way
// argparse does it (long options, `--flag value` and `--flag=value`, unambiguous
// prefixes, exit 2 with "unrecognized arguments"; a separate word that starts with `-` is an
// option, not a value, unless it looks like a negative number or holds a space). Which flags exist is a property of
// the host's SGLang build, so the flag table depends on a build profile.
//
// Follows sgl-project/sglang python/sglang/srt/server_args.py: the parser is
// `argparse.ArgumentParser(prog="sglang serve")` (prepare_server_args), so every
// error line reads `sglang serve: error: ...` and exits 2; deprecated aliases are
// registered with `help=argparse.SUPPRESS` (accepted, absent from --help);
// `--speculative-algorithm` is a plain string (no `choices`), checked only later.

export type FlagKind = "str" | "int" | "float" | "bool";

export interface FlagSpec {
  /** Canonical long option, e.g. "--tp-size". */
  name: string;
  /** Key in server args (`/get_server_info`), e.g. "tp_size". */
  dest: string;
  kind: FlagKind;
  aliases?: string[];
  /** Deprecated aliases registered with help=argparse.SUPPRESS: accepted, not shown by --help. */
  hiddenAliases?: string[];
  choices?: string[];
  default?: string | number | boolean | null;
  help: string;
}

import { LINES, LineTraits } from "./lines";

export type BuildProfile = "upstream" | "ddtree-fork";
export const BUILD_PROFILES: BuildProfile[] = ["upstream", "ddtree-fork"];

const COMMON: FlagSpec[] = [
  { name: "--model-path", dest: "model_path", kind: "str", aliases: ["--model"], help: "The path of the model weights." },
  { name: "--tokenizer-path", dest: "tokenizer_path", kind: "str", help: "The path of the tokenizer." },
  { name: "--host", dest: "host", kind: "str", default: "127.0.0.1", help: "The host of the HTTP server." },
  { name: "--port", dest: "port", kind: "int", default: 30000, help: "The port of the HTTP server." },
  { name: "--tp-size", dest: "tp_size", kind: "int", aliases: ["--tensor-parallel-size"], default: 1, help: "The tensor parallelism size." },
  { name: "--mem-fraction-static", dest: "mem_fraction_static", kind: "float", default: 0.88, help: "Fraction of GPU memory for weights and KV cache." },
  { name: "--context-length", dest: "context_length", kind: "int", default: null, help: "The model's maximum context length." },
  { name: "--trust-remote-code", dest: "trust_remote_code", kind: "bool", default: false, help: "Allow custom models defined on the Hub." },
  { name: "--quantization", dest: "quantization", kind: "str", default: null, choices: ["fp8", "awq", "gptq", "compressed-tensors", "moe_wna16", "w8a8_fp8", "modelopt_fp4"], help: "The quantization method." },
  { name: "--cuda-graph-max-bs", dest: "cuda_graph_max_bs", kind: "int", default: null, help: "Largest batch size captured by CUDA graphs." },
  { name: "--enable-metrics", dest: "enable_metrics", kind: "bool", default: false, help: "Enable Prometheus metrics at /metrics." },
  { name: "--disable-radix-cache", dest: "disable_radix_cache", kind: "bool", default: false, help: "Disable RadixAttention for prefix caching." },
  { name: "--enable-cache-report", dest: "enable_cache_report", kind: "bool", default: false, help: "Return the number of cached tokens in usage.prompt_tokens_details for each OpenAI request." },
  { name: "--watchdog-timeout", dest: "watchdog_timeout", kind: "float", default: 300, help: "Watchdog timeout in seconds." },
  { name: "--served-model-name", dest: "served_model_name", kind: "str", default: null, help: "Model name in the OpenAI API." },
  { name: "--api-key", dest: "api_key", kind: "str", default: null, help: "API key required by the server." },
  { name: "--admin-api-key", dest: "admin_api_key", kind: "str", default: null, help: "API key required by admin endpoints." },
  { name: "--ssl-keyfile-password", dest: "ssl_keyfile_password", kind: "str", default: null, help: "Password of the SSL key file." },
  // srt/utils/common.py configure_logger: upper-cased for Python's logging (./logging.ts).
  { name: "--log-level", dest: "log_level", kind: "str", default: "info", help: "The logging level of all loggers." },
  // srt/managers/multi_tokenizer_mixin.py: N HTTP worker processes, each its own TokenizerManager.
  { name: "--tokenizer-worker-num", dest: "tokenizer_worker_num", kind: "int", default: 1, help: "The worker num of the tokenizer manager." },
  { name: "--random-seed", dest: "random_seed", kind: "int", default: null, help: "Random seed." },
  { name: "--max-running-requests", dest: "max_running_requests", kind: "int", default: null, help: "Maximum running requests." },
  { name: "--chunked-prefill-size", dest: "chunked_prefill_size", kind: "int", default: null, help: "Chunked prefill size." },
  { name: "--nnodes", dest: "nnodes", kind: "int", default: 1, help: "Number of nodes." },
  { name: "--node-rank", dest: "node_rank", kind: "int", default: 0, help: "This node's rank." },
  { name: "--dist-init-addr", dest: "dist_init_addr", kind: "str", default: null, help: "host:port of the rank-0 node for distributed init." },
  { name: "--config", dest: "config", kind: "str", default: null, help: "A YAML file of server arguments." },
  { name: "--speculative-draft-model-path", dest: "speculative_draft_model_path", kind: "str", default: null, help: "The drafter's weights." },
  { name: "--speculative-num-steps", dest: "speculative_num_steps", kind: "int", default: null, help: "Draft steps." },
  { name: "--speculative-eagle-topk", dest: "speculative_eagle_topk", kind: "int", default: null, help: "Top-k per draft step." },
  { name: "--speculative-num-draft-tokens", dest: "speculative_num_draft_tokens", kind: "int", default: null, help: "Draft tokens per verification step." },
  // Its own field (speculative_dflash_block_size), not an alias of --speculative-num-draft-tokens.
  { name: "--speculative-dflash-block-size", dest: "speculative_dflash_block_size", kind: "int", default: null, help: "DFLASH block size (default: from the draft model's config)." },
  { name: "--speculative-draft-kv-cache-dtype", dest: "speculative_draft_kv_cache_dtype", kind: "str", default: null, help: "Drafter KV cache dtype." },
  { name: "--speculative-draft-attention-backend", dest: "speculative_draft_attention_backend", kind: "str", default: null, help: "Drafter attention backend." },
];

/** Algorithms a build knows; checked after parsing (server_args.py __post_init__), not by argparse. */
export function knownAlgorithms(profile: BuildProfile): string[] {
  const upstream = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH"];
  return profile === "ddtree-fork" ? [...upstream, "DDTREE"] : upstream;
}

const DDTREE_FORK: FlagSpec[] = [
  { name: "--speculative-ddtree-budget", dest: "speculative_ddtree_budget", kind: "int", default: null, help: "DDTree node budget per verification." },
  { name: "--speculative-dflash-compact-cache", dest: "speculative_dflash_compact_cache", kind: "bool", default: false, help: "Compact the drafter's windowed KV cache." },
];

/** The flags of a build (profile); the same on both SGLang lines (./lines.ts). */
export function flagTable(profile: BuildProfile): FlagSpec[] {
  const algorithm: FlagSpec = { name: "--speculative-algorithm", dest: "speculative_algorithm", kind: "str", default: null, help: "Speculative decoding algorithm." };
  const window: FlagSpec = {
    name: "--speculative-draft-window-size",
    dest: "speculative_draft_window_size",
    kind: "int",
    // srt/server_args.py: a deprecated alias (DeprecatedAliasStoreAction, help=argparse.SUPPRESS,
    // PR #25424) on both lines: accepted with a warning, absent from --help.
    hiddenAliases: ["--speculative-dflash-draft-window-size"],
    default: null,
    help: "Drafter keeps only the last N target tokens in its KV cache.",
  };
  switch (profile) {
    case "upstream":
      return [...COMMON, window, algorithm];
    case "ddtree-fork":
      return [...COMMON, window, algorithm, ...DDTREE_FORK];
    default: {
      const never: never = profile;
      throw new Error(`unknown SGLang build profile ${String(never)}`);
    }
  }
}

export type ServerArgs = Record<string, string | number | boolean | null>;

export type ParseResult =
  | { kind: "ok"; args: ServerArgs; warnings: string[] }
  | { kind: "help"; text: string }
  | { kind: "error"; status: 2; stderr: string };

export const PROG = "sglang serve";

export function usage(table: FlagSpec[]): string {
  const short = table.map((f) => (f.kind === "bool" ? `[${f.name}]` : `[${f.name} ${f.dest.toUpperCase()}]`));
  return `usage: ${PROG} [-h] ${short.join(" ")}`;
}

export function helpText(table: FlagSpec[]): string {
  const lines = [usage(table), "", "options:", "  -h, --help            show this help message and exit"];
  for (const f of table) {
    const names = [f.name, ...(f.aliases ?? [])].map((n) => (f.kind === "bool" ? n : `${n} ${f.dest.toUpperCase()}`)).join(", ");
    const choices = f.choices ? ` {${f.choices.join(",")}}` : "";
    lines.push(`  ${names}${choices}`, `                        ${f.help}`);
  }
  return lines.join("\n") + "\n";
}

/** argparse's _negative_number_matcher (Lib/argparse.py, Python 3.12). */
const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;

/**
 * Pure: whether argparse takes a separate argv word for an option string rather than a value
 * (Lib/argparse.py, _parse_optional): not when it does not start with `-` or is `-` alone; yes
 * when it names an option (exactly, before a `=`, or as an unambiguous prefix); otherwise not
 * when it looks like a negative number (the parser has no option that does) or holds a space;
 * otherwise yes, an unknown option. So `--api-key -abc` leaves --api-key without its argument,
 * while `--api-key=-abc` and `--random-seed -1` are values.
 */
export function isOptionWord(word: string, names: Iterable<string>): boolean {
  // `--` (argparse's end of options) is left over here: this parser has no positionals.
  if (word.length < 2 || !word.startsWith("-") || word === "--") return false;
  const eq = word.indexOf("=");
  const written = eq >= 0 ? word.slice(0, eq) : word;
  for (const n of [...names, "-h", "--help"]) if (n === word || n === written || (written.startsWith("--") && n.startsWith(written))) return true;
  if (NEGATIVE_NUMBER.test(word)) return false;
  return !word.includes(" ");
}

/**
 * Pure: parses argv (without the program name) against a flag table. `requireModelPath`:
 * argparse itself refuses a missing --model-path (releases); main checks it later.
 */
export function parseArgs(argv: string[], table: FlagSpec[], requireModelPath = true): ParseResult {
  const byName = new Map<string, FlagSpec>();
  for (const f of table) for (const n of [f.name, ...(f.aliases ?? []), ...(f.hiddenAliases ?? [])]) byName.set(n, f);
  const args: ServerArgs = {};
  for (const f of table) args[f.dest] = f.default ?? (f.kind === "bool" ? false : null);
  const unrecognized: string[] = [];
  const warnings: string[] = [];
  const fail = (msg: string): ParseResult => ({ kind: "error", status: 2, stderr: `${usage(table)}\n${PROG}: error: ${msg}\n` });
  const option = (word: string) => isOptionWord(word, byName.keys());

  for (let i = 0; i < argv.length; i++) {
    const token = argv[i];
    if (token === "-h" || token === "--help") return { kind: "help", text: helpText(table) };
    // No positionals: a value-like word, or an option of a single dash (none is known), is left over.
    if (!token.startsWith("--") || !option(token)) {
      unrecognized.push(token);
      continue;
    }
    const eq = token.indexOf("=");
    const written = eq >= 0 ? token.slice(0, eq) : token;
    let spec = byName.get(written);
    if (!spec) {
      const candidates = [...byName.keys()].filter((n) => n.startsWith(written));
      const specs = new Set(candidates.map((c) => byName.get(c)));
      if (specs.size > 1) return fail(`ambiguous option: ${written} could match ${candidates.join(", ")}`);
      spec = candidates.length ? byName.get(candidates[0]) : undefined;
    }
    if (!spec) {
      unrecognized.push(token);
      if (eq < 0 && i + 1 < argv.length && !option(argv[i + 1])) unrecognized.push(argv[++i]);
      continue;
    }
    // srt/arg_groups/argparse_actions.py, DeprecatedAliasStoreAction: a warning, then the value stored.
    if (spec.hiddenAliases?.includes(written)) warnings.push(`'${written}' is deprecated and will be removed in a future release. Use '${spec.name}' instead.`);
    if (spec.kind === "bool") {
      if (eq >= 0) return fail(`argument ${spec.name}: ignored explicit argument '${token.slice(eq + 1)}'`);
      args[spec.dest] = true;
      continue;
    }
    let raw: string;
    if (eq >= 0) raw = token.slice(eq + 1);
    else if (i + 1 < argv.length && !option(argv[i + 1])) raw = argv[++i];
    else return fail(`argument ${spec.name}: expected one argument`);
    if (spec.choices && !spec.choices.includes(raw)) {
      return fail(`argument ${spec.name}: invalid choice: '${raw}' (choose from ${spec.choices.map((c) => `'${c}'`).join(", ")})`);
    }
    if (spec.kind === "int") {
      if (!/^[+-]?\d+$/.test(raw)) return fail(`argument ${spec.name}: invalid int value: '${raw}'`);
      args[spec.dest] = Number(raw);
    } else if (spec.kind === "float") {
      if (raw.trim() === "" || !Number.isFinite(Number(raw))) return fail(`argument ${spec.name}: invalid float value: '${raw}'`);
      args[spec.dest] = Number(raw);
    } else {
      args[spec.dest] = raw;
    }
  }
  if (unrecognized.length) return fail(`unrecognized arguments: ${unrecognized.join(" ")}`);
  if (requireModelPath && args.model_path === null) return fail("the following arguments are required: --model-path");
  return { kind: "ok", args, warnings };
}

/**
 * Pure: `--config FILE` merged into argv the way SGLang's ConfigArgumentMerger does it
 * (python/sglang/srt/server_args_config_parser.py, and srt/utils/ in newer trees): the
 * file must end in .yaml/.yml; each `key: value` becomes `--key value` (store_true keys
 * become a bare `--key` when true), placed BEFORE the command line's own arguments so
 * that those win; then argparse parses the result. A key that is no flag is therefore
 * rejected by argparse like any unknown flag (exit 2), not ignored.
 * `readFile` returns undefined for a missing file.
 */
export function mergeConfigFile(
  argv: string[],
  table: FlagSpec[],
  readFile: (path: string) => string | undefined,
  aliasKeys: LineTraits["configAliasKeys"] = LINES.main.configAliasKeys,
): { kind: "ok"; argv: string[] } | { kind: "error"; traceback: string } {
  const at = argv.reduce<number[]>((acc, a, i) => (a === "--config" ? [...acc, i] : acc), []);
  const fail = (msg: string) => ({ kind: "error" as const, traceback: `Traceback (most recent call last):\n  File "sglang/srt/server_args_config_parser.py", in merge_config_with_args\nValueError: ${msg}` });
  if (at.length === 0) return { kind: "ok", argv };
  if (at.length > 1) return fail("Multiple config files specified! Only one allowed.");
  if (at[0] === argv.length - 1) return fail("No config file specified after --config flag!");
  const file = argv[at[0] + 1];
  const suffix = /\.[^./]*$/.exec(file)?.[0] ?? "";
  if (![".yaml", ".yml"].includes(suffix.toLowerCase())) return fail(`Config file must be YAML format, got: ${suffix}`);
  const text = readFile(file);
  if (text === undefined) return fail(`Config file not found: ${file}`);
  const fromFile: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^([A-Za-z0-9_-]+)\s*:\s*(.*)$/.exec(line);
    if (!m) return fail("Config file must contain a dictionary at root level");
    const value = m[2].startsWith('"') ? String(JSON.parse(m[2])) : m[2].replace(/^'(.*)'$/, "$1");
    const spec = table.find((f) => f.name === `--${m[1]}`);
    // A deprecated alias's key is refused (its action is no store action the merger supports);
    // so is the canonical key of a field that has one where the merger finds the alias's action
    // first (./lines.ts configAliasKeys; issue #36326).
    const viaAlias = table.some((f) => f.hiddenAliases?.includes(`--${m[1]}`));
    if (viaAlias || (aliasKeys === "canonical-refused" && spec?.hiddenAliases?.length)) return fail(`Unsupported config option '${m[1]}' with action 'DeprecatedAliasStoreAction'`);
    if (spec?.kind === "bool" && (value === "true" || value === "false")) {
      if (value === "true") fromFile.push(`--${m[1]}`);
    } else {
      fromFile.push(`--${m[1]}`, value);
    }
  }
  return { kind: "ok", argv: [...fromFile, ...argv.slice(0, at[0]), ...argv.slice(at[0] + 2)] };
}
