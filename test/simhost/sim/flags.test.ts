// The simulator's argparse, held to sgl-project/sglang python/sglang/srt/server_args.py
// (prepare_server_args: prog "sglang serve"; add_cli_args: fields and deprecated aliases).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { flagTable, mergeConfigFile, parseArgs } from "../../../simhost/sim/sglang/flags";

const upstream = flagTable("upstream");
const upstreamRelease = flagTable("upstream", "release");
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

test("the deprecated --speculative-dflash-draft-window-size: accepted but hidden from --help in the release, gone on main", () => {
  // srt/server_args.py (release): DeprecatedAliasStoreAction, help=argparse.SUPPRESS.
  const r = parseArgs(["--model-path", "/m", "--speculative-dflash-draft-window-size", "1024"], upstreamRelease);
  assert.equal(r.kind === "ok" && r.args.speculative_draft_window_size, 1024, "stored in the canonical field");
  const help = parseArgs(["--help"], upstreamRelease);
  assert.equal(help.kind, "help");
  if (help.kind === "help") {
    assert.ok(help.text.includes("--speculative-draft-window-size"));
    assert.equal(help.text.includes("--speculative-dflash-draft-window-size"), false, "help=argparse.SUPPRESS");
  }
  // srt/arg_groups/ (main): the alias is not registered.
  const onMain = parseArgs(["--model-path", "/m", "--speculative-dflash-draft-window-size", "1024"], upstream);
  assert.equal(onMain.kind === "error" && onMain.status, 2);
  assert.match(onMain.kind === "error" ? onMain.stderr : "", /unrecognized arguments: --speculative-dflash-draft-window-size 1024/);
  assert.equal(parseArgs(["--model-path", "/m", "--speculative-draft-window-size", "1024"], upstream).kind, "ok", "the canonical spelling works on both");
});

test("--config: a key whose field has a deprecated alias is refused in the release (issue #36326), accepted on main", () => {
  const yaml = "speculative-draft-window-size: 1024\n";
  const release = mergeConfigFile(["--config", "/c.yaml"], upstreamRelease, () => yaml);
  assert.equal(release.kind, "error");
  assert.match(release.kind === "error" ? release.traceback : "", /ValueError: Unsupported config option 'speculative-draft-window-size' with action 'DeprecatedAliasStoreAction'$/);
  const main = mergeConfigFile(["--config", "/c.yaml"], upstream, () => yaml);
  assert.deepEqual(main, { kind: "ok", argv: ["--speculative-draft-window-size", "1024"] });
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
  // The release's argparse requires --model-path; main checks it after parsing (exit 1, see server.test.ts).
  const required = parseArgs([], upstreamRelease);
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
