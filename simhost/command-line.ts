// The one command-line parser of the project's scripts and of simhost/cli.ts. A command
// declares its options and arguments once (name, value type, default, description) and
// gets from that declaration: strict parsing on node:util's parseArgs, errors that name
// the flag and what is valid, and its usage text. It lives in simhost/ because simhost/
// imports nothing from outside itself; the project's scripts reach it through lib/cli.ts.
//
// parseCommand / parseProgram and the usage renderers are pure (argv in, outcome out);
// parseCommandOrExit / parseProgramOrExit are the thin shell that prints and sets the exit
// code: 0 after --help, 2 for a command line it refuses (before the script did anything).
import * as fs from "node:fs";
import { parseArgs } from "node:util";

// ---------------------------------------------------------------------------------
// Value types: how the text after a flag (or an argument) becomes a value.

/** How the text of an option or argument becomes a value, and what a valid one is. */
export interface ValueType<T> {
  /** What is valid, completing "--flag must be ...", e.g. "a positive whole number". */
  expects: string;
  /** The value; throws an Error whose message says why the text is not valid (may be empty). */
  parse(text: string): T;
}

/** Any text but the empty one. */
export const text: ValueType<string> = {
  expects: "non-empty text",
  parse(t) {
    if (t === "") throw new Error("");
    return t;
  },
};

export const positiveInteger: ValueType<number> = {
  expects: "a positive whole number",
  parse(t) {
    if (!/^\d+$/.test(t.trim()) || Number(t) <= 0) throw new Error("");
    return Number(t);
  },
};

/** A whole number from `min` to `max`, both included. */
export function integerBetween(min: number, max: number): ValueType<number> {
  return {
    expects: `a whole number from ${min} to ${max}`,
    parse(t) {
      const n = Number(t);
      if (!/^-?\d+$/.test(t.trim()) || n < min || n > max) throw new Error("");
      return n;
    },
  };
}

export const nonNegativeNumber: ValueType<number> = {
  expects: "a number, 0 or more",
  parse(t) {
    const n = Number(t);
    if (t.trim() === "" || !Number.isFinite(n) || n < 0) throw new Error("");
    return n;
  },
};

export const positiveNumber: ValueType<number> = {
  expects: "a positive number",
  parse(t) {
    const n = Number(t);
    if (t.trim() === "" || !Number.isFinite(n) || n <= 0) throw new Error("");
    return n;
  },
};

/** One of a fixed set of words. */
export function oneOf<const W extends string>(words: readonly W[]): ValueType<W> {
  const quoted = words.map((w) => `"${w}"`);
  return {
    expects: words.length === 1 ? quoted[0] : `one of ${quoted.join(", ")}`,
    parse(t) {
      if (!(words as readonly string[]).includes(t)) throw new Error("");
      return t as W;
    },
  };
}

/** A value of the first type that accepts the text, e.g. a number or "none". */
export function either<A, B>(a: ValueType<A>, b: ValueType<B>): ValueType<A | B> {
  return {
    expects: `${a.expects} or ${b.expects}`,
    parse(t) {
      try {
        return a.parse(t);
      } catch {
        return b.parse(t);
      }
    },
  };
}

/** A comma-separated list of one type, e.g. "4,8,16". */
export function listOf<T>(item: ValueType<T>): ValueType<T[]> {
  return {
    expects: `a comma-separated list, each ${item.expects}`,
    parse(t) {
      return t.split(",").map((part, i) => {
        try {
          return item.parse(part.trim());
        } catch (e) {
          const why = (e as Error).message;
          throw new Error(`item ${i + 1} (${JSON.stringify(part.trim())}) is not ${item.expects}${why ? `: ${why}` : ""}`);
        }
      });
    },
  };
}

export const existingDirectory: ValueType<string> = {
  expects: "an existing directory",
  parse(t) {
    if (!fs.existsSync(t)) throw new Error("no such directory");
    if (!fs.statSync(t).isDirectory()) throw new Error("not a directory");
    return t;
  },
};

/** A folder to write into: one that exists, or none yet (the command makes it). */
export const outputDirectory: ValueType<string> = {
  expects: "a folder, made if missing",
  parse(t) {
    if (t === "") throw new Error("");
    if (fs.existsSync(t) && !fs.statSync(t).isDirectory()) throw new Error("it exists and is not a folder");
    return t;
  },
};

/** JSON text, checked by `check` (which throws saying what is wrong) into a value. */
export function json<T>(expects: string, check: (value: unknown) => T): ValueType<T> {
  return {
    expects,
    parse(t) {
      let value: unknown;
      try {
        value = JSON.parse(t);
      } catch (e) {
        throw new Error(`not valid JSON (${(e as Error).message})`);
      }
      return check(value);
    },
  };
}

// ---------------------------------------------------------------------------------
// Declarations.

/** An option without a value (`--resume`): true when given. */
export interface FlagOption {
  kind: "flag";
  description: string;
  short?: string;
  /** Options that may not be given with this one. */
  excludes?: string[];
}

/** An option with a value (`--stacks GLOB`). `hasDefault` tells the types whether it can be absent. */
export interface ValueOption<T, HasDefault extends boolean> {
  kind: "value";
  type: ValueType<T>;
  /** The value's name in the usage text, e.g. "GLOB", "N", "FILE". */
  placeholder: string;
  description: string;
  /** Text parsed like a user's when the option is absent (shown in the usage text). */
  default?: string;
  hasDefault: HasDefault;
  short?: string;
  /** Options that may not be given with this one. */
  excludes?: string[];
}

/** A positional argument (`start NAME`). */
export interface Argument<T, Optional extends boolean> {
  type: ValueType<T>;
  description: string;
  optional: Optional;
}

export function flag(description: string, opts: { short?: string; excludes?: string[] } = {}): FlagOption {
  return { kind: "flag", description, ...opts };
}

interface ValueOptionFields<T> {
  type: ValueType<T>;
  placeholder: string;
  description: string;
  short?: string;
  excludes?: string[];
}
export function option<T>(spec: ValueOptionFields<T> & { default: string }): ValueOption<T, true>;
export function option<T>(spec: ValueOptionFields<T>): ValueOption<T, false>;
export function option<T>(spec: ValueOptionFields<T> & { default?: string }): ValueOption<T, boolean> {
  return { kind: "value", ...spec, hasDefault: spec.default !== undefined };
}

export function argument<T>(type: ValueType<T>, description: string): Argument<T, false>;
export function argument<T>(type: ValueType<T>, description: string, opts: { optional: true }): Argument<T, true>;
export function argument<T>(type: ValueType<T>, description: string, opts: { optional?: boolean } = {}): Argument<T, boolean> {
  return { type, description, optional: opts.optional ?? false };
}

// `any`: a declaration holds options and arguments of any value type.
export type Options = Record<string, FlagOption | ValueOption<any, boolean>>;
/** Argument names are their placeholders (NAME, JSON), in the order given. */
export type Arguments = Record<string, Argument<any, boolean>>;

type OptionValue<O> = O extends FlagOption ? boolean : O extends ValueOption<infer T, infer D> ? (D extends true ? T : T | undefined) : never;
type ArgumentValue<A> = A extends Argument<infer T, infer Opt> ? (Opt extends true ? T | undefined : T) : never;

export interface Parsed<O extends Options, A extends Arguments> {
  options: { [K in keyof O]: OptionValue<O[K]> };
  args: { [K in keyof A]: ArgumentValue<A[K]> };
}

export interface CommandSpec<O extends Options, A extends Arguments> {
  /** What it does: the lines under the usage line. */
  summary: string;
  options: O;
  args?: A;
  /** Lines after the options: examples, what happens on Ctrl-C, ... */
  notes?: string;
  /** Rules between options and arguments (e.g. a NAME or --all): throw a UsageError. */
  check?(parsed: Parsed<O, A>): void;
}

/** A command's declaration, as written (so that `check` knows the parsed types). */
export function command<O extends Options, A extends Arguments = Record<never, never>>(spec: CommandSpec<O, A>): CommandSpec<O, A> {
  return spec;
}

/** What the usage text and the error messages read from a command's declaration. */
type Declaration = Omit<CommandSpec<Options, Arguments>, "check">;

/** A command line that is refused: its message names the flag and what is valid. */
export class UsageError extends Error {}

/** What a command line means: help wanted, refused (by the command run as `invocation`), or parsed. */
export type Outcome<T> = { kind: "help"; text: string } | { kind: "error"; invocation: string; message: string } | { kind: "ok"; value: T };

// ---------------------------------------------------------------------------------
// Usage text.

const HELP_LINE = { left: "-h, --help", description: "print this help and exit" };

function optionLeft(name: string, o: FlagOption | ValueOption<unknown, boolean>): string {
  const long = o.kind === "flag" ? `--${name}` : `--${name} ${o.placeholder}`;
  return o.short ? `-${o.short}, ${long}` : long;
}

function optionDescription(o: FlagOption | ValueOption<unknown, boolean>): string {
  const excludes = o.excludes?.length ? [`not with ${o.excludes.map((n) => `--${n}`).join(", ")}`] : [];
  const facts = o.kind === "flag" ? excludes : [o.type.expects, ...(o.default !== undefined ? [`default: ${o.default}`] : []), ...excludes];
  return facts.length > 0 ? `${o.description} (${facts.join("; ")})` : o.description;
}

/** Two columns; a description's own newlines continue under it. */
function table(rows: { left: string; description: string }[]): string {
  const width = Math.max(...rows.map((r) => r.left.length)) + 2;
  return rows
    .map((r) => {
      const [first, ...rest] = r.description.split("\n");
      return [`  ${r.left.padEnd(width)}${first}`, ...rest.map((l) => `  ${"".padEnd(width)}${l}`)].join("\n");
    })
    .join("\n");
}

function argumentsLine(args: Arguments): string {
  return Object.entries(args)
    .map(([name, a]) => (a.optional ? ` [${name}]` : ` ${name}`))
    .join("");
}

/** Pure: the usage text of a command run as `invocation` (e.g. "npm run sweep --"). */
export function commandUsage(invocation: string, spec: Declaration): string {
  const args = spec.args ?? {};
  const hasOptions = Object.keys(spec.options).length > 0;
  const parts = [`usage: ${invocation}${argumentsLine(args)}${hasOptions ? " [options]" : ""}`, "", spec.summary.trimEnd()];
  if (Object.keys(args).length > 0) {
    parts.push("", "arguments:", table(Object.entries(args).map(([name, a]) => ({ left: name, description: `${a.description} (${a.type.expects})` }))));
  }
  const rows = Object.entries(spec.options).map(([name, o]) => ({ left: optionLeft(name, o), description: optionDescription(o) }));
  parts.push("", "options:", table([...rows, HELP_LINE]));
  if (spec.notes) parts.push("", spec.notes.trimEnd());
  return `${parts.join("\n")}\n`;
}

// ---------------------------------------------------------------------------------
// Parsing.

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/** How many characters two words share from their start. */
function sharedPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * The candidate a mistyped word most likely meant, if one is close enough (for "did you mean"):
 * a few edits away, or sharing its first two thirds (at least 5 characters: "loadSecs" meant
 * "loadSeconds"); the fewest edits first.
 */
export function closest(word: string, candidates: string[]): string | undefined {
  const ranked = candidates.map((c) => ({ c, d: c.startsWith(word) || word.startsWith(c) ? 1 : distance(word, c) })).sort((x, y) => x.d - y.d);
  const near = (r: { c: string; d: number }) => r.d <= Math.max(2, Math.floor(word.length / 4)) || sharedPrefix(word, r.c) >= Math.max(5, Math.ceil((2 * word.length) / 3));
  return ranked.find(near)?.c;
}

type NodeOptions = Record<string, { type: "string" | "boolean"; short?: string }>;

function nodeOptions(options: Options): NodeOptions {
  const out: NodeOptions = { help: { type: "boolean", short: "h" } };
  for (const [name, o] of Object.entries(options)) {
    if (name === "help" || o.short === "h") throw new Error(`option --${name}: --help and -h are every command's own`);
    for (const other of o.excludes ?? []) if (!Object.hasOwn(options, other)) throw new Error(`option --${name} excludes --${other}, which is not declared`);
    out[name] = { type: o.kind === "flag" ? "boolean" : "string", ...(o.short ? { short: o.short } : {}) };
  }
  return out;
}

type Token = ReturnType<typeof parseArgs>["tokens"] extends (infer T)[] | undefined ? T : never;

/** The tokens as parseArgs reads them without refusing anything. */
function laxTokens(argv: string[], options: NodeOptions): Token[] {
  return parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true }).tokens;
}

function wantsHelp(tokens: Token[]): boolean {
  for (const t of tokens) {
    if (t.kind === "option-terminator") return false;
    if (t.kind === "option" && t.name === "help") return true;
  }
  return false;
}

function optionList(options: Options): string {
  return [...Object.keys(options).map((n) => `--${n}`), "--help"].join(", ");
}

/** Names what parseArgs refused (its own messages do not say what would be valid). */
function explainRefusal(argv: string[], spec: Declaration, refusal: Error): string {
  for (const t of laxTokens(argv, nodeOptions(spec.options))) {
    if (t.kind !== "option") continue;
    const declared = t.name === "help" ? flag("") : Object.hasOwn(spec.options, t.name) ? spec.options[t.name] : undefined;
    if (declared === undefined) {
      const guess = t.rawName.startsWith("--") ? closest(t.name, Object.keys(spec.options)) : undefined;
      return `unknown option ${t.rawName}${guess ? `; did you mean --${guess}?` : ""} (valid: ${optionList(spec.options)})`;
    }
    if (declared.kind === "flag" && t.value !== undefined) return `${t.rawName} takes no value, got ${JSON.stringify(t.value)}`;
    if (declared.kind === "value" && t.value === undefined) return `${t.rawName} needs a value (${declared.placeholder}, ${declared.type.expects})`;
    if (declared.kind === "value" && !t.inlineValue && t.value?.startsWith("-")) {
      return `${t.rawName} needs a value (${declared.placeholder}, ${declared.type.expects}), got ${JSON.stringify(t.value)}; a value that begins with "-" is written ${t.rawName}=${t.value}`;
    }
  }
  return refusal.message;
}

function convert<T>(what: string, type: ValueType<T>, raw: string): T {
  try {
    return type.parse(raw);
  } catch (e) {
    const why = (e as Error).message;
    throw new UsageError(`${what} must be ${type.expects}, got ${JSON.stringify(raw)}${why ? `: ${why}` : ""}`);
  }
}

function parseOrThrow<O extends Options, A extends Arguments>(argv: string[], spec: CommandSpec<O, A>): Parsed<O, A> {
  let tokens: Token[];
  try {
    tokens = parseArgs({ args: argv, options: nodeOptions(spec.options), strict: true, allowPositionals: true, tokens: true }).tokens;
  } catch (e) {
    throw new UsageError(explainRefusal(argv, spec, e as Error));
  }
  const raw = new Map<string, string | true>();
  const positionals: string[] = [];
  for (const t of tokens) {
    if (t.kind === "positional") positionals.push(t.value);
    if (t.kind !== "option") continue;
    if (raw.has(t.name)) throw new UsageError(`--${t.name} is given twice; give it once`);
    raw.set(t.name, t.value ?? true);
  }
  for (const [name, o] of Object.entries(spec.options)) {
    const clash = o.excludes?.find((other) => raw.has(other));
    if (raw.has(name) && clash) throw new UsageError(`--${name} and --${clash} exclude each other; give one of them`);
  }
  const options: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    const given = raw.get(name);
    if (o.kind === "flag") options[name] = given === true;
    else if (typeof given === "string") options[name] = convert(`--${name}`, o.type, given);
    else options[name] = o.default === undefined ? undefined : convert(`the default of --${name}`, o.type, o.default);
  }
  const declared = Object.entries(spec.args ?? {});
  if (positionals.length > declared.length) {
    const takes = declared.length === 0 ? "takes no arguments" : `takes ${argumentsLine(spec.args ?? {}).trim()}`;
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[declared.length])} (this command ${takes})`);
  }
  const args: Record<string, unknown> = {};
  declared.forEach(([name, a], i) => {
    if (i < positionals.length) args[name] = convert(name, a.type, positionals[i]);
    else if (!a.optional) throw new UsageError(`missing ${name}: ${a.description} (${a.type.expects})`);
  });
  const parsed = { options, args } as Parsed<O, A>;
  spec.check?.(parsed);
  return parsed;
}

/** Pure: what a command line means for a command run as `invocation`. */
export function parseCommand<O extends Options, A extends Arguments>(invocation: string, spec: CommandSpec<O, A>, argv: string[]): Outcome<Parsed<O, A>> {
  if (wantsHelp(laxTokens(argv, nodeOptions(spec.options)))) return { kind: "help", text: commandUsage(invocation, spec) };
  try {
    return { kind: "ok", value: parseOrThrow(argv, spec) };
  } catch (e) {
    if (e instanceof UsageError) return { kind: "error", invocation, message: e.message };
    throw e;
  }
}

// ---------------------------------------------------------------------------------
// Programs with commands (`simhost start NAME ...`).

export type Commands = Record<string, CommandSpec<any, any>>;

export interface ProgramSpec<C extends Commands> {
  summary: string;
  commands: C;
  notes?: string;
}

type OptionsOf<S> = S extends { options: infer O extends Options } ? O : never;
type ArgumentsOf<S> = S extends { args?: infer A extends Arguments } ? A : Record<never, never>;
type CommandOutcome<C extends Commands> = { [K in keyof C]: { command: K } & Parsed<OptionsOf<C[K]>, ArgumentsOf<C[K]>> }[keyof C];

/** Pure: the overview of a program's commands. */
function programUsage(invocation: string, spec: ProgramSpec<Commands>): string {
  const rows = Object.entries(spec.commands).map(([name, c]) => ({
    left: `${name}${argumentsLine(c.args ?? {})}${Object.keys(c.options).length > 0 ? " [options]" : ""}`,
    description: c.summary.split("\n")[0],
  }));
  const parts = [`usage: ${invocation} <command> [options]`, "", spec.summary.trimEnd(), "", "commands:", table(rows), "", `\`${invocation} <command> --help\` describes a command's options.`];
  if (spec.notes) parts.push("", spec.notes.trimEnd());
  return `${parts.join("\n")}\n`;
}

/** Pure: what a command line means for a program with commands; the command comes first. */
export function parseProgram<C extends Commands>(invocation: string, spec: ProgramSpec<C>, argv: string[]): Outcome<CommandOutcome<C>> {
  const names = Object.keys(spec.commands);
  const [first, ...rest] = argv;
  const overview = () => programUsage(invocation, spec);
  if (first === "--help" || first === "-h") return { kind: "help", text: overview() };
  if (first === undefined) return { kind: "error", invocation, message: `missing command: one of ${names.join(", ")}` };
  if (!Object.hasOwn(spec.commands, first)) {
    const guess = first.startsWith("-") ? undefined : closest(first, names);
    const what = first.startsWith("-") ? `the command comes first, before ${first}` : `unknown command ${JSON.stringify(first)}${guess ? `; did you mean ${guess}?` : ""}`;
    return { kind: "error", invocation, message: `${what} (commands: ${names.join(", ")})` };
  }
  const outcome = parseCommand(`${invocation} ${first}`, spec.commands[first], rest);
  return outcome.kind === "ok" ? { kind: "ok", value: { command: first, ...outcome.value } as CommandOutcome<C> } : outcome;
}

// ---------------------------------------------------------------------------------
// The shell.

/** Exit status of a command line that is refused (as for Unix tools' usage errors). */
const USAGE_EXIT_CODE = 2;

/**
 * The value of a parse, or the end of the process: --help prints the usage on stdout and
 * exits 0; a refused command line prints what is wrong on stderr and exits 2.
 */
function valueOrExit<T>(outcome: Outcome<T>): T {
  if (outcome.kind === "ok") return outcome.value;
  if (outcome.kind === "help") {
    process.stdout.write(outcome.text);
    process.exit(0);
  }
  const name = outcome.invocation.replace(/ --$/, "");
  process.stderr.write(`${name}: ${outcome.message}\nSee \`${outcome.invocation} --help\` for what is valid.\n`);
  process.exit(USAGE_EXIT_CODE);
}

/** parseCommand on this process's arguments; exits after --help (0) or a refused command line (2). */
export function parseCommandOrExit<O extends Options, A extends Arguments>(invocation: string, spec: CommandSpec<O, A>, argv = process.argv.slice(2)): Parsed<O, A> {
  return valueOrExit(parseCommand(invocation, spec, argv));
}

/** parseProgram on this process's arguments; exits after --help (0) or a refused command line (2). */
export function parseProgramOrExit<C extends Commands>(invocation: string, spec: ProgramSpec<C>, argv = process.argv.slice(2)): CommandOutcome<C> {
  return valueOrExit(parseProgram(invocation, spec, argv));
}
