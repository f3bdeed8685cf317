// The configuration reference (docs/configuration.md, issue 63), generated so that the schema
// stays the one source: every key's path, type, bounds, default and required-ness are read from
// the zod schemas at runtime, and what it does from the TSDoc of its property in the object
// literal passed to `section(...)` / `z.object(...)`, read with the TypeScript compiler API. A
// key without TSDoc, an example the schema refuses, or a schema construct this file cannot
// describe fails the render, naming the key. scripts/config-reference.ts writes the file;
// test/docs/configuration.test.ts fails when it is stale. Pure but for defaultReferenceInput,
// which reads the source files.
import * as fs from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";
import * as YAML from "yaml";
import { z } from "zod";
import { verdictSchema } from "../verdict/schema";
import { OVERLAY_FILE, OVERLAY_KEYS } from "./overlay";
import { BUILD_PRESETS, CONFIG_NAMESPACE, deploymentSchema } from "./schema";
import { duration } from "./values";

/** A source file whose TSDoc describes keys: its path (from the project folder, for messages) and text. */
export interface SourceText {
  file: string;
  text: string;
}

export interface ReferenceInput {
  /** The deployment: a zod object whose keys are the stack file's `dflash-sglang:<key>` settings. */
  deployment: z.ZodType;
  /** Settings a schema defines but no stack file sets yet, documented apart: key and schema. */
  unread: { key: string; schema: z.ZodType; why: string }[];
  /** The files the schemas are written in (and config.ts, for the secret settings). */
  sources: SourceText[];
  /** Descriptions of keys whose property has no TSDoc yet (path: text); a key here that has TSDoc fails the render. */
  undocumented: Record<string, string>;
  /** Example values of keys the schema gives no default or choice for (canonical path: value). */
  examples: Record<string, Example>;
}

/** A key's example: its value, and optionally the shell word that gives it (`"$(ssh-keyscan ...)"`). */
export interface Example {
  value: unknown;
  shell?: string;
}

/** The files the reference reads its TSDoc from, relative to the project folder. */
export const SOURCE_FILES = ["components/sglang-service/schema.ts", "components/benchmark/schema.ts", "components/verdict/schema.ts", "components/sglang-service/config.ts"];

/**
 * Keys whose property in the schema has no TSDoc yet (their description is here until it moves
 * there: the render then fails, asking to remove the entry).
 */
export const UNDOCUMENTED: Record<string, string> = {
  sglangBuild:
    'Which SGLang build runs on the host, so which flag names the server\'s command line uses: "upstream" (DFLASH only; the drafter\'s window as --speculative-draft-window-size), "ddtree-fork" (adds DDTREE: --speculative-ddtree-budget, topk through SGLANG_DDTREE_MAX_TOPK, --speculative-dflash-compact-cache), or `{flags: {...}}` naming each flag of your build (the keys below). Preflight checks the choice against the host\'s `--help`.',
  "sglangBuild.flags.algorithm": "The flag that names the speculative algorithm (speculative.algorithm).",
  "sglangBuild.flags.drafterPath": "The flag that takes the drafter's weights folder (model.drafterPath).",
  "sglangBuild.flags.draftTokens": "The flag that takes the draft tokens per step (speculative.draftTokens).",
  "sglangBuild.flags.windowSize": "The flag that takes the drafter's sliding window (speculative.draftWindowSize); null where the build has none (then only \"none\" is valid).",
  "sglangBuild.flags.budget": "The flag that takes the DDTree node budget (speculative.budget); null where the build has none.",
  "sglangBuild.flags.compactCache": "The flag that turns on speculative.compactCache; null where the build has none.",
  sshPrivateKey:
    "The SSH private key (the key file's text) for `host`, and for every node, replica and load balancer without a `privateKeyPath` of its own. When set, it is used instead of host.privateKeyPath.",
};

const PLACEHOLDER_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholderReplaceWithYourHostKeyxxxxxxxx";
const ddtree = BUILD_PRESETS["ddtree-fork"];

/**
 * Examples of the keys with no default and no fixed choices (or whose default shows little),
 * by canonical path (a node's or replica's keys take those of `host`).
 */
export const EXAMPLES: Record<string, Example> = {
  "host.address": { value: "10.0.0.5" },
  "host.privateKeyPath": { value: "/root/.ssh/id_ed25519" },
  "host.hostKey": { value: PLACEHOLDER_HOST_KEY, shell: `"$(ssh-keyscan -t ed25519 10.0.0.5 2>/dev/null | cut -d' ' -f2-)"` },
  nodes: { value: [{ address: "10.0.0.6", hostKey: PLACEHOLDER_HOST_KEY }] },
  "service.environment": { value: { CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7" } },
  "model.path": { value: "/models/Kimi-K2.6" },
  "model.memFractionStatic": { value: 0.85 },
  "model.contextLength": { value: 131072 },
  "model.quantization": { value: "compressed-tensors" },
  "model.drafterPath": { value: "/models/Kimi-K2.6-DFlash" },
  "model.servedModelName": { value: "kimi-k2.6" },
  "model.extraArgs": { value: ["--cuda-graph-max-bs", "8"] },
  "speculative.draftTokens": { value: 16 },
  "speculative.budget": { value: 16 },
  "speculative.topk": { value: 4 },
  "speculative.draftWindowSize": { value: 2048 },
  "sglangBuild.flags.budget": { value: ddtree.budget },
  "sglangBuild.flags.topkEnv": { value: ddtree.topkEnv },
  "sglangBuild.flags.compactCache": { value: ddtree.compactCache },
  "sglangBuild.flags.algorithms": { value: ddtree.algorithms },
  "benchmark.runId": { value: "2" },
  "fleet.replicas": { value: [{ address: "10.0.0.6", hostKey: PLACEHOLDER_HOST_KEY }] },
  "fleet.minHealthy": { value: 2 },
  "fleet.loadBalancer.agentPort": { value: 30001 },
  "fleet.loadBalancer.host.address": { value: "10.0.0.9" },
  "fleet.loadBalancer.listenAddress": { value: "0.0.0.0" },
};

/** The project's own input: its schemas, their source files (read from `root`), and the lists above. */
export function defaultReferenceInput(root = path.resolve(__dirname, "..", "..")): ReferenceInput {
  return {
    deployment: deploymentSchema,
    unread: [
      {
        key: "verdict",
        schema: verdictSchema,
        why: "The decision rule's settings (components/verdict/schema.ts): every report, review and sweep uses these defaults. They are not settings of a stack: `dflash-sglang:verdict` in a stack file is refused as an unknown setting. Listed for reference only.",
      },
    ],
    sources: SOURCE_FILES.map((file) => ({ file, text: fs.readFileSync(path.join(root, file), "utf8") })),
    undocumented: UNDOCUMENTED,
    examples: EXAMPLES,
  };
}

// ---------------------------------------------------------------------------------
// Reading the TSDoc of the schemas' object literals.

interface Literal {
  file: string;
  keys: string[];
  docs: Map<string, string | undefined>;
  /** TSDoc of the exported constant the literal builds (`export const fleetSchema = section(...)`). */
  owner?: string;
}

function jsDocOf(node: ts.Node): string | undefined {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  const last = docs[docs.length - 1];
  const text = last ? ts.getTextOfJSDocComment(last.comment) : undefined;
  return text && text.trim() !== "" ? text : undefined;
}

function propertyName(name: ts.PropertyName | undefined, sf: ts.SourceFile): string | undefined {
  if (!name) return undefined;
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return name.getText(sf);
}

/** The object literals passed to section(key, {...}) and z.object({...}) in a source file, with the TSDoc of each property. */
export function schemaLiterals(source: SourceText): Literal[] {
  const sf = ts.createSourceFile(source.file, source.text, ts.ScriptTarget.ES2022, true);
  const out: Literal[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const arg = ts.isIdentifier(callee) && callee.text === "section" ? node.arguments[1] : ts.isPropertyAccessExpression(callee) && callee.name.text === "object" ? node.arguments[0] : undefined;
      if (arg && ts.isObjectLiteralExpression(arg)) {
        const docs = new Map<string, string | undefined>();
        for (const p of arg.properties) {
          const name = propertyName(p.name, sf);
          if (name !== undefined) docs.set(name, jsDocOf(p));
        }
        let owner: string | undefined;
        for (let up: ts.Node | undefined = node.parent; up && !ts.isSourceFile(up); up = up.parent) {
          if (ts.isVariableStatement(up)) owner = jsDocOf(up);
          if (ts.isVariableStatement(up) || ts.isFunctionDeclaration(up) || ts.isPropertyAssignment(up) || ts.isObjectLiteralExpression(up)) break;
        }
        out.push({ file: source.file, keys: [...docs.keys()], docs, owner });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** `const NAME = ["a", "b"] as const`: the strings of an array literal bound to NAME, or undefined. */
function stringArray(sources: SourceText[], name: string): string[] | undefined {
  for (const source of sources) {
    const sf = ts.createSourceFile(source.file, source.text, ts.ScriptTarget.ES2022, true);
    let found: string[] | undefined;
    const visit = (node: ts.Node): void => {
      if (found) return;
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === name && node.initializer) {
        let init: ts.Expression = node.initializer;
        while (ts.isAsExpression(init) || ts.isParenthesizedExpression(init)) init = init.expression;
        if (ts.isArrayLiteralExpression(init)) found = init.elements.filter(ts.isStringLiteral).map((e) => e.text);
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
    if (found) return found;
  }
  return undefined;
}

/** The TSDoc of each member of `interface NAME` in the sources. */
function interfaceDocs(sources: SourceText[], name: string): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const source of sources) {
    const sf = ts.createSourceFile(source.file, source.text, ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isInterfaceDeclaration(node) && node.name.text === name) {
        for (const m of node.members) {
          const key = propertyName(m.name, sf);
          if (key !== undefined) out.set(key, jsDocOf(m));
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Reading the zod schemas.

interface CheckDef {
  check: string;
  value?: number;
  inclusive?: boolean;
  minimum?: number;
  maximum?: number;
  format?: string;
  pattern?: RegExp;
}
interface Def {
  type: string;
  innerType?: z.ZodType;
  defaultValue?: unknown;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  options?: z.ZodType[];
  values?: unknown[];
  entries?: Record<string, string>;
  keyType?: z.ZodType;
  valueType?: z.ZodType;
  checks?: { _zod: { def: CheckDef } }[];
  error?: (issue: unknown) => unknown;
}

const defOf = (s: z.ZodType): Def => (s as unknown as { def: Def }).def;
const checksOf = (s: z.ZodType): CheckDef[] => (defOf(s).checks ?? []).map((c) => c._zod.def);

type Presence = { kind: "required" } | { kind: "optional" } | { kind: "default"; value: unknown };

interface Unwrapped {
  base: z.ZodType;
  presence: Presence;
  nullable: boolean;
}

/** The schema under .default/.optional/.nullable, and what those say. */
function unwrap(schema: z.ZodType): Unwrapped {
  let s = schema;
  let presence: Presence = { kind: "required" };
  let nullable = false;
  for (;;) {
    const def = defOf(s);
    if (def.type === "default") {
      if (presence.kind === "required") presence = { kind: "default", value: def.defaultValue };
    } else if (def.type === "optional") {
      if (presence.kind === "required") presence = { kind: "optional" };
    } else if (def.type === "nullable") nullable = true;
    else return { base: s, presence, nullable };
    s = def.innerType!;
  }
}

/** What the schema's own message says is valid ("a host name or an IP address"), without "<key> must be". */
function validWords(s: z.ZodType): string | undefined {
  const error = defOf(s).error;
  if (typeof error !== "function") return undefined;
  const message = error({ code: "invalid_type", input: undefined, path: [] });
  if (typeof message !== "string") return undefined;
  const at = message.indexOf(" must be ");
  return at < 0 ? undefined : message.slice(at + " must be ".length);
}

/** A number's bounds; a whole number's exclusive bounds become inclusive ones. */
function bounds(s: z.ZodType): { int: boolean; lo?: { value: number; inclusive: boolean }; hi?: { value: number; inclusive: boolean } } {
  const checks = checksOf(s);
  const int = checks.some((c) => c.check === "number_format" && (c.format === "safeint" || c.format === "int32" || c.format === "uint32"));
  const gt = checks.find((c) => c.check === "greater_than");
  const lt = checks.find((c) => c.check === "less_than");
  let lo = gt && { value: gt.value!, inclusive: gt.inclusive ?? false };
  let hi = lt && { value: lt.value!, inclusive: lt.inclusive ?? false };
  if (int && lo && !lo.inclusive && Number.isInteger(lo.value)) lo = { value: lo.value + 1, inclusive: true };
  if (int && hi && !hi.inclusive && Number.isInteger(hi.value)) hi = { value: hi.value - 1, inclusive: true };
  return { int, lo, hi };
}

/** A number in words: "whole number from 1 to 1024", "positive number of seconds, at most 3600 (1 h)". */
function numberWords(s: z.ZodType): string {
  const { int, lo, hi } = bounds(s);
  const message = validWords(s) ?? "";
  const unit = /\bnumbers? of (\w+)/.exec(message)?.[1];
  const noun = `${int ? "whole number" : "number"}${unit ? ` of ${unit}` : ""}`;
  // The ceiling's meaning: a duration in words for seconds, else what the message says after it ("512 GiB").
  const meaning = (n: number) => {
    if (unit === "seconds" && n >= 60) return ` (${duration(n)})`;
    const said = new RegExp(`(?:^|[^\\d.])${String(n).replace(/\./g, "\\.")} \\(([^():]*)\\)`).exec(message)?.[1];
    return said && !said.startsWith("e.g.") ? ` (${said})` : "";
  };
  const top = hi && `${hi.value}${meaning(hi.value)}`;
  if (lo && hi && lo.inclusive && hi.inclusive) return `${noun} from ${lo.value} to ${top}`;
  if (lo && hi && !lo.inclusive && lo.value === 0 && hi.inclusive) return `positive ${noun}, at most ${top}`;
  if (lo && hi && !lo.inclusive && !hi.inclusive) return `${noun} between ${lo.value} and ${top}, both excluded`;
  if (lo && hi && lo.inclusive) return `${noun} from ${lo.value}, below ${top}`;
  if (lo && hi) return `${noun} above ${lo.value}, at most ${top}`;
  if (hi) return `${noun}, ${hi.inclusive ? "at most" : "below"} ${top}`;
  if (lo) return `${noun}, ${lo.inclusive ? "at least" : "above"} ${lo.value}`;
  return noun;
}

const quoted = (v: unknown) => JSON.stringify(v);

function listWords(words: string[]): string {
  return words.length <= 2 ? words.join(" or ") : `${words.slice(0, -1).join(", ")}, or ${words[words.length - 1]}`;
}

/** A value's type in words, from its zod schema (`at`: the key, for errors). */
function typeWords(s: z.ZodType, at: string): string {
  const { base, nullable } = unwrap(s);
  const def = defOf(base);
  let words: string;
  switch (def.type) {
    case "number":
      words = numberWords(base);
      break;
    case "boolean":
      words = "true or false";
      break;
    case "string": {
      const valid = validWords(base);
      words = valid && valid !== "text" ? valid : "text";
      break;
    }
    case "enum": {
      const values = Object.values(def.entries!).map(quoted);
      words = values.length === 1 ? values[0] : `one of ${values.join(", ")}`;
      break;
    }
    case "literal":
      words = def.values!.map(quoted).join(" or ");
      break;
    case "union":
      // An enum among the alternatives lists its values with the others': "upstream", "ddtree-fork", or a mapping.
      words = listWords(def.options!.flatMap((o) => (defOf(o).type === "enum" ? Object.values(defOf(o).entries!).map(quoted) : [typeWords(o, at)])));
      break;
    case "object":
      words = `a mapping {${Object.keys(def.shape!).map((k) => `${k}: ...`).join(", ")}} (the keys below)`;
      break;
    case "record": {
      const keys = checksOf(def.keyType!).find((c) => c.format === "regex")?.pattern;
      words = `a mapping of names${keys ? ` (\`${keys.source}\`)` : ""} to ${typeWords(def.valueType!, `${at} value`)}`;
      break;
    }
    case "array": {
      const checks = checksOf(base);
      const min = checks.find((c) => c.check === "min_length")?.minimum;
      const max = checks.find((c) => c.check === "max_length")?.maximum;
      const count = [min !== undefined && min > 0 ? `at least ${min}` : "", max !== undefined ? `at most ${max}` : ""].filter(Boolean).join(", ");
      const element = unwrap(def.element!).base;
      const each = defOf(element).type === "object" ? "each a mapping with the keys below" : `each ${typeWords(element, `${at} entry`)}`;
      words = `a list${count ? ` (${count} entries)` : ""}, ${each}`;
      break;
    }
    default:
      throw new Error(`${at}: the reference cannot describe a zod ${def.type}; teach components/sglang-service/reference.ts typeWords`);
  }
  return nullable && !/\bnull\b/.test(words) ? `${words}, or null` : words;
}

/** The highest value a key may take, or the most entries of a list: its ceiling, where it has one. */
export function ceilingOf(s: z.ZodType): number | undefined {
  const { base } = unwrap(s);
  const def = defOf(base);
  if (def.type === "number") return bounds(base).hi?.value;
  if (def.type === "array") return checksOf(base).find((c) => c.check === "max_length")?.maximum;
  if (def.type === "union") return def.options!.map(ceilingOf).find((c) => c !== undefined);
  return undefined;
}

// ---------------------------------------------------------------------------------
// The tree of settings.

/** One key of the reference. */
export interface Setting {
  /** Full path, as `config set --path` takes it with [N] for a list's entry: "fleet.loadBalancer.port", "nodes[N].address". */
  path: string;
  /** The path of the key this one repeats (a node's keys are host's), or its own. */
  canonical: string;
  schema: z.ZodType;
  presence: Presence;
  /** The nearest enclosing optional section or list ("fleet", "nodes"), which makes "required" conditional. */
  within?: { path: string; kind: "optional" | "list" };
  type: string;
  ceiling?: number;
  description: string;
  example?: Example;
}

interface Group {
  key: string;
  /** The group's own TSDoc (of its exported constant), where it has one. */
  doc?: string;
  presence: Presence;
  settings: Setting[];
  /** The group's schema, for its YAML template. */
  schema: z.ZodType;
  /** Not read from stack files (verdict): no example commands. */
  unread?: string;
}

class Reader {
  readonly literals: Literal[];
  readonly missing: string[] = [];
  readonly usedFallbacks = new Set<string>();
  readonly usedExamples = new Set<string>();
  /** Each object literal's first path ("host"), for keys that repeat it ("nodes[N]"). */
  private readonly firstPath = new Map<Literal, string>();

  constructor(private readonly input: ReferenceInput) {
    this.literals = input.sources.flatMap(schemaLiterals);
  }

  /** The object literal that declares a zod object's keys: the one with exactly its keys, in order. */
  literalFor(shape: Record<string, z.ZodType>, at: string): Literal {
    const keys = Object.keys(shape);
    const candidates = this.literals.filter((l) => l.keys.length === keys.length && l.keys.every((k, i) => k === keys[i]));
    if (candidates.length === 0) throw new Error(`${at || "the deployment"}: no object literal passed to section(...) or z.object(...) in ${this.input.sources.map((s) => s.file).join(", ")} has the keys ${keys.join(", ")}`);
    const [first, ...rest] = candidates;
    for (const other of rest) {
      if (keys.some((k) => first.docs.get(k) !== other.docs.get(k))) throw new Error(`${at}: the object literals of ${first.file} and ${other.file} with the keys ${keys.join(", ")} document them differently; the reference cannot tell which is ${at}`);
    }
    return first;
  }

  description(pathOf: string, doc: string | undefined): string {
    const fallback = this.input.undocumented[pathOf];
    if (doc !== undefined && fallback !== undefined) {
      this.missing.push(`${pathOf}: has TSDoc now; remove its entry from the reference's UNDOCUMENTED list`);
    }
    if (doc !== undefined) return doc;
    if (fallback !== undefined) {
      this.usedFallbacks.add(pathOf);
      return fallback;
    }
    this.missing.push(`${pathOf}: no TSDoc on its property in the schema: add a /** ... */ comment saying what it does`);
    return "";
  }

  /** The settings under a zod object at `prefix`; `within`: the enclosing optional section or list. */
  objectSettings(schema: z.ZodType, prefix: string, within: Setting["within"]): Setting[] {
    const shape = defOf(schema).shape!;
    const literal = this.literalFor(shape, prefix);
    const first = this.firstPath.get(literal);
    if (first === undefined) this.firstPath.set(literal, prefix);
    return Object.entries(shape).flatMap(([key, child]) => {
      const at = prefix ? `${prefix}.${key}` : key;
      const canonical = first === undefined ? at : `${first}.${key}`;
      return this.keySettings(child, at, canonical, literal.docs.get(key), within);
    });
  }

  keySettings(schema: z.ZodType, at: string, canonical: string, doc: string | undefined, within: Setting["within"]): Setting[] {
    const u = unwrap(schema);
    const def = defOf(u.base);
    const inner = u.presence.kind === "required" ? within : (within ?? { path: at, kind: "optional" as const });
    if (def.type === "object") return this.objectSettings(u.base, at, inner);
    const own: Setting = {
      path: at,
      canonical,
      schema,
      presence: u.presence,
      within,
      type: typeWords(schema, at),
      ceiling: ceilingOf(schema),
      description: canonical === at ? this.description(at, doc) : "",
      example: this.example(schema, at, canonical),
    };
    const below: Setting[] = [];
    if (def.type === "array" && defOf(unwrap(def.element!).base).type === "object") {
      below.push(...this.objectSettings(unwrap(def.element!).base, `${at}[N]`, { path: at, kind: "list" }));
    }
    if (def.type === "union") {
      for (const option of def.options!) if (defOf(option).type === "object") below.push(...this.objectSettings(option, at, { path: at, kind: "optional" }));
    }
    return [own, ...below];
  }

  /** A key's example: given, else its default, else its first choice; it must be valid. */
  example(schema: z.ZodType, at: string, canonical: string): Example | undefined {
    const u = unwrap(schema);
    const def = defOf(u.base);
    const name = at in this.input.examples ? at : canonical in this.input.examples ? canonical : undefined;
    if (name !== undefined) this.usedExamples.add(name);
    const given = name === undefined ? undefined : this.input.examples[name];
    const example: Example | undefined =
      given ??
      (u.presence.kind === "default"
        ? { value: u.presence.value }
        : def.type === "enum"
          ? { value: Object.values(def.entries!)[0] }
          : def.type === "literal"
            ? { value: def.values![0] }
            : undefined);
    if (example === undefined) {
      this.missing.push(`${canonical}: no example: it has no default and no fixed choices; add one to the reference's EXAMPLES`);
      return undefined;
    }
    const checked = schema.safeParse(example.value);
    if (!checked.success) this.missing.push(`${canonical}: its example ${JSON.stringify(example.value)} is invalid: ${checked.error.issues.map((i) => i.message).join("; ")}`);
    return example;
  }
}

/** Every group of the reference, with its settings, in the schema's order. */
export function referenceGroups(input: ReferenceInput = defaultReferenceInput()): { groups: Group[]; unread: Group[]; secrets: { key: string; description: string }[] } {
  const reader = new Reader(input);
  const top = defOf(input.deployment);
  if (top.type !== "object") throw new Error(`the deployment schema must be a zod object, not ${top.type}`);
  const topLiteral = reader.literalFor(top.shape!, "");
  const groups: Group[] = Object.entries(top.shape!).map(([key, schema]) => {
    const u = unwrap(schema);
    const isSection = defOf(u.base).type === "object";
    const literal = isSection ? reader.literalFor(defOf(u.base).shape!, key) : undefined;
    return {
      key,
      doc: isSection ? literal?.owner : undefined,
      presence: u.presence,
      settings: reader.keySettings(schema, key, key, topLiteral.docs.get(key), undefined),
      schema,
    };
  });
  const unread: Group[] = input.unread.map(({ key, schema, why }) => {
    const u = unwrap(schema);
    return { key, presence: u.presence, settings: reader.keySettings(schema, key, key, undefined, undefined), schema, unread: why };
  });
  // The settings a stack file may hold, as the program reads them (config.ts KEYS, SECRET_KEYS).
  const keys = stringArray(input.sources, "KEYS");
  if (keys && keys.join() !== Object.keys(top.shape!).join()) {
    reader.missing.push(`config.ts reads the keys ${keys.join(", ")} but the deployment schema has ${Object.keys(top.shape!).join(", ")}`);
  }
  const secretDocs = interfaceDocs(input.sources, "StackSecrets");
  const secrets = (stringArray(input.sources, "SECRET_KEYS") ?? []).map((key) => {
    const doc = secretDocs.get(key)?.replace(/^`[^`]*`:\s*/, "");
    const text = reader.description(key, doc && doc.charAt(0).toUpperCase() + doc.slice(1));
    return { key, description: text };
  });
  for (const key of Object.keys(input.undocumented)) {
    if (!reader.usedFallbacks.has(key) && !reader.missing.some((m) => m.startsWith(`${key}:`))) reader.missing.push(`${key}: is in the reference's UNDOCUMENTED list but is no key of the schema: remove it`);
  }
  for (const key of Object.keys(input.examples)) {
    if (!reader.usedExamples.has(key)) reader.missing.push(`${key}: is in the reference's EXAMPLES but is no key of the schema: remove it`);
  }
  if (reader.missing.length) throw new Error(`the configuration reference cannot be rendered:\n${reader.missing.map((m) => `  - ${m}`).join("\n")}`);
  return { groups, unread, secrets };
}

// ---------------------------------------------------------------------------------
// Rendering.

/** A value as the reference shows it: JSON, with a space after each comma of a list or mapping. */
export function shown(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(shown).join(", ")}]`;
  if (typeof value === "object" && value !== null) return `{${Object.entries(value).map(([k, v]) => `${quoted(k)}: ${shown(v)}`).join(", ")}}`;
  return JSON.stringify(value);
}

/**
 * Optional keys that another key's value makes required (parseDeployment's cross-checks in
 * schema.ts, and config.ts's key reading): the reference says so beside "not set".
 */
export const REQUIRED_WHEN: Record<string, string> = {
  "model.drafterPath": "required when `speculative.algorithm` is DFLASH or DDTREE (DDTREE is the default)",
  "speculative.budget": "required when `speculative.algorithm` is DDTREE (the default)",
  "speculative.topk": "required when `speculative.algorithm` is DDTREE (the default)",
  "host.privateKeyPath": "required unless the secret `sshPrivateKey` is set",
};

function defaultWords(s: Setting): string {
  switch (s.presence.kind) {
    case "default":
      return `\`${shown(s.presence.value)}\``;
    case "optional":
      return REQUIRED_WHEN[s.path] ? `not set; ${REQUIRED_WHEN[s.path]}` : "not set (optional)";
    case "required":
      if (!s.within) return "required";
      return s.within.kind === "list" ? `required in each entry of \`${s.within.path}\`` : `required when \`${s.within.path}\` is set`;
  }
}

/** The TSDoc as Markdown paragraphs, without a "Defaults to X." sentence the Default line already says. */
function descriptionText(text: string, presence: Presence): string {
  const paragraphs = text
    .replace(/\\`/g, "`")
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, " ").trim());
  if (presence.kind !== "default") return paragraphs.filter(Boolean).join("\n\n");
  const value = presence.value;
  const plain = typeof value === "string" ? value : shown(value);
  const escaped = plain.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const saysDefault = new RegExp(`(^|[^\\w.])${escaped}([^\\w.]|$)`);
  return paragraphs
    .map((p) =>
      p.replace(/(^|\s)Defaults to ((?:[^.]|\.(?=\d))*)\.(?=\s|$)/, (sentence, lead: string, what: string) => (what.includes(":") || !saysDefault.test(what) ? sentence : lead)).trim(),
    )
    .filter(Boolean)
    .join("\n\n");
}

/** A word for the shell: bare where safe, else single-quoted. */
function shellWord(text: string): string {
  return /^[A-Za-z0-9_./:,@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The (path, value) pairs that set a value with `config set --path`: a list entry by entry, a mapping key by key. */
function leaves(at: string, value: unknown): [string, unknown][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => leaves(`${at}[${i}]`, v));
  if (typeof value === "object" && value !== null) return Object.entries(value).flatMap(([k, v]) => leaves(`${at}.${k}`, v));
  return [[at, value]];
}

/**
 * The commands that set a key to a value. `config set --path` stores "true"/"false" as booleans,
 * whole numbers as numbers and the rest as text: a fraction needs `--type float`, text that reads
 * as a number or a boolean `--type string`; a value beginning with "-" goes after `--`.
 */
export function setCommands(at: string, example: Example): string[] {
  return leaves(at, example.value).map(([key, value]) => {
    const text = String(value);
    const type = typeof value === "number" && !Number.isInteger(value) ? " --type float" : typeof value === "string" && /^([-+]?\d+|true|false)$/.test(value) ? " --type string" : "";
    const word = example.shell && key === at ? example.shell : shellWord(text);
    return `npx pulumi config set --path --stack <stack>${type} ${shellWord(key)} ${text.startsWith("-") ? "-- " : ""}${word}`;
  });
}

/** GitHub's heading anchors, each made unique as GitHub does (-1, -2, ...). */
class Anchors {
  private readonly seen = new Map<string, number>();
  next(heading: string): string {
    const slug = heading
      .replace(/`/g, "")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = this.seen.get(slug);
    this.seen.set(slug, (n ?? -1) + 1);
    return n === undefined ? slug : `${slug}-${n + 1}`;
  }
}

const cell = (text: string) => text.replace(/\|/g, "\\|");

/** A YAML value on one line (flow style). */
function flow(value: unknown): string {
  return YAML.stringify(value, { collectionStyle: "flow", flowCollectionPadding: false, lineWidth: 0 }).trim();
}

/** A key and its value in a stack file: on one line, or a list of mappings as a block under it. */
function yamlEntry(key: string, value: unknown, note: string, indent: string, hash: string): string[] {
  const mappings = Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "object" && v !== null && !Array.isArray(v));
  if (!mappings) return [`${indent}${hash}${key}: ${flow(value)}${note}`];
  const block = YAML.stringify(value, { lineWidth: 0 }).trimEnd().split("\n");
  return [`${indent}${hash}${key}:${note}`, ...block.map((l) => `${indent}${hash}  ${l}`)];
}

/**
 * The keys of a section as they go in a stack file: required ones set, the others commented out
 * (`all`: every key set, for a form shown commented out as a whole).
 */
function yamlLines(schema: z.ZodType, byPath: Map<string, Setting>, at: string, indent: string, commented: boolean, all = false): string[] {
  const lines: string[] = [];
  const shape = defOf(unwrap(schema).base).shape!;
  for (const [key, child] of Object.entries(shape)) {
    const p = `${at}.${key}`;
    const u = unwrap(child);
    const hash = !all && (commented || u.presence.kind !== "required") ? "# " : "";
    if (defOf(u.base).type === "object" && !byPath.has(p)) {
      lines.push(`${indent}${hash}${key}:`, ...yamlLines(u.base, byPath, p, `${indent}  `, hash !== "", all));
      continue;
    }
    const s = byPath.get(p)!;
    const note = s.presence.kind === "default" ? (shown(s.example?.value) === shown(s.presence.value) ? "  # the default" : `  # default: ${shown(s.presence.value)}`) : s.presence.kind === "optional" ? "  # optional" : "";
    lines.push(...yamlEntry(key, s.example?.value, note, indent, hash));
  }
  return lines;
}

/** A group as it goes in a stack file. */
function groupYaml(g: Group, byPath: Map<string, Setting>): string {
  const u = unwrap(g.schema);
  const key = `${CONFIG_NAMESPACE}:${g.key}`;
  const body: string[] = [];
  if (defOf(u.base).type === "object") body.push(`  ${key}:`, ...yamlLines(u.base, byPath, g.key, "    ", false));
  else {
    body.push(...yamlEntry(key, byPath.get(g.key)!.example?.value, "", "  ", ""));
    // A union's mapping form (sglangBuild: {flags: ...}), commented out as a whole.
    for (const option of defOf(u.base).options ?? []) {
      if (defOf(option).type !== "object") continue;
      body.push("  # or:", `  # ${key}:`, ...yamlLines(option, byPath, g.key, "    ", false, true).map((l) => `  # ${l.slice(2)}`));
    }
  }
  return ["```yaml", "# stacks/Pulumi.<stack>.yaml (commented out: optional keys, and defaults)", "config:", ...body, "```"].join("\n");
}

function presenceOfGroup(g: Group): string {
  const section = defOf(unwrap(g.schema).base).type === "object";
  switch (g.presence.kind) {
    case "required":
      return "Required in every stack (from the stack file or Pulumi.yaml).";
    case "optional":
      return "Optional: leave it out for none.";
    case "default":
      return section ? "Optional: every key left out takes its default." : "Optional: left out, it takes its default.";
  }
}

/** Pure: docs/configuration.md. Throws, listing every key it cannot document (no TSDoc, no valid example). */
export function renderConfigReference(input: ReferenceInput = defaultReferenceInput()): string {
  const { groups, unread, secrets } = referenceGroups(input);
  const anchors = new Anchors();
  const out: string[] = [];
  const toc: string[] = [];
  const heading = (level: number, text: string, inToc = level === 2) => {
    const anchor = anchors.next(text);
    if (inToc) toc.push(`- [${text}](#${anchor})`);
    out.push(`${"#".repeat(level)} ${text}`, "");
    return anchor;
  };
  anchors.next("Configuration reference");
  anchors.next("Contents");

  heading(2, "How settings are given");
  out.push(
    `Every setting is a key of the \`${CONFIG_NAMESPACE}\` namespace (the project's name in Pulumi.yaml): \`${CONFIG_NAMESPACE}:<section>\`, most of them a mapping of the keys listed below, written \`<section>.<key>\` here. Two files give them:`,
    "",
    "- `Pulumi.yaml`, under `config:` (each value under `value:`): the project's settings, shared by every stack.",
    "- `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml's `stackConfigDir`), under `config:`: what one stack states itself.",
    "",
    `**A key set in a stack file replaces the project's whole value of that key**: Pulumi merges no mappings. A stack file that sets \`${CONFIG_NAMESPACE}:model\` to \`{tpSize: 4}\` has no \`model.path\`, whatever Pulumi.yaml says, and fails naming the key and this rule. \`npx pulumi config set --path --stack <stack> <section>.<key> <value>\` writes into the stack file's own section, starting one when it has none: a stack that sets one key of a section Pulumi.yaml gives sets all of that section's keys it needs.`,
    "",
    "Every value is checked before anything runs: an invalid value, a key a section does not know, or a setting of the namespace that does not exist (a misspelt section) fails `preview` and `up` naming the stack, the key and what is valid, and nothing changes on any host.",
    "",
    '`config set --path` stores `true` and `false` as booleans, whole numbers as numbers and everything else as text: a fraction needs `--type float`, text that reads as a number `--type string`, and a value that begins with `-` goes after `--`; the examples below do so. A list is set entry by entry (`\'model.extraArgs[0]\'`), a list of hosts key by key (`\'nodes[0].address\'`); a stack file\'s YAML says the same in one block.',
    "",
    "In the tables, a key of a list's entries is written with `[N]`. *Default* is the value a key takes when left out; *required* keys have none.",
    "",
  );

  const byPath = new Map<string, Setting>();
  for (const g of [...groups, ...unread]) for (const s of g.settings) byPath.set(s.path, s);
  const keyAnchor = new Map<string, string>();

  const renderGroup = (g: Group) => {
    heading(2, `\`${g.key}\``);
    if (g.unread) out.push(`${g.unread}`, "");
    else out.push(`Stack key \`${CONFIG_NAMESPACE}:${g.key}\`. ${presenceOfGroup(g)}`, "");
    if (g.doc) out.push(descriptionText(g.doc, { kind: "required" }), "");
    const documented = g.settings.filter((s) => s.canonical === s.path);
    // The table goes here; its rows link the detail blocks below, whose anchors come first.
    out.push("| Key | Type | Default |", "|---|---|---|");
    const tableAt = out.length;
    if (!g.unread) out.push("", groupYaml(g, byPath), "");
    else out.push("");
    for (const s of documented) {
      const anchor = heading(3, `\`${s.path}\``);
      keyAnchor.set(s.path, anchor);
      out.push(descriptionText(s.description, s.presence), "", `- Type: ${s.type}`, `- Default: ${defaultWords(s)}`);
      if (g.unread) out.push("- Example: none: not read from stack files yet");
      else if (s.example && leaves(s.path, s.example.value).some(([, v]) => v === null)) {
        out.push(`- Example (in the stack file: \`config set\` writes no null): \`${s.path.split(".").pop()}: ${flow(s.example.value)}\``);
      } else if (s.example) {
        const commands = setCommands(s.path, s.example);
        if (commands.length === 1) out.push(`- Example: \`${commands[0]}\``);
        else out.push("- Example:", "", "  ```sh", ...commands.map((c) => `  ${c}`), "  ```");
      }
      out.push("");
    }
    const rows = g.settings.map((s) => {
      const key = s.canonical === s.path ? `[\`${s.path}\`](#${keyAnchor.get(s.path)})` : `\`${s.path}\` (as [\`${s.canonical}\`](#${keyAnchor.get(s.canonical)}))`;
      return `| ${key} | ${cell(s.type)} | ${cell(defaultWords(s))} |`;
    });
    out.splice(tableAt, 0, ...rows);
  };
  for (const g of groups) renderGroup(g);

  heading(2, "Secret settings");
  out.push(
    `The program reads these apart from the deployment, always as Pulumi secrets: set each with \`--secret\` (encrypted with the stack's passphrase or KMS key in its stack file; docs/design/pulumi.md, "Secrets and the passphrase"). A secret anywhere else in the \`${CONFIG_NAMESPACE}\` namespace is refused, and so is a secret-looking flag in \`model.extraArgs\` or variable in \`service.environment\`.`,
    "",
    "| Key | What it does | How to set it |",
    "|---|---|---|",
    ...secrets.map((s) => {
      const how = s.key === "sshPrivateKey" ? `npx pulumi config set --secret --stack <stack> ${s.key} < ~/.ssh/id_ed25519` : `npx pulumi config set --secret --stack <stack> ${s.key}`;
      return `| \`${s.key}\` | ${cell(descriptionText(s.description, { kind: "optional" }).replace(/\n\n/g, " "))} | \`${cell(how)}\` |`;
    }),
    "",
    "Without a value on the command line, Pulumi asks for it (so it stays out of the shell's history); the SSH key is read from the file on standard input.",
    "",
  );

  heading(2, `Per-checkout overlay: \`${OVERLAY_FILE}\``);
  const overlayKeys = Object.entries(OVERLAY_KEYS).flatMap(([section, keys]) => keys.map((k) => `\`${section}.${k}\``));
  out.push(
    `\`${OVERLAY_FILE}\` in the project folder (git-ignored) holds where this checkout's stacks run, which would otherwise be written into the reviewed stack files. The program merges it over the stack's configuration key by key (unlike a stack file, it replaces no whole section), under \`all:\` for every stack and \`stacks: {<stack>: ...}\` for one (over \`all\`). Only these keys may be set there: ${overlayKeys.join(", ")}; anything else, a secret included, is refused naming the key. \`DFLASH_LOCAL_OVERLAY=off\` ignores the file.`,
    "",
    "```yaml",
    `# ${OVERLAY_FILE}`,
    "all:",
    `  host: {address: 10.0.0.5, hostKey: "ssh-ed25519 AAAA..."}`,
    "stacks:",
    "  b16t4-w2048:",
    "    service: {port: 30000, listenAddress: 127.0.0.1}",
    "```",
    "",
  );

  for (const g of unread) renderGroup(g);

  const intro = [
    "# Configuration reference",
    "",
    "<!-- Generated by `npm run config-reference` (scripts/config-reference.ts) from the zod schemas and their TSDoc; do not edit by hand. -->",
    "",
    `Every setting of a stack: its type, its default or whether it is required, what it does, and how to set it. Generated from the zod schemas (components/sglang-service/schema.ts, components/benchmark/schema.ts, components/verdict/schema.ts) and the TSDoc of each key by \`npm run config-reference\`; a test fails when this file is stale.`,
    "",
    "## Contents",
    "",
    ...toc,
    "",
  ];
  return `${[...intro, ...out].join("\n").replace(/\n{3,}/g, "\n\n").trimEnd()}\n`;
}
