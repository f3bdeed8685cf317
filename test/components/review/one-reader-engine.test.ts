// One reader (issue 58), against the engine itself: Pulumi's own reading of a project and a
// stack file (`pulumi config --json`, the pinned CLI, Go's yaml.v3) is the truth. The tricks a
// pull request could use are shown to be real (the engine reads them otherwise than the `yaml`
// library alone) and refused; and on generated files the tool either refuses or reads exactly
// what the engine reads, key by key, as the program gets it.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { mergeConfig, projectConfigOf, stackConfigOf } from "../../../components/review/change";
import { canonicalJson } from "../../../components/review/record";
import { AmbiguousYaml } from "../../../components/review/one-reader";
import { disagreements, refuseUnlessEngineAgrees, SECRET } from "../../../components/review/engine-reading";
import { configValue } from "../../../components/sglang-service/config-value";
import { CONFIG_NAMESPACE } from "../../../components/sglang-service/schema";
import { pulumiEnv } from "../../../lib/pulumi-env";
import { prng } from "../../../lib/prng";

const NS = CONFIG_NAMESPACE;
const PROJECT_HEAD = `name: ${NS}\nruntime: nodejs\nstackConfigDir: stacks\n`;
let dir: string;
let env: Record<string, string>;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "one-reader-"));
  fs.mkdirSync(path.join(dir, "stacks"));
  fs.mkdirSync(path.join(dir, "state"));
  env = pulumiEnv({ PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`, PULUMI_CONFIG_PASSPHRASE: "one-reader-test" });
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), PROJECT_HEAD);
  execFileSync("pulumi", ["stack", "init", "s", "--non-interactive"], { cwd: dir, env, stdio: ["ignore", "ignore", "pipe"] });
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The engine's reading of every key of our namespace (keys without it), as the program gets it; or its error. */
function engineReads(project: string, stack: string): { config: Record<string, unknown> } | { error: string } {
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), project);
  fs.writeFileSync(path.join(dir, "stacks", "Pulumi.s.yaml"), stack);
  const r = spawnSync("pulumi", ["config", "--json", "--stack", "s", "--non-interactive"], { cwd: dir, env, encoding: "utf8" });
  if (r.status !== 0) return { error: (r.stderr || r.stdout).trim() };
  const all = JSON.parse(r.stdout) as Record<string, { value?: string; objectValue?: unknown }>;
  const config: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(all)) {
    if (key.startsWith(`${NS}:`)) config[key.slice(NS.length + 1)] = v.objectValue !== undefined ? v.objectValue : configValue(v.value);
  }
  return { config };
}

/** The tool's reading (change.ts, what the review's rows and hosts come from), or its refusal. */
function toolReads(project: string, stack: string): { config: Record<string, unknown> } | { refused: AmbiguousYaml } {
  try {
    return { config: mergeConfig(projectConfigOf(project), stackConfigOf(stack, "stacks/Pulumi.s.yaml")) };
  } catch (e) {
    if (e instanceof AmbiguousYaml) return { refused: e };
    throw e;
  }
}

/** The `yaml` library alone, as the tool read before issue 58. */
const libraryReads = (stack: string) => (YAML.parse(stack) as { config: Record<string, unknown> }).config;

// Each trick: a stack file (or Pulumi.yaml) the engine reads otherwise than the library does.
// `same`: both read it alike (an anchor), refused all the same: a reader that differs is one upgrade away.
const TRICKS: { what: string; project?: string; stack: string; engineSees: (c: Record<string, unknown>) => boolean; same?: true }[] = [
  ...[
    ["CR", "\r"],
    ["NEL", "\u0085"],
    ["U+2028", "\u2028"],
    ["U+2029", "\u2029"],
  ].flatMap(([name, ch]) => [
    {
      what: `a ${name} in a stack file's comment hides a host override`,
      stack: `config:\n  ${NS}:speculative:\n    budget: 16 # the host is Pulumi.yaml's${ch}  ${NS}:host: {address: 10.6.6.6}\n`,
      engineSees: (c: Record<string, unknown>) => (c.host as { address?: string })?.address === "10.6.6.6",
    },
    {
      what: `a ${name} in Pulumi.yaml's comment adds a key outside config`,
      project: `${PROJECT_HEAD}config:\n  ${NS}:sglangBuild: upstream # note${ch}description: hidden\n`,
      stack: "config: {}\n",
      engineSees: (c: Record<string, unknown>) => c.sglangBuild === "upstream",
    },
  ]),
  { what: "an octal drain (384 to Go)", stack: `config:\n  ${NS}:timeouts:\n    drainSeconds: 0600\n`, engineSees: (c) => (c.timeouts as { drainSeconds?: number }).drainSeconds === 384 },
  { what: "a merge key (merged by Go only)", stack: `config:\n  ${NS}:timeouts:\n    <<: {drainSeconds: 5}\n`, engineSees: (c) => (c.timeouts as { drainSeconds?: number }).drainSeconds === 5 },
  { what: "an anchor and alias", stack: `config:\n  ${NS}:a: &x {drainSeconds: 5}\n  ${NS}:timeouts: *x\n`, engineSees: (c) => (c.timeouts as { drainSeconds?: number }).drainSeconds === 5, same: true },
  {
    what: "a project key without the namespace beside one with it (Pulumi keeps one of them)",
    project: `${PROJECT_HEAD}config:\n  ${NS}:host:\n    value: {address: 10.6.6.6}\n  host:\n    value: {address: 10.0.0.5}\n`,
    stack: "config: {}\n",
    engineSees: (c) => (c.host as { address?: string }).address === "10.6.6.6",
  },
  {
    what: "a comment line inside a list entry hides the next entry",
    stack: `config:\n  ${NS}:model:\n    extraArgs:\n      - --cuda-graph-max-bs=8\n      -\n#tuned\n        --mem-fraction-static=0.85\n      - --enable-metrics\n`,
    engineSees: (c) => (c.model as { extraArgs?: string[] }).extraArgs?.length === 3,
  },
  { what: "a flow entry ending with a colon (text to Go)", stack: `config:\n  ${NS}:model:\n    extraArgs: [--enable-x:, z]\n`, engineSees: (c) => (c.model as { extraArgs?: unknown[] }).extraArgs?.[0] === "--enable-x:" },
  { what: "a block value on the last line without a line break", stack: `config:\n  ${NS}:a: |\n    x`, engineSees: (c) => c.a === "x" },
  { what: "a date", stack: `config:\n  ${NS}:d:\n    at: 2001-12-14\n`, engineSees: (c) => (c.d as { at?: string }).at === "2001-12-14 00:00:00 +0000 UTC" },
];

for (const trick of TRICKS) {
  test(`refused before the engine: ${trick.what}`, () => {
    const project = trick.project ?? PROJECT_HEAD;
    const engine = engineReads(project, trick.stack);
    // The trick is real: the engine reads what the library alone misses or reads otherwise.
    if ("error" in engine) assert.fail(`the engine refused the trick itself: ${engine.error}`);
    assert.ok(trick.engineSees(engine.config), `engine: ${JSON.stringify(engine.config)}`);
    if (!trick.project && !trick.same) assert.notEqual(canonicalJson(libraryReads(trick.stack)), canonicalJson(Object.fromEntries(Object.entries(engine.config).map(([k, v]) => [`${NS}:${k}`, v]))));
    const tool = toolReads(project, trick.stack);
    assert.ok("refused" in tool, `the tool read it: ${JSON.stringify(tool)}`);
    assert.match(tool.refused.message, /^(stacks\/Pulumi\.s\.yaml|Pulumi\.yaml):\d+:\d+: /);
  });
}

// Generated files: values from forms that readers are known to split on, in every style. Plain,
// the first list is what the subset lets through (every one must read alike), the second what it
// refuses; quoted, both are text.
const AGREED = [
  "0", "7", "-3", "600", "-0", "0.0", "1.50", "0.85", "1e5", "1E5", "1e-3", "true", "True", "TRUE", "false", "null", "Null", "~", "0.5.19", "v1.2",
  "a#b", "a b", "-x", "--flag", "NaN", "Infinity", "=", "ddtree-fork", "/models/Kimi-K2.6", "ssh-ed25519 AAAAC3Nza", "é", "a:b",
];
const SPLIT = [
  "0600", "007", "1_000", "0x1F", "0o17", "0b101", "+5", "1.", ".5", "-.5", ".inf", "-.Inf", ".nan", "1:30", "190:20:30", "2001-12-14",
  "2001-12-14t21:59:43.10-05:00", "yes", "no", "on", "off", "y", "n", "Y", "12345678901234567", "9007199254740993", "1e400",
];
const SCALARS = [...AGREED, ...SPLIT];
const ESCAPES = ["\\t", "\\u2028", "\\N", "\\L", "\\P", "\\_", "\\x41", "\\e", "\\\\", '\\"'];
const COMMENT_CHARS = ["x", " ", "#", ":", "\t", "é", "- y", "\r", "\u0085", "\u2028", "\u2029"];

function generate(rand: () => number): { project: string; stack: string } {
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const comment = () => (rand() < 0.3 ? ` # ${Array.from({ length: 1 + Math.floor(rand() * 4) }, () => (rand() < 0.015 ? pick(COMMENT_CHARS.slice(7)) : pick(COMMENT_CHARS.slice(0, 7)))).join("")}` : "");
  const scalar = (): string => {
    const r = rand();
    if (r < 0.5) return rand() < 0.06 ? pick(SPLIT) : pick(AGREED);
    // Over several lines, folded by the reader (YAML.stringify writes long text so).
    if (r < 0.56) return `${pick(AGREED)} ${pick(AGREED)}\n${" ".repeat(10)}${pick(AGREED)}${rand() < 0.3 ? `\n\n${" ".repeat(10)}${pick(AGREED)}` : ""}`;
    if (r < 0.6) return `"${pick(SCALARS)}${pick(["", "\\"])}\n${" ".repeat(10)}${pick(SCALARS)} \n\n${" ".repeat(10)}end"`;
    const s = pick(SCALARS);
    if (r < 0.7) return `'${s.replace(/'/g, "''")}'`;
    return `"${s}${rand() < 0.4 ? pick(ESCAPES) : ""}"`;
  };
  const flow = () => (rand() < 0.5 ? `[${Array.from({ length: Math.floor(rand() * 3) }, () => (rand() < 0.1 ? `${pick(AGREED)}:` : scalar())).join(", ")}]` : `{k: ${scalar()}, j${rand() < 0.1 ? ":" : ": "}${scalar()}}`);
  const value = (indent: number, depth: number): string => {
    const r = rand();
    const pad = " ".repeat(indent);
    if (depth < 2 && r < 0.3) return `${comment()}\n${Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, i) => `${pad}${i ? `k${i}` : pick(["k0", "a", "'y'", "\"on\"", "drainSeconds"])}: ${value(indent + 2, depth + 1)}`).join("\n")}`;
    if (depth < 2 && r < 0.4) return `${comment()}\n${Array.from({ length: 1 + Math.floor(rand() * 3) }, () => `${pad}- ${value(indent + 2, depth + 1).trimStart()}`).join("\n")}`;
    if (r < 0.5) return `${flow()}${comment()}`;
    if (r < 0.56) return `${pick(["|", "|-", ">", ">-"])}\n${Array.from({ length: 1 + Math.floor(rand() * 3) }, () => `${pad}${rand() < 0.2 ? "  " : ""}${pick(SCALARS)}${rand() < 0.2 ? "\n" : ""}`).join("\n")}`;
    return `${scalar()}${comment()}`;
  };
  // A key with or without the namespace (Pulumi reads both as ours), now and then both.
  const named = (prefix: string, i: number) => (rand() < 0.15 ? `${prefix}${i}` : `${NS}:${prefix}${i}`);
  const keys = (prefix: string, n: number, indent: number, long: boolean) =>
    Array.from({ length: n }, (_, i) =>
      long
        ? `  ${named(prefix, i)}:\n    ${pick(["value", "value", "default"])}:${comment()}\n      a: ${value(indent + 8, 1)}\n      b: ${value(indent + 8, 1)}`
        : `  ${rand() < 0.05 ? `${prefix}0` : named(prefix, i)}: ${value(indent + 4, 0)}`,
    ).join("\n");
  // Own-line comments, at any indentation and with or without a space after the `#`.
  const ownLine = (text: string) => text.split("\n").flatMap((l) => (rand() < 0.05 ? [`${" ".repeat(Math.floor(rand() * 8))}${pick(["#", "# "])}${pick(COMMENT_CHARS.slice(0, 7))}`, l] : [l])).join("\n");
  return {
    project: `${PROJECT_HEAD}${ownLine(`config:${comment()}\n${keys("p", 1 + Math.floor(rand() * 2), 0, true)}`)}\n`,
    stack: `${ownLine(`config:${comment()}\n${keys("k", 1 + Math.floor(rand() * 4), 0, false)}`)}${rand() < 0.95 ? "\n" : ""}`,
  };
}

test("generated files: the tool refuses, or reads every key exactly as the engine does (seed 58, 150 files)", () => {
  const SEED = Number(process.env.ONE_READER_SEED ?? 58);
  const rand = prng(SEED);
  const tally = { read: 0, refused: 0, engineRefused: 0 };
  for (let i = 0; i < 150; i++) {
    const { project, stack } = generate(rand);
    const tool = toolReads(project, stack);
    if ("refused" in tool) {
      tally.refused++;
      continue;
    }
    const engine = engineReads(project, stack);
    // The engine refusing the file is no disagreement: nothing runs with another reading.
    if ("error" in engine) {
      tally.engineRefused++;
      continue;
    }
    tally.read++;
    assert.equal(canonicalJson(tool.config), canonicalJson(engine.config), `file ${i} (seed ${SEED}) read differently:\n--- Pulumi.yaml\n${project}--- stack\n${stack}`);
  }
  // The draw reaches both sides: many files read (and compared), many refused.
  assert.ok(tally.read >= 40 && tally.refused >= 30, JSON.stringify(tally));
  console.log(`one reader: ${JSON.stringify(tally)}`);
});

test("the engine's reading is the authority: a reading of the review's that differs is refused, naming the setting", () => {
  const project = `${PROJECT_HEAD}config:\n  ${NS}:host:\n    value: {address: 10.0.0.5}\n`;
  const stack = `config:\n  ${NS}:speculative:\n    budget: 16\n  ${NS}:apiKey:\n    secure: v1:abc\n`;
  const review = mergeConfig(projectConfigOf(project), stackConfigOf(stack, "s"));
  assert.doesNotThrow(() => refuseUnlessEngineAgrees(project, stack, review, "stacks/Pulumi.s.yaml"));
  assert.throws(
    () => refuseUnlessEngineAgrees(project, stack, { ...review, host: { address: "10.0.0.6" } }, "stacks/Pulumi.s.yaml"),
    /^Error: stacks\/Pulumi\.s\.yaml: Pulumi and the review read this configuration differently[^]*- host: Pulumi reads \{"address":"10\.0\.0\.5"\}, the review \{"address":"10\.0\.0\.6"\}/,
  );
  assert.throws(() => refuseUnlessEngineAgrees(project, "config: [\n", {}, "stacks/Pulumi.s.yaml"), /Pulumi cannot read this configuration/);
  // A secret is compared by being one, never by value (the engine does not decrypt here).
  assert.deepEqual(disagreements({ apiKey: { secure: "v1:x" } }, { apiKey: SECRET }), []);
  assert.deepEqual(disagreements({ apiKey: "plain" }, { apiKey: SECRET }), [`apiKey: Pulumi reads "${SECRET}", the review "plain"`]);
});
