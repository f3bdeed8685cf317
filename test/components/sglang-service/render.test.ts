// The systemd unit and server arguments rendered from a deployment: snapshots of every
// committed stack, determinism, what the unit must contain, and quoting properties.
// Refresh the snapshots with UPDATE_SNAPSHOTS=1 and read the diff before committing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError, Deployment, parseDeployment } from "../../../components/sglang-service/schema";
import {
  expectedServerArgs,
  GROUP_RESTART_SECONDS,
  HELPER_DIR,
  launchArgs,
  launchFlags,
  renderUnit,
  secretPaths,
  serverEnvironment,
  shellQuote,
  systemdQuote,
  unitLineChanges,
} from "../../../components/sglang-service/render";
import { BuildProfile, flagTable, parseArgs } from "../../../simhost/sim/sglang/flags";
import { describeHostChange } from "../../../components/sglang-service/remote/observe";
import { projectConfig, stackNames, testStackConfig, withTestAddress } from "./stackConfig";
import { prng } from "../../../lib/prng";

type Raw = Record<string, any>;

const SNAPSHOT_DIR = path.join(__dirname, "__snapshots__");
const UPDATE = process.env.UPDATE_SNAPSHOTS === "1";
// Rewriting the snapshots makes every snapshot test pass whatever the output: never in CI.
if (UPDATE && process.env.CI) throw new Error("UPDATE_SNAPSHOTS=1 is refused under CI: snapshots are updated by a person who reads the diff");
const STACKS = stackNames();

function stackDeployment(stack: string): Deployment {
  return parseDeployment(testStackConfig(stack), stack);
}

/** Project config (usable address) with the given keys replaced. */
function rawWith(overrides: Raw): Raw {
  return { ...withTestAddress(projectConfig()), ...structuredClone(overrides) };
}

const DDTREE_WINDOWED = { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048, compactCache: true };
const DDTREE_NO_WINDOW = { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: "none", compactCache: false };

function deployment(overrides: Raw): Deployment {
  return parseDeployment(rawWith(overrides), "render-test");
}

/** The unit's lines as systemd reads them: a line ending in "\\" continues on the next, the backslash read as a space. */
function logicalLines(unit: string): string[] {
  const out: string[] = [];
  let pending: string | undefined;
  for (const line of unit.split("\n")) {
    const joined = pending === undefined ? line : `${pending} ${line}`;
    if (joined.endsWith("\\")) pending = joined.slice(0, -1);
    else {
      out.push(joined);
      pending = undefined;
    }
  }
  assert.equal(pending, undefined, "the unit ends inside a continued line");
  return out;
}

/** Values of `Key=` lines in a unit, in order. */
function directive(unit: string, key: string): string[] {
  return logicalLines(unit)
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1));
}

function onlyDirective(unit: string, key: string): string {
  const values = directive(unit, key);
  assert.equal(values.length, 1, `exactly one ${key}= line`);
  return values[0];
}

// A model of how systemd reads the values we write (systemd.syntax(7), systemd.service(5)
// "Command lines", systemd.exec(5) Environment=). Strict: anything our quoting should
// never leave behind (an unknown specifier, a lone `$`, an unknown escape) throws.

/** `%%` -> `%`; any other specifier is a quoting failure. Applies to every directive. */
function expandSpecifiers(value: string): string {
  return value.replace(/%([\s\S]?)/g, (_, c: string) => {
    if (c === "%") return "%";
    throw new Error(`unescaped specifier %${c} in ${JSON.stringify(value)}`);
  });
}

/** Words split at unquoted blanks; "..." and '...' quote, backslash escapes \\ \" \'. */
function splitWords(value: string): string[] {
  const escape = (c: string | undefined): string => {
    if (c === "\\" || c === '"' || c === "'") return c;
    throw new Error(`unexpected escape \\${c ?? "<end>"} in ${JSON.stringify(value)}`);
  };
  const blank = (c: string) => c === " " || c === "\t";
  const words: string[] = [];
  let i = 0;
  while (i < value.length) {
    if (blank(value[i])) {
      i++;
      continue;
    }
    let word = "";
    while (i < value.length && !blank(value[i])) {
      const c = value[i++];
      if (c === "\\") {
        word += escape(value[i++]);
      } else if (c === '"' || c === "'") {
        for (;;) {
          if (i >= value.length) throw new Error(`unterminated ${c} in ${JSON.stringify(value)}`);
          const q = value[i++];
          if (q === c) break;
          word += q === "\\" ? escape(value[i++]) : q;
        }
      } else {
        word += c;
      }
    }
    words.push(word);
  }
  return words;
}

/** At exec time `$$` is `$` and a whole word `$NAME` is a variable (shown as `<env NAME>`). */
function expandDollars(word: string): string {
  if (/^\$[A-Za-z_][A-Za-z0-9_]*$/.test(word)) return `<env ${word.slice(1)}>`;
  return word.replace(/\$([\s\S]?)/g, (_, c: string) => {
    if (c === "$") return "$";
    throw new Error(`unescaped $ in ${JSON.stringify(word)}`);
  });
}

/** The argv systemd runs for an Exec*= value. */
function execArgv(value: string): string[] {
  return splitWords(expandSpecifiers(value)).map(expandDollars);
}

/** Line breaks any reader of the file might honour. */
const LINE_BREAK = /\r\n|[\n\r\u000b\u000c\u0085\u2028\u2029]/;

// --- snapshots -------------------------------------------------------------------------

test("there are stacks to snapshot", () => {
  assert.ok(STACKS.length > 0, "no stacks/Pulumi.<stack>.yaml found");
});

for (const stack of STACKS) {
  test(`stack ${stack}: the unit matches __snapshots__/${stack}.service`, () => {
    const unit = renderUnit(stackDeployment(stack), { stack });
    const file = path.join(SNAPSHOT_DIR, `${stack}.service`);
    if (UPDATE) {
      fs.mkdirSync(SNAPSHOT_DIR, { recursive: true });
      fs.writeFileSync(file, unit);
      return;
    }
    assert.ok(fs.existsSync(file), `no snapshot ${path.relative(process.cwd(), file)}: run with UPDATE_SNAPSHOTS=1 and review it`);
    assert.equal(unit, fs.readFileSync(file, "utf8"), `unit for ${stack} changed: if intended, rerun with UPDATE_SNAPSHOTS=1 and review the diff`);
  });
}

test("every snapshot belongs to a stack that still exists", () => {
  const snapshots = fs.existsSync(SNAPSHOT_DIR) ? fs.readdirSync(SNAPSHOT_DIR).filter((f) => f.endsWith(".service")) : [];
  const orphans = snapshots.filter((f) => !STACKS.includes(f.slice(0, -".service".length)));
  if (UPDATE) {
    for (const f of orphans) fs.rmSync(path.join(SNAPSHOT_DIR, f));
    return;
  }
  assert.deepEqual(orphans, [], "snapshots without a stack file: rerun with UPDATE_SNAPSHOTS=1 to remove them");
});

// --- determinism -----------------------------------------------------------------------

/** The same object with every object's keys in reverse order (arrays keep their order). */
function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (typeof v !== "object" || v === null) return v;
  return Object.fromEntries(
    Object.entries(v)
      .reverse()
      .map(([k, x]) => [k, reverseKeys(x)]),
  );
}

test("rendering is byte-identical across runs and input key order", () => {
  for (const stack of STACKS) {
    assert.equal(renderUnit(stackDeployment(stack), { stack }), renderUnit(stackDeployment(stack), { stack }), stack);
  }
  const raw = rawWith({
    speculative: DDTREE_WINDOWED,
    service: { unitName: "sglang-k26", port: 30001, environment: { NCCL_DEBUG: "WARN", CUDA_DEVICE_ORDER: "PCI_BUS_ID", HF_HUB_OFFLINE: "1", ZED: "z" } },
    timeouts: { readySeconds: 900, gpuReleaseSeconds: 120, stopSeconds: 60 },
  });
  const reversed = reverseKeys(raw) as Raw;
  assert.deepEqual(Object.keys(reversed.service.environment), ["ZED", "HF_HUB_OFFLINE", "CUDA_DEVICE_ORDER", "NCCL_DEBUG"], "the input really is reordered");
  const a = renderUnit(parseDeployment(raw, "order"), { stack: "order" });
  const b = renderUnit(parseDeployment(reversed, "order"), { stack: "order" });
  assert.equal(a, b);
  assert.deepEqual(
    directive(a, "Environment").map((v) => v.split("=")[0]),
    ["CUDA_DEVICE_ORDER", "HF_HUB_OFFLINE", "NCCL_DEBUG", "SGLANG_DDTREE_MAX_TOPK", "ZED"],
    "environment sorted by name",
  );
});

// --- what the unit does ----------------------------------------------------------------

/** What follows a flag in argv: its value, or true for a bare switch; undefined when absent. */
function flagValue(argv: string[], flag: string): string | true | undefined {
  const i = argv.indexOf(flag);
  if (i < 0) return undefined;
  const next = argv[i + 1];
  return next === undefined || next.startsWith("--") ? true : next;
}

/** Environment the server gets, read the way systemd reads Environment= lines. */
function unitEnvironment(unit: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const value of directive(unit, "Environment")) {
    for (const word of splitWords(expandSpecifiers(value))) {
      const eq = word.indexOf("=");
      env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

for (const stack of STACKS) {
  test(`stack ${stack}: ExecStart carries the stack's speculative settings for its build`, () => {
    const d = stackDeployment(stack);
    const unit = renderUnit(d, { stack });
    const argv = execArgv(onlyDirective(unit, "ExecStart"));
    const env = unitEnvironment(unit);
    const s = d.speculative;
    assert.equal(argv[0], d.service.python);
    assert.deepEqual(argv.slice(1, 3), ["-m", "sglang.launch_server"]);
    assert.equal(flagValue(argv, "--speculative-algorithm"), s.algorithm ?? undefined);
    assert.equal(flagValue(argv, "--port"), String(d.service.port));
    if (d.sglangBuild === "ddtree-fork" && s.algorithm === "DDTREE") {
      assert.equal(flagValue(argv, "--speculative-ddtree-budget"), String(s.budget));
      assert.equal(env.SGLANG_DDTREE_MAX_TOPK, String(s.topk), "topk reaches the fork through its environment variable");
    } else {
      assert.equal(flagValue(argv, "--speculative-ddtree-budget"), undefined);
      assert.equal(env.SGLANG_DDTREE_MAX_TOPK, undefined);
    }
    assert.equal(flagValue(argv, "--speculative-draft-window-size"), s.draftWindowSize === "none" ? undefined : String(s.draftWindowSize));
    assert.equal(flagValue(argv, "--speculative-dflash-compact-cache"), s.compactCache ? true : undefined);
    const build = typeof d.sglangBuild === "string" ? d.sglangBuild : undefined;
    if (build) assert.equal(parseArgs(argv.slice(3), flagTable(build)).kind, "ok", `the ${build} build accepts the command line`);
  });
}

test("ddtree-fork, DDTREE with a window: budget flag, topk env, window and compact cache flags", () => {
  const unit = renderUnit(deployment({ speculative: { ...DDTREE_WINDOWED, budget: 12, topk: 6, draftWindowSize: 4096 } }), { stack: "b12t6-w4096" });
  const argv = execArgv(onlyDirective(unit, "ExecStart"));
  assert.equal(flagValue(argv, "--speculative-algorithm"), "DDTREE");
  assert.equal(flagValue(argv, "--speculative-ddtree-budget"), "12");
  assert.equal(flagValue(argv, "--speculative-draft-window-size"), "4096");
  assert.equal(flagValue(argv, "--speculative-dflash-compact-cache"), true);
  assert.ok(/^Environment=("SGLANG_DDTREE_MAX_TOPK=6"|SGLANG_DDTREE_MAX_TOPK=6)$/m.test(unit), unit);
  assert.equal(argv.some((a) => a.includes("topk")), false, "the fork takes topk from its environment, not a flag");
});

test('draftWindowSize "none" renders no window flag (and no compact cache)', () => {
  const unit = renderUnit(deployment({ speculative: DDTREE_NO_WINDOW }), { stack: "b8t4-wnone" });
  const argv = execArgv(onlyDirective(unit, "ExecStart"));
  assert.equal(argv.some((a) => a.startsWith("--speculative-draft-window-size") || a.startsWith("--speculative-dflash-draft-window")), false);
  assert.equal(argv.includes("--speculative-dflash-compact-cache"), false);
  assert.equal(flagValue(argv, "--speculative-ddtree-budget"), "8");
});

test("upstream build: DFLASH flags only, nothing of the DDTree fork", () => {
  const d = deployment({ sglangBuild: "upstream", speculative: { algorithm: "DFLASH", draftTokens: 16, draftWindowSize: 2048 } });
  const unit = renderUnit(d, { stack: "upstream-dflash" });
  const argv = execArgv(onlyDirective(unit, "ExecStart"));
  assert.deepEqual(
    argv.filter((a) => a.startsWith("--speculative")),
    ["--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-draft-tokens", "--speculative-draft-window-size"],
  );
  assert.equal(flagValue(argv, "--speculative-algorithm"), "DFLASH");
  assert.equal(flagValue(argv, "--speculative-num-draft-tokens"), "16");
  assert.equal(unit.includes("DDTREE"), false);
  assert.deepEqual(unitEnvironment(unit), {});
  assert.equal(parseArgs(argv.slice(3), flagTable("upstream")).kind, "ok", "upstream SGLang accepts it");
});

test("speculation off: no speculative flags at all", () => {
  const d = deployment({ speculative: { algorithm: null } });
  const argv = execArgv(onlyDirective(renderUnit(d, { stack: "plain" }), "ExecStart"));
  assert.equal(argv.some((a) => a.startsWith("--speculative")), false);
  assert.deepEqual(serverEnvironment(d), []);
});

test("the model's own flags and extra args, in a fixed order, extras last", () => {
  const d = deployment({
    model: { path: "/models/Kimi-K2.6", drafterPath: "/models/Kimi-K2.6-DFlash", tpSize: 4, memFractionStatic: 0.85, contextLength: 65536, servedModelName: "kimi", extraArgs: ["--cuda-graph-max-bs", "8", "--log-level=debug"] },
    speculative: DDTREE_WINDOWED,
  });
  const argv = execArgv(onlyDirective(renderUnit(d, { stack: "order" }), "ExecStart"));
  assert.deepEqual(argv.slice(1), launchArgs(d));
  assert.deepEqual(argv.slice(3, 15), ["--model-path", "/models/Kimi-K2.6", "--tp-size", "4", "--host", "127.0.0.1", "--port", "30001", "--mem-fraction-static", "0.85", "--context-length", "65536"]);
  assert.deepEqual(argv.slice(-3), ["--cuda-graph-max-bs", "8", "--log-level=debug"]);
  // One option per line, so a preview's diff shows exactly the options that changed.
  const physical = renderUnit(d, { stack: "order" }).split("\n");
  const first = physical.findIndex((l) => l.startsWith("ExecStart="));
  assert.equal(physical[first], "ExecStart=/usr/bin/python3 -m sglang.launch_server \\");
  const options = physical.slice(first + 1, first + 1 + launchArgs(d).filter((a) => a.startsWith("--")).length);
  assert.deepEqual(options.map((l) => l.trim().split(" ")[0]), launchArgs(d).filter((a) => a.startsWith("--")));
  assert.ok(options.slice(0, -1).every((l) => l.startsWith("    --") && l.endsWith(" \\")), options.join("\n"));
  assert.ok(!options[options.length - 1].endsWith("\\") && physical[first + options.length + 1].startsWith("ExecStartPost="), "the command ends with its last option");
  assert.ok(argv.includes("--enable-metrics"), "metrics are always on: draining reads them");
  assert.deepEqual(launchFlags(d), [...new Set(launchFlags(d))].sort(), "launchFlags sorted and unique");
  assert.ok(launchFlags(d).includes("--log-level") && !launchFlags(d).some((f) => f.includes("=")), "--flag=value checked as --flag");
});

test("ExecStartPre waits for the unit's GPUs to be free", () => {
  const d = deployment({ speculative: DDTREE_WINDOWED, model: { path: "/m", drafterPath: "/d", tpSize: 4 }, timeouts: { gpuFreeMiB: 2048, gpuReleaseSeconds: 90.5 } });
  const pre = execArgv(onlyDirective(renderUnit(d, { stack: "s" }), "ExecStartPre"));
  assert.deepEqual(pre, [`${HELPER_DIR}/wait-gpus-free`, "0,1,2,3", "2048", "91"]);
});

test("ExecStartPost is the readiness gate: health_generate on the local address, with the main pid", () => {
  const post = (listenAddress: string) =>
    execArgv(onlyDirective(renderUnit(deployment({ speculative: DDTREE_WINDOWED, service: { port: 30002, listenAddress }, timeouts: { readySeconds: 600 } }), { stack: "s" }), "ExecStartPost"));
  // The gate waits 60 s longer than `pulumi up`'s own readiness deadline, which reports better.
  assert.deepEqual(post("127.0.0.1"), [`${HELPER_DIR}/wait-ready`, "http://127.0.0.1:30002/health_generate", "660", "<env MAINPID>"]);
  assert.equal(post("0.0.0.0")[1], "http://127.0.0.1:30002/health_generate", "a wildcard listener is probed on loopback");
  assert.equal(post("::")[1], "http://127.0.0.1:30002/health_generate");
  assert.equal(post("::1")[1], "http://[::1]:30002/health_generate", "IPv6 in brackets");
});

test("TimeoutStartSec covers the GPU wait and the readiness wait", () => {
  for (const timeouts of [{}, { readySeconds: 60, gpuReleaseSeconds: 10 }, { readySeconds: 3599.2, gpuReleaseSeconds: 0.5 }]) {
    const d = deployment({ speculative: DDTREE_WINDOWED, timeouts });
    const start = Number(onlyDirective(renderUnit(d, { stack: "s" }), "TimeoutStartSec"));
    assert.ok(Number.isInteger(start), "whole seconds");
    const gate = Number(execArgv(onlyDirective(renderUnit(d, { stack: "s" }), "ExecStartPost"))[2]);
    assert.ok(gate > d.timeouts.readySeconds, "the gate outlasts pulumi up's readiness deadline");
    assert.ok(start >= gate + d.timeouts.gpuReleaseSeconds, `TimeoutStartSec=${start} for ${JSON.stringify(d.timeouts)}`);
  }
});

test("the unit says which stack owns it and runs as the configured user", () => {
  const d = deployment({ speculative: DDTREE_WINDOWED, service: { unitName: "sglang-k26", runAs: "sglang" } });
  const unit = renderUnit(d, { stack: "b8t4-w2048" });
  assert.equal(onlyDirective(unit, "X-DFlash-Stack"), "b8t4-w2048");
  assert.equal(onlyDirective(unit, "User"), "sglang");
  assert.equal(onlyDirective(unit, "SyslogIdentifier"), "sglang-k26");
  assert.equal(onlyDirective(unit, "Type"), "exec");
  assert.equal(onlyDirective(unit, "Restart"), "no", "a failed start is reported, not retried behind our back");
  assert.ok(unit.endsWith("\n"));
});

// Issue 38, item 3: a server that runs as another user cannot open the root-only secret files
// (0600 in a 0700 folder); systemd hands them over as credentials, readable by that user only.
test("run as another user with an API key: the secret files reach it as systemd credentials; a root unit reads them in place", () => {
  const secrets = { apiKey: true, hfToken: true };
  const files = secretPaths("sglang-k26");
  const other = renderUnit(deployment({ speculative: DDTREE_WINDOWED, service: { unitName: "sglang-k26", runAs: "sglang" } }), { stack: "s", secrets });
  assert.deepEqual(other.split("\n").filter((l) => l.startsWith("LoadCredential=")), [`LoadCredential=server-config.yaml:${files.serverConfig}`, `LoadCredential=curl-headers:${files.curlHeaders}`]);
  assert.match(other, /--config \$\{CREDENTIALS_DIRECTORY\}\/server-config\.yaml$/m, "the one word systemd expands");
  assert.match(onlyDirective(other, "ExecStartPost"), / \$MAINPID \$\{CREDENTIALS_DIRECTORY\}\/curl-headers$/);
  assert.equal(onlyDirective(other, "EnvironmentFile"), files.env, "systemd (root) reads the environment file itself");
  assert.doesNotMatch(other, new RegExp(`--config ${files.serverConfig.replace(/\./g, "\\.")}`));
  const root = renderUnit(deployment({ speculative: DDTREE_WINDOWED, service: { unitName: "sglang-k26" } }), { stack: "s", secrets });
  assert.doesNotMatch(root, /LoadCredential|CREDENTIALS_DIRECTORY/);
  assert.match(root, new RegExp(`--config ${files.serverConfig.replace(/\./g, "\\.")}$`, "m"));
  // Only the words the renderer places are left to systemd's expansion: one in extraArgs is quoted.
  const raw = rawWith({ speculative: DDTREE_WINDOWED, service: { runAs: "sglang" } });
  (raw.model as Record<string, unknown>).servedModelName = "${CREDENTIALS_DIRECTORY}/server-config.yaml";
  const sneaky = renderUnit(parseDeployment(raw, "render-test"), { stack: "s", secrets });
  assert.match(sneaky, /--served-model-name "\$\$\{CREDENTIALS_DIRECTORY\}\/server-config\.yaml"/);
});

// --- expectedServerArgs -----------------------------------------------------------------

test("expectedServerArgs: keys sorted; DDTREE budget, null window for none, compact cache", () => {
  const none = expectedServerArgs(deployment({ speculative: DDTREE_NO_WINDOW }));
  assert.deepEqual(Object.keys(none), [...Object.keys(none)].sort());
  assert.deepEqual(none, {
    model_path: "/models/Kimi-K2.6",
    port: 30001,
    speculative_algorithm: "DDTREE",
    speculative_ddtree_budget: 8,
    speculative_dflash_compact_cache: false,
    speculative_draft_model_path: "/models/Kimi-K2.6-DFlash",
    speculative_draft_window_size: null,
    tp_size: 8,
  });
  const windowed = expectedServerArgs(deployment({ speculative: { ...DDTREE_WINDOWED, budget: 16, draftTokens: 16 } }));
  assert.deepEqual(Object.keys(windowed), [...Object.keys(windowed)].sort());
  assert.equal(windowed.speculative_ddtree_budget, 16);
  assert.equal(windowed.speculative_draft_window_size, 2048);
  assert.equal(windowed.speculative_dflash_compact_cache, true);
  assert.equal(windowed.speculative_num_draft_tokens, 16);
  const upstream = expectedServerArgs(deployment({ sglangBuild: "upstream", speculative: { algorithm: "DFLASH" } }));
  assert.equal("speculative_ddtree_budget" in upstream || "speculative_dflash_compact_cache" in upstream, false, "upstream reports no fork options");
  assert.equal(expectedServerArgs(deployment({ speculative: { algorithm: null } })).speculative_algorithm, null);
});

/** What a server started with this deployment's argv reports (the simulated SGLang's argparse). */
function reportedArgs(d: Deployment, build: BuildProfile): Record<string, unknown> {
  const r = parseArgs(launchArgs(d).slice(2), flagTable(build));
  assert.equal(r.kind, "ok", r.kind === "error" ? r.stderr : r.kind);
  return r.kind === "ok" ? r.args : {};
}

for (const stack of STACKS) {
  test(`stack ${stack}: expectedServerArgs is what a server started from the unit reports`, () => {
    const d = stackDeployment(stack);
    assert.equal(typeof d.sglangBuild, "string", "committed stacks use a named build");
    const reported = reportedArgs(d, d.sglangBuild as BuildProfile);
    for (const [key, value] of Object.entries(expectedServerArgs(d))) assert.equal(reported[key], value, key);
  });
}

test("expectedServerArgs matches a server for upstream DFLASH and for speculation off", () => {
  for (const [build, speculative] of [
    ["upstream", { algorithm: "DFLASH", draftTokens: 8, draftWindowSize: 1024 }],
    ["upstream", { algorithm: null }],
    ["ddtree-fork", DDTREE_NO_WINDOW],
  ] as const) {
    const d = deployment({ sglangBuild: build, speculative });
    const reported = reportedArgs(d, build);
    for (const [key, value] of Object.entries(expectedServerArgs(d))) assert.equal(reported[key], value, `${build} ${JSON.stringify(speculative)}: ${key}`);
  }
});

// --- quoting properties ------------------------------------------------------------------


const PRINTABLE = [..."\"'\\$%;&|`  aZ09-_=./:,@+#~*?!()[]{}<>^", "é", "ß", "漢", "😀", "\u00a0", "\u200b", "\u202e", "%%", "$$", "${X}", "$MAINPID", "%n", '\\"'];
// What the schema's rule says to refuse: C0 controls, DEL, NEL and the Unicode line/paragraph separators.
const CONTROL = ["\n", "\r", "\r\n", "\t", "\u0000", "\u0007", "\u000b", "\u000c", "\u001b", "\u007f", "\u0085", "\u2028", "\u2029"];

function drawString(rand: () => number, opts: { minLength: number; controlChance: number }): string {
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
  const length = opts.minLength + Math.floor(rand() * 14);
  let s = "";
  for (let i = 0; i < length; i++) s += rand() < opts.controlChance ? pick(CONTROL) : pick(PRINTABLE);
  return s;
}

/** Config fields whose values reach the unit, and the message key/name the schema uses. */
/** `refused`: values the schema must refuse for this field (the message it must give), e.g. option lookalikes. */
const FIELDS: { key: string; what: string; set: (raw: Raw, v: string) => void; absolute?: boolean; refused?: { when: (v: string) => boolean; message: RegExp } }[] = [
  { key: "model.path", what: "model.path", absolute: true, set: (r, v) => (r.model.path = v) },
  { key: "model.drafterPath", what: "model.drafterPath", absolute: true, set: (r, v) => (r.model.drafterPath = v) },
  { key: "model.servedModelName", what: "model.servedModelName", set: (r, v) => (r.model.servedModelName = v), refused: { when: (v) => v.startsWith("-"), message: /model\.servedModelName must not begin with "-"/ } },
  { key: "model.extraArgs.1", what: "model.extraArgs entry", set: (r, v) => (r.model.extraArgs = ["--chunked-prefill-size", v]) },
  { key: "service.python", what: "service.python", absolute: true, set: (r, v) => (r.service.python = v) },
  { key: "service.workingDirectory", what: "service.workingDirectory", absolute: true, set: (r, v) => (r.service.workingDirectory = v) },
  {
    key: "service.listenAddress",
    what: "service.listenAddress",
    set: (r, v) => (r.service.listenAddress = v),
    refused: { when: (v) => v.startsWith("-") || !/^[A-Za-z0-9._:%[\]-]+$/.test(v), message: /service\.listenAddress must (not begin with "-"|be a host name or an IP address)/ },
  },
  { key: "service.environment.SGLANG_LOG_DIR", what: "service.environment value", set: (r, v) => (r.service.environment = { SGLANG_LOG_DIR: v }) },
];

function rawWithField(field: (typeof FIELDS)[number], value: string): Raw {
  const raw = rawWith({ speculative: DDTREE_WINDOWED });
  field.set(raw, field.absolute ? `/${value}` : value);
  return raw;
}

test("property: a value with a newline or control character is refused by the schema and by both quoters", () => {
  const rand = prng(0x5eed01);
  let cases = 0;
  while (cases < 1500) {
    const value = drawString(rand, { minLength: 1, controlChance: 0.15 });
    if (!CONTROL.some((c) => value.includes(c))) continue;
    cases++;
    const field = FIELDS[cases % FIELDS.length];
    const shown = JSON.stringify(value);
    assert.throws(() => parseDeployment(rawWithField(field, value), "prop"), (e: unknown) => {
      assert.ok(e instanceof ConfigError, shown);
      assert.ok(e.message.includes(`  - dflash-sglang:${field.key}: ${field.what} must not contain newlines or control characters`), `${shown} in ${field.key}: ${e.message}`);
      return true;
    });
    assert.throws(() => systemdQuote(value), /refusing to render a value with a newline or control character/, shown);
    assert.throws(() => shellQuote(value), /refusing to render a value with a newline or control character/, shown);
  }
});

test("property: printable values never add a line, and every Exec line reads back as the intended argv", () => {
  const rand = prng(0x5eed02);
  const benignLines = new Map<string, number>();
  const linesOf = (unit: string) => {
    assert.equal(unit.split(LINE_BREAK).length, unit.split("\n").length, "no line break other than \\n");
    return logicalLines(unit).length;
  };
  for (let i = 0; i < 2000; i++) {
    const value = drawString(rand, { minLength: 1, controlChance: 0 });
    const field = FIELDS[i % FIELDS.length];
    const shown = `${field.key} = ${JSON.stringify(value)}`;
    if (field.absolute && value.endsWith("\\")) {
      // A path ending in "\\" would continue its directive onto the next line of the unit.
      assert.throws(() => parseDeployment(rawWithField(field, value), "prop"), /must not end with a backslash/, shown);
      continue;
    }
    if (field.refused?.when(value)) {
      assert.throws(() => parseDeployment(rawWithField(field, value), "prop"), field.refused.message, shown);
      continue;
    }
    const d = parseDeployment(rawWithField(field, value), "prop");
    const unit = renderUnit(d, { stack: "prop" });
    if (!benignLines.has(field.key)) benignLines.set(field.key, linesOf(renderUnit(parseDeployment(rawWithField(field, "benign"), "prop"), { stack: "prop" })));
    assert.equal(linesOf(unit), benignLines.get(field.key), shown);
    assert.deepEqual(execArgv(onlyDirective(unit, "ExecStart")), [d.service.python, ...launchArgs(d)], shown);
    assert.equal(execArgv(onlyDirective(unit, "ExecStartPost"))[1].endsWith("/health_generate"), true, shown);
    assert.deepEqual(execArgv(systemdQuote(value)), [value], `systemdQuote(${JSON.stringify(value)}) = ${systemdQuote(value)}`);
  }
});

test("property: systemdQuote round-trips single words, empty ones and lookalikes of syntax", () => {
  for (const word of ["", " ", '"', "'", "\\", "$", "$$", "%", "%%", "%n", "${HOME}", "$MAINPID", "a b", "--x=a b", "; rm -rf /", "漢字 😀"]) {
    assert.deepEqual(execArgv(systemdQuote(word)), [word], `${JSON.stringify(word)} -> ${systemdQuote(word)}`);
  }
  assert.equal(systemdQuote("/usr/bin/python3"), "/usr/bin/python3", "plain words stay bare");
});

test("property: shellQuote output, run by sh, prints the original string", () => {
  const rand = prng(0x5eed03);
  const fixed = ["", "*", "*.ts", "?", "~", "~root", "$HOME", "${HOME}", "$(id)", "`id`", "a b", "'", "''", '"', "\\", ";", "&", "|", "#x", "-n", "%s", "a=b", "!"];
  for (let i = 0; i < 300; i++) {
    const value = i < fixed.length ? fixed[i] : drawString(rand, { minLength: 0, controlChance: 0 });
    // cwd has files, so an unquoted glob would visibly expand.
    const out = execFileSync("sh", ["-c", `printf %s ${shellQuote(value)}`], { encoding: "utf8", cwd: __dirname });
    assert.equal(out, value, `shellQuote(${JSON.stringify(value)}) = ${shellQuote(value)}`);
  }
});

// --- systemd reads other directives differently from Exec lines ---------------------------

// Environment= takes quotes and escapes but no `$` expansion (systemd.exec(5): "$ has no
// special meaning"), so doubling `$` there hands the server `$$`.
test("Environment= values reach the server unchanged", () => {
  for (const value of ["pa$$word", "a$b", "50%", 'say "hi"', "C:\\path"]) {
    const unit = renderUnit(deployment({ speculative: DDTREE_WINDOWED, service: { environment: { SGLANG_LOG_DIR: value } } }), { stack: "s" });
    assert.equal(unitEnvironment(unit).SGLANG_LOG_DIR, value, directive(unit, "Environment").join(" "));
  }
});

// WorkingDirectory= and Description= are taken verbatim after specifier expansion: quotes
// are not removed (systemd-analyze verify: 'WorkingDirectory= path is not absolute: "/srv/my models"').
test("WorkingDirectory= with a space is the directory systemd uses", () => {
  const unit = renderUnit(deployment({ speculative: DDTREE_WINDOWED, service: { workingDirectory: "/srv/my models" } }), { stack: "s" });
  assert.equal(expandSpecifiers(onlyDirective(unit, "WorkingDirectory")), "/srv/my models");
});

test("Description= reads without literal quotes in systemctl status", () => {
  const unit = renderUnit(deployment({ speculative: DDTREE_WINDOWED }), { stack: "b8t4-w2048" });
  assert.equal(expandSpecifiers(onlyDirective(unit, "Description")), "SGLang sglang-k26 (stack b8t4-w2048)");
});

// Unicode's other control characters (C1, U+0080-U+009F) can drive terminals as well.
test("C1 control characters are refused too", () => {
  for (const c of ["\u0080", "\u009b", "\u009d", "\u009f"]) {
    const code = `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
    assert.throws(() => systemdQuote(`a${c}b`), /refusing to render a value with a newline or control character/, code);
    assert.throws(() => parseDeployment(rawWithField(FIELDS[3], `a${c}b`), "prop"), (e: unknown) => e instanceof ConfigError && /must not contain newlines or control characters/.test(e.message), code);
  }
});

// SGLang's SIGTERM is a drain that ends in a self-SIGKILL (sgl-project/sglang
// python/sglang/srt/managers/tokenizer_manager.py sigterm_watchdog).
test("stop: TimeoutStopSec bounds SGLang's drain (timeouts.drainSeconds + 15 s), and its self-SIGKILL counts as clean", () => {
  const unit = renderUnit(deployment({ speculative: DDTREE_WINDOWED, timeouts: { drainSeconds: 42.5, stopSeconds: 7 } }), { stack: "drain" });
  assert.equal(onlyDirective(unit, "TimeoutStopSec"), "58");
  assert.equal(onlyDirective(unit, "SuccessExitStatus"), "SIGKILL");
  assert.equal(onlyDirective(unit, "KillMode"), "mixed");
});

// srt/server_args.py: --speculative-dflash-draft-window-size is a deprecated alias stored in
// speculative_draft_window_size, so the server reports it under the canonical name.
test("a flag map using the hidden alias: SGLang accepts the command line, readiness expects the canonical key", () => {
  const d = deployment({ sglangBuild: { flags: { windowSize: "--speculative-dflash-draft-window-size" } }, speculative: { algorithm: "DFLASH", draftWindowSize: 2048 } });
  const argv = execArgv(onlyDirective(renderUnit(d, { stack: "alias" }), "ExecStart"));
  assert.equal(flagValue(argv, "--speculative-dflash-draft-window-size"), "2048");
  // v0.5.19 and main both keep the alias (simhost/sim/sglang/flags.ts).
  const parsed = parseArgs(argv.slice(3), flagTable("upstream"));
  assert.equal(parsed.kind === "ok" && parsed.args.speculative_draft_window_size, 2048);
  assert.equal(expectedServerArgs(d).speculative_draft_window_size, 2048);
  assert.equal("speculative_dflash_draft_window_size" in expectedServerArgs(d), false);
});

// Ranks 1.. serve SGLang's dummy health check on --host:--port of their own machine
// (sgl-project/sglang python/sglang/srt/utils/common.py launch_dummy_health_check_server).
test("multi-node: a specific listen address is node 0's; other ranks listen on their own address, a wildcard stays", () => {
  const node = { address: "10.0.0.6", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl" };
  const d = deployment({ speculative: DDTREE_WINDOWED, nodes: [node], model: { ...(projectConfig().model as Raw), tpSize: 16 }, service: { listenAddress: "10.0.0.5" } });
  assert.equal(flagValue(launchArgs(d, undefined, 0), "--host"), "10.0.0.5");
  assert.equal(flagValue(launchArgs(d, undefined, 1), "--host"), "10.0.0.6");
  const wild = deployment({ speculative: DDTREE_WINDOWED, nodes: [node], model: { ...(projectConfig().model as Raw), tpSize: 16 }, service: { listenAddress: "0.0.0.0" } });
  assert.equal(flagValue(launchArgs(wild, undefined, 1), "--host"), "0.0.0.0");
});

// Campaign seed 4170, sequences 19 and 99: a group's rank ends when another node's does, so
// one node's reboot left the others down until the next `up`.
test("a group's ranks are started again by systemd until the group is whole; one node's server is not", () => {
  const node = { address: "10.0.0.6", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl" };
  const group = deployment({ speculative: DDTREE_WINDOWED, nodes: [node], model: { ...(projectConfig().model as Raw), tpSize: 16 } });
  for (const rank of [0, 1]) {
    const unit = renderUnit(group, { stack: "s", rank });
    assert.equal(onlyDirective(unit, "Restart"), "always", `rank ${rank}`);
    assert.equal(onlyDirective(unit, "RestartSec"), String(GROUP_RESTART_SECONDS));
    assert.equal(onlyDirective(unit, "StartLimitIntervalSec"), "0", "systemd never gives up on a rank while its peer boots");
    assert.ok(unit.indexOf("StartLimitIntervalSec=") < unit.indexOf("[Service]"), "a [Unit] setting");
  }
  const single = renderUnit(deployment({ speculative: DDTREE_WINDOWED }), { stack: "s" });
  assert.equal(onlyDirective(single, "Restart"), "no");
  assert.doesNotMatch(single, /RestartSec|StartLimitIntervalSec/);
});

// --- what preview says the host will change ------------------------------------------

test("unitLineChanges lists each changed line once, in order, old before new", () => {
  assert.deepEqual(unitLineChanges("a\nb\nc\nd", "a\nB\nc\nd\ne"), ["- b", "+ B", "+ e"]);
  assert.deepEqual(unitLineChanges("same\n", "same\n"), []);
  assert.deepEqual(unitLineChanges("x", ""), ["- x", "+ "]);
});

test("describeHostChange names the stack whose unit the host runs and the flags that change", () => {
  const d8 = parseDeployment(testStackConfig("b8t4-w2048"), "b8t4-w2048");
  const d16 = parseDeployment(testStackConfig("b16t4-w2048"), "b16t4-w2048");
  const live = renderUnit(d8, { stack: "b8t4-w2048" });
  const want = renderUnit(d16, { stack: "b16t4-w2048" });
  const text = describeHostChange("sglang-k26", "b16t4-w2048", { host: "10.0.0.5", live }, want, "");
  assert.match(text, /^sglang-k26 on 10\.0\.0\.5 runs the unit of stack b8t4-w2048 \([0-9a-f]{12}\); `up` replaces it with stack b16t4-w2048's unit/);
  assert.match(text, /\n {4}- {5}--speculative-ddtree-budget 8 \\\n {4}\+ {5}--speculative-ddtree-budget 16 \\/);
  assert.match(describeHostChange("sglang-k26", "b16t4-w2048", { host: "h", live: want }, want, ""), /runs the unit of this stack \([0-9a-f]{12}\); `up` changes nothing there\.$/);
  const first = describeHostChange("sglang-k26", "b16t4-w2048", { host: "h", live: null }, want, " (node 1)");
  assert.match(first, /^sglang-k26 on h \(node 1\): not installed yet; `up` installs this stack's unit \([0-9a-f]{12}\):\n/);
  // The unit that will be installed, every line of it.
  assert.deepEqual(first.split("\n").slice(1), want.trimEnd().split("\n").map((l) => `    + ${l}`));
  assert.match(first, /\n {4}\+ {5}--speculative-ddtree-budget 16 \\/);
  assert.match(describeHostChange("sglang-k26", "s", { host: "h", live: "[Service]\nExecStart=/bin/true\n" }, want, ""), /runs the unit of no dflash-sglang stack \(written by hand\?\)/);
  const byHand = describeHostChange("sglang-k26", "s", { host: "h", live: "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --api-key sk-by-hand\nEnvironment=HF_TOKEN=hf_abcdefghijklmn\n" }, want, "");
  assert.match(byHand, /- ExecStart=\/usr\/bin\/python3 -m sglang\.launch_server --api-key <redacted>/);
  assert.doesNotMatch(byHand, /sk-by-hand|hf_abcdefghijklmn/);
  // Issue 36: a unit written by hand with the key on the line after `--api-key \` (the first
  // review a team runs when it adopts a host). The flag's masking used to eat the backslash,
  // and the continuation, no longer seen, printed the key.
  const continued = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server \\\n    --api-key \\\n    sk-next-line-key \\\n    --port 30000\n";
  const split = describeHostChange("sglang-k26", "s", { host: "h", live: continued }, want, "");
  assert.doesNotMatch(split, /sk-next-line-key/, split);
  assert.match(split, /- {5}--api-key \\\n {4}- {5}<redacted> \\/);
});
