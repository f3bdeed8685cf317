// The per-operator overlay: `dflash.local.yaml` in the project folder, git-ignored. It holds
// where this operator's stacks run (a simulated host's loopback address, a key path under
// /run, a host key), which would otherwise be written into the committed stack files. The
// program merges it, key by key, over the stack's configuration: what a stack runs stays in
// the reviewed stack files; only where it runs may come from here. Pure but for readOverlay.
//
// Only how to reach the host and where the server listens (OVERLAY_KEYS).
//
//   # every stack of this checkout
//   all:
//     host: {address: 10.0.0.5, hostKey: "ssh-ed25519 AAAA..."}
//   # one stack (over `all`)
//   stacks:
//     b16t4-w2048:
//       host: {address: 127.0.0.10, port: 22, privateKeyPath: /run/dflash-simhost/h1/id_ed25519}
//       service: {port: 30000, listenAddress: 127.0.0.10}
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { closest } from "../../simhost/command-line";

export const OVERLAY_FILE = "dflash.local.yaml";

/** The keys an overlay may set: where a stack runs (how to reach the host, where the server listens), not what it runs. */
export const OVERLAY_KEYS = { host: ["address", "port", "user", "become", "privateKeyPath", "hostKey"], service: ["listenAddress", "port", "distInitPort"] } as const;
export const OVERLAY_SECTIONS = Object.keys(OVERLAY_KEYS) as (keyof typeof OVERLAY_KEYS)[];
export type OverlaySettings = Partial<Record<keyof typeof OVERLAY_KEYS, unknown>>;

export interface Overlay {
  all: OverlaySettings;
  stacks: Record<string, OverlaySettings>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Pure: an overlay's text, validated. Unknown input is refused with the file, the key and what
 * is valid: a top-level key other than `all` and `stacks`, a key other than OVERLAY_KEYS' (how
 * to reach the host, where the server listens: what runs, a group's nodes included, stays in the
 * reviewed stack files; a secret belongs in the stack's encrypted configuration), a stack the
 * project has no stack file for.
 */
export function parseOverlay(text: string, knownStacks: readonly string[]): Overlay {
  let doc: unknown;
  try {
    doc = YAML.parse(text);
  } catch (e) {
    throw new Error(`${OVERLAY_FILE} is not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  if (doc === null || doc === undefined) return { all: {}, stacks: {} };
  if (!isObject(doc)) throw new Error(`${OVERLAY_FILE} must be a mapping with the keys all and stacks`);
  const problems: string[] = [];
  for (const k of Object.keys(doc)) if (k !== "all" && k !== "stacks") problems.push(`${k}: is not a key of ${OVERLAY_FILE} (valid: all, stacks)`);
  const sections = (where: string, v: unknown): OverlaySettings => {
    if (v === undefined || v === null) return {};
    if (!isObject(v)) {
      problems.push(`${where}: must be a mapping of sections (${OVERLAY_SECTIONS.join(", ")})`);
      return {};
    }
    for (const [k, s] of Object.entries(v)) {
      if (!(OVERLAY_SECTIONS as readonly string[]).includes(k)) {
        const what = ["apiKey", "hfToken", "sshPrivateKey"].includes(k)
          ? "is a secret: it belongs in the stack's encrypted configuration (`npx pulumi config set --secret`), not in a plain file"
          : (() => {
              const guess = closest(k, [...OVERLAY_SECTIONS]);
              return `is not a per-operator setting${guess ? `; did you mean ${guess}?` : ""} (valid: ${OVERLAY_SECTIONS.join(", ")}: where a stack runs; what it runs stays in the reviewed stack files)`;
            })();
        problems.push(`${where}.${k}: ${what}`);
      } else if (!isObject(s)) problems.push(`${where}.${k}: must be a mapping (its keys are merged over the stack's ${k})`);
      else {
        const valid = OVERLAY_KEYS[k as keyof typeof OVERLAY_KEYS] as readonly string[];
        for (const key of Object.keys(s)) {
          if (valid.includes(key)) continue;
          const guess = closest(key, [...valid]);
          problems.push(`${where}.${k}.${key}: is not a per-operator setting${guess ? `; did you mean ${k}.${guess}?` : ""} (valid: ${valid.map((v) => `${k}.${v}`).join(", ")}; the rest of ${k} stays in the reviewed stack files)`);
        }
      }
    }
    return v as OverlaySettings;
  };
  const all = sections("all", doc.all);
  const stacks: Record<string, OverlaySettings> = {};
  if (doc.stacks !== undefined && doc.stacks !== null && !isObject(doc.stacks)) problems.push("stacks: must be a mapping of stack names");
  else
    for (const [name, v] of Object.entries((doc.stacks as Record<string, unknown> | undefined) ?? {})) {
      if (!knownStacks.includes(name)) {
        const guess = closest(name, [...knownStacks]);
        problems.push(`stacks.${name}: is no stack of this project${guess ? `; did you mean ${guess}?` : ""} (stacks with a file in stacks/: ${knownStacks.join(", ") || "none"})`);
      }
      stacks[name] = sections(`stacks.${name}`, v);
    }
  if (problems.length) throw new Error(`${OVERLAY_FILE} (per-operator settings, merged over every stack's configuration) is invalid:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  return { all, stacks };
}

/** Pure: `over` merged over `base`: mappings key by key, anything else (a list, a value) replaced. */
export function mergeSettings(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = mergeSettings(base[k], v);
  return out;
}

/** Pure: what the overlay sets for `stack` (`all`, then the stack's own entry over it). */
export function overlayFor(o: Overlay, stack: string): OverlaySettings {
  return mergeSettings(o.all, o.stacks[stack] ?? {}) as OverlaySettings;
}

/** Pure: the dotted keys an overlay's settings set (`host.address`), for saying what came from it. */
export function overlayKeys(s: OverlaySettings): string[] {
  const out: string[] = [];
  const walk = (prefix: string, v: unknown) => {
    if (isObject(v) && prefix.split(".").length < 2) for (const [k, x] of Object.entries(v)) walk(`${prefix}.${k}`, x);
    else out.push(prefix);
  };
  for (const [k, v] of Object.entries(s)) walk(k, v);
  return out.sort();
}

/**
 * The overlay of the project folder `dir` (the program's working folder) for a run of stack
 * `stack` (a stack may exist before its file does), or undefined when there is none. Throws,
 * saying what is wrong, when it is invalid.
 */
export function readOverlay(dir: string, stack: string): Overlay | undefined {
  const file = path.join(dir, OVERLAY_FILE);
  if (!fs.existsSync(file)) return undefined;
  let stacks: string[] = [];
  try {
    stacks = fs.readdirSync(path.join(dir, "stacks")).flatMap((f) => f.match(/^Pulumi\.(.+)\.yaml$/)?.[1] ?? []).sort();
  } catch {
    stacks = [];
  }
  return parseOverlay(fs.readFileSync(file, "utf8"), [...new Set([...stacks, stack])].sort());
}
