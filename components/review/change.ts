// Pure: what a change of the project's files means for its stacks, before anything is
// previewed: which stacks it touches, and what changed in each one's configuration, in words
// a reviewer reads at a glance ("budget 8 -> 16", "window 2048 -> none", "apiKey rotated").
import { configValue } from "../sglang-service/config-value";
import { CONFIG_NAMESPACE } from "../sglang-service/schema";
import { AmbiguousYaml, readConfigYaml } from "./one-reader";

/**
 * A top-level value as the program gets it: Pulumi passes text on (an empty one for null), which
 * the program reads as JSON where it is JSON ("600" is 600).
 */
const asTheProgramReadsIt = (v: unknown) => (v === null ? "" : typeof v === "string" ? configValue(v) : v);
import { maskSecrets, SECRET_LIKE } from "./redact";

const NS = CONFIG_NAMESPACE;

/** Why a stack is in a review. */
export type TouchedBecause = "stack file changed" | "new stack file" | "project config changed" | "program changed" | "named";

/**
 * Pure: whether a path (relative to the project folder) is part of the program every stack
 * runs: its entry point, its components, its dependencies. A change there may restart every host.
 */
export function isProgramFile(file: string): boolean {
  return file === "index.ts" || file === "package.json" || file === "package-lock.json" || file === "tsconfig.json" || file.startsWith("components/") || file.startsWith("lib/");
}

export interface Touched {
  stack: string;
  because: TouchedBecause;
}

export interface TouchedStacks {
  touched: Touched[];
  /** Stack files the change deletes: nothing previews them; their hosts keep what they run. */
  removed: string[];
}

/** The stack a path names (`<stacksDir>/Pulumi.<stack>.yaml`), if any. */
export function stackOfPath(file: string, stacksDir: string): string | undefined {
  const prefix = stacksDir === "" || stacksDir === "." ? "" : `${stacksDir.replace(/\/+$/, "")}/`;
  if (!file.startsWith(prefix)) return undefined;
  return /^Pulumi\.([^/]+)\.yaml$/.exec(file.slice(prefix.length))?.[1];
}

/**
 * Pure: the stacks a change touches. `changed`: paths (relative to the project folder) that
 * differ between the base and the working tree; `stacks`: the stack files there now;
 * `named`: stacks named by the reviewer (--stacks). A change of Pulumi.yaml touches every stack
 * (its config is every stack's, and its program settings too).
 */
export function touchedStacks(changed: readonly string[], stacks: readonly string[], stacksDir: string, named: (stack: string) => boolean = () => false, baseStacks: readonly string[] = stacks): TouchedStacks {
  const project = changed.includes("Pulumi.yaml");
  const program = changed.some(isProgramFile);
  const fileChanged = new Set(changed.map((f) => stackOfPath(f, stacksDir)).filter((s): s is string => s !== undefined));
  const touched: Touched[] = [];
  for (const stack of [...stacks].sort()) {
    if (fileChanged.has(stack)) touched.push({ stack, because: baseStacks.includes(stack) ? "stack file changed" : "new stack file" });
    else if (project) touched.push({ stack, because: "project config changed" });
    else if (program) touched.push({ stack, because: "program changed" });
    else if (named(stack)) touched.push({ stack, because: "named" });
  }
  const removed = [...fileChanged].filter((s) => !stacks.includes(s)).sort();
  return { touched, removed };
}

/**
 * Pulumi.yaml's `config` (long `{value: ...}` or short form), keys without the namespace.
 * `file` names it in the refusal of a file the engine could read otherwise (one-reader.ts).
 */
export function projectConfigOf(text: string | undefined, file = "Pulumi.yaml"): Record<string, unknown> {
  if (text === undefined) return {};
  const doc = (readConfigYaml(text, file) ?? {}) as { config?: Record<string, unknown> };
  const out: Record<string, unknown> = {};
  for (const [key, entry] of namedOnce(doc.config ?? {}, text, file)) {
    // A declaration (Pulumi's project config type): its value, else its default; with neither it sets nothing.
    const declaration = typeof entry === "object" && entry !== null && !Array.isArray(entry) && Object.keys(entry).every((k) => DECLARATION_KEYS.has(k));
    const value = declaration ? ((entry as { value?: unknown; default?: unknown }).value ?? (entry as { default?: unknown }).default) : entry;
    if (declaration && (value === null || value === undefined)) continue;
    out[key] = asTheProgramReadsIt(value);
  }
  return out;
}

/** The fields of a setting's declaration in Pulumi.yaml (Pulumi's project config type). */
const DECLARATION_KEYS = new Set(["type", "description", "items", "default", "value", "secret"]);

/**
 * A config section's entries, keys without our namespace: Pulumi reads a key without a namespace
 * as the project's, so `host` and `dflash-sglang:host` name one setting; both given is refused
 * (Pulumi keeps one of them, not always the last).
 */
function namedOnce(config: Record<string, unknown>, text: string, file: string): [string, unknown][] {
  const seen = new Map<string, string>();
  return Object.entries(config).map(([key, v]) => {
    const name = key.startsWith(`${NS}:`) ? key.slice(NS.length + 1) : key;
    const other = seen.get(name);
    if (other !== undefined) {
      // Where the second one is written (a key at the start of its line, quoted or not).
      const at = new RegExp(`^[ ]*["']?${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}["']?[ ]*:`, "m").exec(text);
      const before = text.slice(0, at ? at.index + at[0].search(/\S/) : 0);
      throw new AmbiguousYaml(file, before.split("\n").length, before.length - before.lastIndexOf("\n"), `"${other}" and "${key}" name the same setting (Pulumi reads a key without a namespace as ${NS}'s, and keeps only one of them); keep one`);
    }
    seen.set(name, key);
    return [name, v];
  });
}

/** A stack file's `config`, keys without the namespace (`file` names it in a refusal, as in projectConfigOf). */
export function stackConfigOf(text: string | undefined, file: string): Record<string, unknown> {
  if (text === undefined) return {};
  const config = ((readConfigYaml(text, file) ?? {}) as { config?: Record<string, unknown> }).config ?? {};
  return Object.fromEntries(namedOnce(config, text, file).map(([k, v]) => [k, asTheProgramReadsIt(v)]));
}

/** Project config with a stack's keys replacing it, whole sections at a time (as Pulumi does). */
export function mergeConfig(project: Record<string, unknown>, stack: Record<string, unknown>): Record<string, unknown> {
  return { ...project, ...stack };
}

const isSecure = (v: unknown): v is { secure: string } => typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 1 && typeof (v as { secure?: unknown }).secure === "string";

/** Paths of a config value's leaves ("speculative.budget"), secure values as one leaf. */
function leaves(value: unknown, at: string, out: Map<string, unknown>): Map<string, unknown> {
  if (typeof value === "object" && value !== null && !Array.isArray(value) && !isSecure(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, at ? `${at}.${k}` : k, out);
  } else {
    out.set(at, value);
  }
  return out;
}

/** Short names reviewers use for the settings they change most. */
const SHORT_NAMES: Record<string, string> = {
  "speculative.algorithm": "algorithm",
  "speculative.budget": "budget",
  "speculative.topk": "topk",
  "speculative.draftWindowSize": "window",
  "speculative.compactCache": "compact cache",
  "speculative.draftTokens": "draft tokens",
  "model.tpSize": "tpSize",
};

function shown(v: unknown): string {
  if (v === undefined || v === null) return "none";
  // Values are quoted in code spans and warnings: no backtick or line break of their own.
  const text = maskSecrets(typeof v === "string" ? v : JSON.stringify(v)).replace(/`/g, "'").replace(/\s*\n\s*/g, " ");
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

export interface ConfigChange {
  /** The setting's path ("speculative.budget", "apiKey"). */
  key: string;
  /** In words: "budget 8 -> 16", "apiKey rotated". */
  words: string;
  /** A secret setting: its value never appears, only that it was set, rotated or removed. */
  secret: boolean;
}

/**
 * Pure: what changed between two merged configurations (the base's, undefined for a new stack,
 * and the working tree's), one entry per setting, in a stable order. Secret values never appear:
 * their ciphertexts differ, so "rotated" (a re-encryption of the same value reads the same way;
 * the preview then shows no restart, and the summary says so).
 */
export function configChanges(before: Record<string, unknown> | undefined, after: Record<string, unknown>): ConfigChange[] {
  const a = leaves(before ?? {}, "", new Map());
  const b = leaves(after, "", new Map());
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  const out: ConfigChange[] = [];
  for (const key of keys) {
    const was = a.get(key);
    const now = b.get(key);
    if (JSON.stringify(was) === JSON.stringify(now)) continue;
    // A secret setting, or a plain one named like a secret (service.environment.HF_TOKEN, which
    // the schema refuses; the review may run before anything validates it): named, never shown.
    const leaf = key.split(".").pop() ?? "";
    if (isSecure(was) || isSecure(now) || (SECRET_LIKE.test(leaf) && !/Path$/.test(leaf))) {
      const words = was === undefined ? `${key} set` : now === undefined ? `${key} removed` : isSecure(was) && isSecure(now) ? `${key} rotated` : `${key} changed`;
      out.push({ key, words, secret: true });
      continue;
    }
    const name = SHORT_NAMES[key] ?? key;
    out.push({ key, words: `${name} ${shown(was)} -> ${shown(now)}`, secret: false });
  }
  return out;
}

/** Pure: warnings a reviewer must see that the configuration alone shows. */
export function configWarnings(before: Record<string, unknown> | undefined, after: Record<string, unknown>): string[] {
  const get = (c: Record<string, unknown> | undefined, p: string) => p.split(".").reduce<unknown>((v, k) => (typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined), c);
  const out: string[] = [];
  if (get(after, "timeouts.drainPolicy") === "proceed") out.push("`timeouts.drainPolicy: proceed`: a restart cuts the requests still running when the drain deadline passes");
  if (before !== undefined) {
    const tp = [get(before, "model.tpSize"), get(after, "model.tpSize")];
    if (JSON.stringify(tp[0]) !== JSON.stringify(tp[1])) out.push(`tpSize changes (${shown(tp[0])} -> ${shown(tp[1])}): the model is split over a different number of GPUs`);
    const gpus = (c: Record<string, unknown> | undefined) => JSON.stringify([get(c, "service.environment.CUDA_VISIBLE_DEVICES"), (get(c, "nodes") as unknown[] | undefined)?.length ?? 0]);
    if (gpus(before) !== gpus(after)) out.push("the GPUs it runs on change (CUDA_VISIBLE_DEVICES or the nodes of the group)");
  }
  return out;
}
