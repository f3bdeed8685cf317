// The command-line parser, pure: what a command line means (help, refused with a message
// that names the flag and what is valid, or the typed values), and the usage text
// generated from a declaration, pinned word for word.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  argument,
  closest,
  command,
  commandUsage,
  either,
  existingDirectory,
  flag,
  integerBetween,
  json,
  listOf,
  oneOf,
  option,
  parseCommand,
  parseProgram,
  positiveInteger,
  positiveNumber,
  text,
  UsageError,
  type Outcome,
} from "../../simhost/command-line";

const SWEEP = {
  summary: "Sweeps stacks.",
  options: {
    stacks: option({ type: text, placeholder: "GLOB", description: "the stacks to sweep", default: "*" }),
    cache: option({ type: existingDirectory, placeholder: "DIR", description: "a cache to use" }),
    "sim-hosts": option({ type: positiveInteger, placeholder: "N", description: "simulated hosts", default: "2", excludes: ["cache"] }),
    windows: option({ type: listOf(either(positiveInteger, oneOf(["none"]))), placeholder: "LIST", description: "drafter windows", default: "2048,none" }),
    resume: flag("skip finished stacks"),
  },
  notes: "Ctrl-C stops after the current stacks.",
};

function parsed<T>(outcome: Outcome<T>): T {
  assert.equal(outcome.kind, "ok", JSON.stringify(outcome));
  return (outcome as { value: T }).value;
}

function refusal(outcome: Outcome<unknown>): string {
  assert.equal(outcome.kind, "error", `expected the command line to be refused, got ${JSON.stringify(outcome)}`);
  return (outcome as { message: string }).message;
}

const sweep = (...argv: string[]) => parseCommand("npm run sweep --", SWEEP, argv);

test("defaults are parsed like typed values; absent options without a default are undefined", () => {
  assert.deepEqual(parsed(sweep()), { options: { stacks: "*", cache: undefined, "sim-hosts": 2, windows: [2048, "none"], resume: false }, args: {} });
  assert.deepEqual(parsed(sweep("--stacks", "b8*", "--sim-hosts=3", "--windows", "4096", "--resume")).options, {
    stacks: "b8*",
    cache: undefined,
    "sim-hosts": 3,
    windows: [4096],
    resume: true,
  });
});

test("--help and -h win over everything else on the line, mistakes included", () => {
  for (const argv of [["--help"], ["-h"], ["--stack", "b8", "--help"], ["--sim-hosts", "two", "-h"]]) {
    const outcome = sweep(...argv);
    assert.equal(outcome.kind, "help", argv.join(" "));
  }
  assert.equal(refusal(sweep("--", "--help")), 'unexpected argument "--help" (this command takes no arguments)', "after -- it is an argument");
});

test("the usage text is generated from the declaration", () => {
  assert.equal(
    commandUsage("npm run sweep --", SWEEP),
    [
      "usage: npm run sweep -- [options]",
      "",
      "Sweeps stacks.",
      "",
      "options:",
      "  --stacks GLOB   the stacks to sweep (non-empty text; default: *)",
      "  --cache DIR     a cache to use (an existing directory)",
      "  --sim-hosts N   simulated hosts (a positive whole number; default: 2; not with --cache)",
      '  --windows LIST  drafter windows (a comma-separated list, each a positive whole number or "none"; default: 2048,none)',
      "  --resume        skip finished stacks",
      "  -h, --help      print this help and exit",
      "",
      "Ctrl-C stops after the current stacks.",
      "",
    ].join("\n"),
  );
});

test("an unknown option is named, with the closest valid one and the list", () => {
  assert.equal(refusal(sweep("--stack", "b8")), "unknown option --stack; did you mean --stacks? (valid: --stacks, --cache, --sim-hosts, --windows, --resume, --help)");
  assert.equal(refusal(sweep("--stack=b8")), "unknown option --stack; did you mean --stacks? (valid: --stacks, --cache, --sim-hosts, --windows, --resume, --help)");
  assert.equal(refusal(sweep("--frobnicate")), "unknown option --frobnicate (valid: --stacks, --cache, --sim-hosts, --windows, --resume, --help)");
  assert.match(refusal(sweep("-x")), /^unknown option -x \(valid: /);
});

test("a missing value names the option and what it takes", () => {
  assert.equal(refusal(sweep("--sim-hosts")), "--sim-hosts needs a value (N, a positive whole number)");
  assert.equal(
    refusal(sweep("--stacks", "--resume")),
    '--stacks needs a value (GLOB, non-empty text), got "--resume"; a value that begins with "-" is written --stacks=--resume',
  );
});

test("a bad value names the option, what is valid and what was given", () => {
  assert.equal(refusal(sweep("--sim-hosts", "two")), '--sim-hosts must be a positive whole number, got "two"');
  assert.equal(refusal(sweep("--sim-hosts", "0")), '--sim-hosts must be a positive whole number, got "0"');
  assert.equal(refusal(sweep("--sim-hosts=-1")), '--sim-hosts must be a positive whole number, got "-1"');
  assert.equal(
    refusal(sweep("--windows", "2048,big")),
    '--windows must be a comma-separated list, each a positive whole number or "none", got "2048,big": item 2 ("big") is not a positive whole number or "none"',
  );
  assert.equal(refusal(sweep("--cache", "/nonexistent/cache")), '--cache must be an existing directory, got "/nonexistent/cache": no such directory');
  assert.equal(refusal(sweep("--cache", __filename)), `--cache must be an existing directory, got ${JSON.stringify(__filename)}: not a directory`);
  assert.equal(refusal(sweep("--stacks", "")), '--stacks must be non-empty text, got ""');
});

test("a flag takes no value, an option is given once, options that exclude each other are refused", () => {
  assert.equal(refusal(sweep("--resume=yes")), '--resume takes no value, got "yes"');
  assert.equal(refusal(sweep("--stacks", "a", "--stacks", "b")), "--stacks is given twice; give it once");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cli-"));
  assert.equal(refusal(sweep("--cache", dir, "--sim-hosts", "3")), "--sim-hosts and --cache exclude each other; give one of them");
  assert.equal(parsed(sweep("--cache", dir)).options.cache, dir, "the default of an excluded option does not count as given");
  fs.rmSync(dir, { recursive: true });
});

test("a command without arguments refuses one", () => {
  assert.equal(refusal(sweep("b8")), 'unexpected argument "b8" (this command takes no arguments)');
});

test("value types: numbers, words, JSON", () => {
  assert.equal(positiveNumber.parse("2.5"), 2.5);
  assert.throws(() => positiveNumber.parse("0"));
  assert.throws(() => positiveNumber.parse(""));
  assert.throws(() => positiveInteger.parse("1.5"));
  assert.equal(integerBetween(1, 16).parse("16"), 16);
  assert.throws(() => integerBetween(1, 16).parse("17"));
  assert.equal(oneOf(["auto", "on", "off"]).expects, 'one of "auto", "on", "off"');
  assert.throws(() => oneOf(["auto", "on", "off"]).parse("yes"));
  const object = json("a JSON object", (v) => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not an object");
    return v;
  });
  assert.deepEqual(object.parse('{"a":1}'), { a: 1 });
  assert.throws(() => object.parse("[]"), /not an object/);
  assert.throws(() => object.parse("{"), /not valid JSON/);
});

const SIMHOST = {
  summary: "Simulated hosts.",
  commands: {
    start: {
      summary: "boot a host",
      args: { NAME: argument(text, "the host's name") },
      options: { gpus: option({ type: positiveInteger, placeholder: "N", description: "GPUs", default: "8" }) },
    },
    stop: command({
      summary: "stop a host",
      args: { NAME: argument(text, "the host", { optional: true }) },
      options: { all: flag("every host") },
      check({ options, args }) {
        if (options.all === (args.NAME !== undefined)) throw new UsageError("stop takes either NAME or --all");
      },
    }),
    status: { summary: "list the hosts", options: {} },
  },
};

const simhost = (...argv: string[]) => parseProgram("npm run simhost --", SIMHOST, argv);

test("a program: the command comes first and gets its own options and arguments", () => {
  assert.deepEqual(parsed(simhost("start", "h1", "--gpus", "4")), { command: "start", options: { gpus: 4 }, args: { NAME: "h1" } });
  assert.deepEqual(parsed(simhost("stop", "--all")), { command: "stop", options: { all: true }, args: {} });
  assert.deepEqual(parsed(simhost("status")), { command: "status", options: {}, args: {} });
});

test("a program's help: the overview, or one command's usage", () => {
  const overview = simhost("--help");
  assert.equal(overview.kind, "help");
  assert.equal(
    (overview as { text: string }).text,
    [
      "usage: npm run simhost -- <command> [options]",
      "",
      "Simulated hosts.",
      "",
      "commands:",
      "  start NAME [options]   boot a host",
      "  stop [NAME] [options]  stop a host",
      "  status                 list the hosts",
      "",
      "`npm run simhost -- <command> --help` describes a command's options.",
      "",
    ].join("\n"),
  );
  const start = simhost("start", "--help");
  assert.equal(start.kind, "help");
  assert.match((start as { text: string }).text, /^usage: npm run simhost -- start NAME \[options\]\n/);
  assert.match((start as { text: string }).text, /\n {2}NAME {2}the host's name \(non-empty text\)\n/);
});

test("a program refuses a missing, unknown or misplaced command, and names the command in errors about its options", () => {
  assert.equal(refusal(simhost()), "missing command: one of start, stop, status");
  assert.equal(refusal(simhost("strat", "h1")), 'unknown command "strat"; did you mean start? (commands: start, stop, status)');
  assert.equal(refusal(simhost("toString")), 'unknown command "toString" (commands: start, stop, status)');
  assert.equal(refusal(simhost("--all", "stop")), "the command comes first, before --all (commands: start, stop, status)");
  const gpus = simhost("start", "h1", "--gpus", "0");
  assert.deepEqual(gpus, { kind: "error", invocation: "npm run simhost -- start", message: '--gpus must be a positive whole number, got "0"' });
  assert.equal(refusal(simhost("start")), "missing NAME: the host's name (non-empty text)");
  assert.equal(refusal(simhost("start", "h1", "h2")), 'unexpected argument "h2" (this command takes NAME)');
  assert.equal(refusal(simhost("stop")), "stop takes either NAME or --all", "a command's own rule");
  assert.equal(refusal(simhost("stop", "h1", "--all")), "stop takes either NAME or --all");
});

test("a declaration that uses --help or excludes an undeclared option is a programming error, not a usage error", () => {
  assert.throws(() => parseCommand("x", { summary: "", options: { help: flag("mine") } }, []), /--help and -h are every command's own/);
  assert.throws(() => parseCommand("x", { summary: "", options: { a: flag("a", { excludes: ["b"] }) } }, []), /excludes --b, which is not declared/);
});

// Issue 63: "loadSecs" meant "loadSeconds", 3 edits away: a word whose first two thirds (5
// characters at least) a candidate shares is close enough too; the fewest edits still win.
test("closest: a few edits away, or sharing the word's first two thirds", () => {
  assert.equal(closest("loadSecs", ["profile", "loadSeconds", "loadSecondsPerGiB", "warmupSeconds"]), "loadSeconds");
  assert.equal(closest("stack", ["stacks", "cache"]), "stacks");
  assert.equal(closest("gpus", ["loadSeconds", "profile"]), undefined);
  assert.equal(closest("loadXyzzy", ["loadSeconds"]), undefined, "4 of 9 characters shared is not enough");
});
