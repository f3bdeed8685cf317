// The simulator's argparse, held to sgl-project/sglang python/sglang/srt/server_args.py
// (prepare_server_args: prog "sglang serve"; add_cli_args: fields and deprecated aliases).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { flagTable, isOptionWord, mergeConfigFile, parseArgs } from "../../../simhost/sim/sglang/flags";

const upstream = flagTable("upstream");
const fork = flagTable("ddtree-fork");

test("parses --flag value, --flag=value, store_true and aliases like argparse", () => {
  const r = parseArgs(["--model-path", "/m", "--tp-size=8", "--trust-remote-code", "--speculative-dflash-block-size", "16"], upstream);
  assert.equal(r.kind, "ok");
  if (r.kind !== "ok") return;
  assert.equal(r.args.model_path, "/m");
  assert.equal(r.args.tp_size, 8);
  assert.equal(r.args.trust_remote_code, true);
  // speculative_dflash_block_size is its own field, not an alias of --speculative-num-draft-tokens.
  assert.equal(r.args.speculative_dflash_block_size, 16);
  assert.equal(r.args.speculative_num_draft_tokens, null);
  assert.equal(r.args.port, 30000, "default port");
});

test("unknown flags exit 2 with argparse's message", () => {
  const r = parseArgs(["--model-path", "/m", "--speculative-ddtree-budget", "8"], upstream);
  assert.deepEqual(r.kind, "error");
  if (r.kind !== "error") return;
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^usage: sglang serve \[-h\]/);
  assert.match(r.stderr, /\nsglang serve: error: unrecognized arguments: --speculative-ddtree-budget 8\n$/);
});

test("the DDTree fork accepts its flags; --speculative-algorithm is a free string in both builds", () => {
  const args = ["--model-path", "/m", "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8", "--speculative-dflash-compact-cache"];
  assert.equal(parseArgs(args, fork).kind, "ok");
  assert.equal(parseArgs(args.slice(0, 4), upstream).kind, "ok", "no argparse choices: an unknown name fails later, in spec_info.py");
  assert.equal(parseArgs(args, upstream).kind, "error", "the fork's flags are unknown upstream");
});

test("a bad choice or value is `sglang serve: error: argument ...`, exit 2", () => {
  const r = parseArgs(["--model-path", "/m", "--quantization", "fp3"], upstream);
  assert.equal(r.kind, "error");
  if (r.kind === "error") {
    assert.equal(r.status, 2);
    assert.match(r.stderr, /\nsglang serve: error: argument --quantization: invalid choice: 'fp3' \(choose from 'fp8', /);
  }
});

// srt/server_args.py (every line): DeprecatedAliasStoreAction, help=argparse.SUPPRESS
// (PR #25424); srt/arg_groups/argparse_actions.py prints the deprecation warning.
test("the deprecated --speculative-dflash-draft-window-size: accepted with a warning, stored in the canonical field, hidden from --help", () => {
  const r = parseArgs(["--model-path", "/m", "--speculative-dflash-draft-window-size", "1024"], upstream);
  assert.equal(r.kind === "ok" && r.args.speculative_draft_window_size, 1024, "stored in the canonical field");
  assert.deepEqual(r.kind === "ok" && r.warnings, ["'--speculative-dflash-draft-window-size' is deprecated and will be removed in a future release. Use '--speculative-draft-window-size' instead."]);
  const canonical = parseArgs(["--model-path", "/m", "--speculative-draft-window-size", "1024"], upstream);
  assert.deepEqual(canonical.kind === "ok" && canonical.warnings, [], "the canonical spelling warns of nothing");
  const help = parseArgs(["--help"], upstream);
  assert.equal(help.kind, "help");
  if (help.kind === "help") {
    assert.ok(help.text.includes("--speculative-draft-window-size"));
    assert.equal(help.text.includes("--speculative-dflash-draft-window-size"), false, "help=argparse.SUPPRESS");
  }
});

// srt/server_args_config_parser.py ConfigArgumentMerger: v0.5.19 finds the alias's action first
// and refuses the canonical key (issue #36326, open at its date); main and v0.5.21 merge the
// canonical key and refuse the alias's.
test("--config: the window's canonical key refused by v0.5.19 (issue #36326), merged by main; its alias key refused by both", () => {
  const canonical = "speculative-draft-window-size: 1024\n";
  const alias = "speculative-dflash-draft-window-size: 1024\n";
  const refused = (r: ReturnType<typeof mergeConfigFile>, key: string) =>
    assert.match(r.kind === "error" ? r.traceback : "", new RegExp(`ValueError: Unsupported config option '${key}' with action 'DeprecatedAliasStoreAction'$`));
  refused(mergeConfigFile(["--config", "/c.yaml"], upstream, () => canonical, "canonical-refused"), "speculative-draft-window-size");
  assert.deepEqual(mergeConfigFile(["--config", "/c.yaml"], upstream, () => canonical, "alias-refused"), { kind: "ok", argv: ["--speculative-draft-window-size", "1024"] });
  for (const keys of ["canonical-refused", "alias-refused"] as const) refused(mergeConfigFile(["--config", "/c.yaml"], upstream, () => alias, keys), "speculative-dflash-draft-window-size");
});

test("unambiguous prefixes are accepted, ambiguous ones rejected", () => {
  const ok = parseArgs(["--model-path", "/m", "--tp", "4"], upstream);
  assert.equal(ok.kind === "ok" && ok.args.tp_size, 4);
  const amb = parseArgs(["--model-path", "/m", "--speculative-dr", "x"], upstream);
  assert.equal(amb.kind, "error");
  if (amb.kind === "error") assert.match(amb.stderr, /ambiguous option: --speculative-dr could match/);
});

test("type errors and missing values are reported per argument", () => {
  const bad = parseArgs(["--model-path", "/m", "--tp-size", "eight"], upstream);
  assert.equal(bad.kind === "error" && bad.stderr.includes("argument --tp-size: invalid int value: 'eight'"), true);
  const missing = parseArgs(["--model-path"], upstream);
  assert.equal(missing.kind === "error" && missing.stderr.includes("argument --model-path: expected one argument"), true);
  // v0.5.19's argparse requires --model-path; main and v0.5.21 check it after parsing (exit 1, see lines.test.ts).
  const required = parseArgs([], upstream);
  assert.equal(required.kind === "error" && required.stderr.includes("the following arguments are required: --model-path"), true);
  assert.equal(parseArgs([], upstream, false).kind, "ok");
});

test("--help lists every accepted flag of the profile", () => {
  const r = parseArgs(["--help"], fork);
  assert.equal(r.kind, "help");
  if (r.kind !== "help") return;
  for (const f of fork) assert.ok(r.text.includes(f.name), `${f.name} in --help`);
  const up = parseArgs(["-h"], upstream);
  assert.equal(up.kind === "help" && up.text.includes("--speculative-ddtree-budget"), false);
});

// Lib/argparse.py _parse_optional: a separate word that starts with `-` is an option string unless
// it looks like a negative number (_negative_number_matcher) or holds a space; `--flag=value` is
// always a value.
test("a value starting with `-`: an option to argparse (`expected one argument`, exit 2) unless a negative number, spaced, or after `=`", () => {
  const refused = parseArgs(["--model-path", "/m", "--api-key", "-abc"], upstream);
  assert.equal(refused.kind, "error");
  if (refused.kind === "error") {
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /\nsglang serve: error: argument --api-key: expected one argument\n$/);
  }
  const eq = parseArgs(["--model-path", "/m", "--api-key=-abc"], upstream);
  assert.equal(eq.kind === "ok" && eq.args.api_key, "-abc");
  const negative = parseArgs(["--model-path", "/m", "--random-seed", "-1", "--mem-fraction-static", "-.5", "--api-key", "-1.25"], upstream);
  assert.deepEqual(negative.kind === "ok" && [negative.args.random_seed, negative.args.mem_fraction_static, negative.args.api_key], [-1, -0.5, "-1.25"]);
  const spaced = parseArgs(["--model-path", "/m", "--api-key", "-a b"], upstream);
  assert.equal(spaced.kind === "ok" && spaced.args.api_key, "-a b");
  const alone = parseArgs(["--model-path", "/m", "-abc"], upstream);
  assert.match(alone.kind === "error" ? alone.stderr : "", /error: unrecognized arguments: -abc\n$/);
  const dash = parseArgs(["--model-path", "/m", "--api-key", "-"], upstream);
  assert.equal(dash.kind === "ok" && dash.args.api_key, "-", "a lone dash is a value");
  assert.equal(isOptionWord("--tp", upstream.map((f) => f.name)), true, "a prefix of an option");
  assert.equal(isOptionWord("-1e5", []), true, "not argparse's negative number: an option");
});

// srt/server_args_config_parser.py: a YAML scalar becomes two words, `--key value`, never `--key=value`.
test("--config: `api-key: \"-abc\"` reaches argparse as `--api-key -abc` and is refused", () => {
  const merged = mergeConfigFile(["--model-path", "/m", "--config", "/c.yaml"], upstream, () => 'api-key: "-abc"\nrandom-seed: -7\n');
  assert.deepEqual(merged, { kind: "ok", argv: ["--api-key", "-abc", "--random-seed", "-7", "--model-path", "/m"] });
  const r = parseArgs(merged.kind === "ok" ? merged.argv : [], upstream);
  assert.match(r.kind === "error" ? r.stderr : "", /sglang serve: error: argument --api-key: expected one argument\n$/);
});

// srt/managers/multi_tokenizer_mixin.py: --tokenizer-worker-num (int, default 1).
test("--tokenizer-worker-num: an int, 1 by default", () => {
  const r = parseArgs(["--model-path", "/m", "--tokenizer-worker-num", "4"], upstream);
  assert.equal(r.kind === "ok" && r.args.tokenizer_worker_num, 4);
  const d = parseArgs(["--model-path", "/m"], upstream);
  assert.equal(d.kind === "ok" && d.args.tokenizer_worker_num, 1);
});
