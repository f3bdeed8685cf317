// The engine's own reading of a project's and a stack's configuration, as the authority the
// review's reading must equal (issue 58: one reader). one-reader.ts keeps the files to a subset
// Go's yaml.v3 and the `yaml` library read alike; Pulumi adds readings of its own on top (a key
// without a namespace is the project's, a project setting's `default:` is its value), and a
// subset can miss a form. So each configuration file the review decides from is also read by
// the pinned engine (`pulumi config --json`), in a scratch project of its own that holds nothing
// but that file and Pulumi.yaml: no program runs, no credential is in its environment, its
// backend is a scratch folder. A file the two read differently is refused, naming the setting.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { configValue } from "../sglang-service/config-value";
import { CONFIG_NAMESPACE } from "../sglang-service/schema";
import { pulumiEnv } from "../../lib/pulumi-env";
import { stacksDirOf } from "./git";
import { canonicalJson } from "./record";

/** A secret setting as the engine shows it without decrypting: that it is secret, not its value. */
export const SECRET = "<secret>";

/** The configuration of one stack as the engine reads it (keys of our namespace without it), or why it cannot. */
export type EngineReading = { config: Record<string, unknown> } | { error: string };

let scratch: { dir: string; env: Record<string, string> } | undefined;

/** The scratch project (made once per process, removed at exit): its own backend, a stack "s", no credentials. */
function scratchProject(): { dir: string; env: Record<string, string> } {
  if (scratch) return scratch;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-engine-reading-"));
  process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
  const inherited = pulumiEnv();
  // Only what the CLI needs to run; nothing of the review's backend, passphrase or keys.
  const env: Record<string, string> = {
    PATH: inherited.PATH,
    HOME: dir,
    PULUMI_HOME: path.join(dir, ".pulumi"),
    PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`,
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
  };
  fs.mkdirSync(path.join(dir, "state"));
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), `name: ${CONFIG_NAMESPACE}\nruntime: nodejs\n`);
  const init = spawnSync("pulumi", ["stack", "init", "s", "--non-interactive"], { cwd: dir, env: { ...env, PULUMI_CONFIG_PASSPHRASE: "scratch" }, encoding: "utf8" });
  if (init.status !== 0) throw new Error(`cannot make a scratch project for Pulumi's reading of the configuration in ${dir}: ${(init.stderr || init.stdout).trim()}`);
  scratch = { dir, env };
  return scratch;
}

/** Pure: the engine's `config --json` output as the program gets it (keys of our namespace without it, others whole; secrets as SECRET). */
export function readingOf(json: string): Record<string, unknown> {
  const all = JSON.parse(json) as Record<string, { value?: string; objectValue?: unknown; secret?: boolean }>;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(all)) {
    const name = key.startsWith(`${CONFIG_NAMESPACE}:`) ? key.slice(CONFIG_NAMESPACE.length + 1) : key;
    out[name] = v.secret ? SECRET : v.objectValue !== undefined ? v.objectValue : configValue(v.value);
  }
  return out;
}

/** The engine's reading of `project` (Pulumi.yaml's text) with `stack` (a stack file's text) as the stack's file. */
export function engineReading(project: string, stack: string | undefined): EngineReading {
  const { dir, env } = scratchProject();
  const stacksDir = path.join(dir, stacksDirOf(project));
  fs.mkdirSync(stacksDir, { recursive: true });
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), project);
  // Without the keys that say how secrets are kept (a KMS URL would be dialled): they change no setting.
  fs.writeFileSync(path.join(stacksDir, "Pulumi.s.yaml"), (stack ?? "").replace(/^(secretsprovider|encryptedkey|encryptionsalt):[^\n]*\n/gm, ""));
  const r = spawnSync("pulumi", ["config", "--json", "--stack", "s", "--non-interactive"], { cwd: dir, env, encoding: "utf8" });
  if (r.status !== 0) return { error: (r.stderr || r.stdout).trim().replace(new RegExp(dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "g"), ".") };
  return { config: readingOf(r.stdout) };
}

/** A setting as the review reads it, with secret values (`{secure: ...}` at any depth) as SECRET where the engine shows only that. */
function comparable(value: unknown): unknown {
  const isSecure = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 1 && "secure" in v;
  const holdsSecure = (v: unknown): boolean => isSecure(v) || (typeof v === "object" && v !== null && Object.values(v).some(holdsSecure));
  return holdsSecure(value) ? SECRET : value;
}

/**
 * Pure: the settings the review and the engine read differently, one line each
 * ("host: Pulumi reads {...}, the review {...}"); empty when they agree.
 */
export function disagreements(review: Record<string, unknown>, engine: Record<string, unknown>): string[] {
  const shown = (v: unknown) => (v === undefined ? "nothing" : canonicalJson(v).slice(0, 120));
  const keys = [...new Set([...Object.keys(review), ...Object.keys(engine)])].sort();
  return keys.filter((k) => canonicalJson(comparable(review[k])) !== canonicalJson(engine[k])).map((k) => `${k}: Pulumi reads ${shown(engine[k])}, the review ${shown(comparable(review[k]))}`);
}

/**
 * Refuses configuration the engine reads otherwise than the review: `review` is the review's
 * reading of `project` with `stack` (change.ts), `files` names them in the message.
 */
export function refuseUnlessEngineAgrees(project: string, stack: string | undefined, review: Record<string, unknown>, files: string): void {
  const engine = engineReading(project, stack);
  if ("error" in engine) throw new Error(`${files}: Pulumi cannot read this configuration (${engine.error.split("\n").slice(0, 3).join(" ")}); fix it; nothing was previewed or changed`);
  const differ = disagreements(review, engine.config);
  if (differ.length) {
    throw new Error(`${files}: Pulumi and the review read this configuration differently, so the review cannot say what it does:\n${differ.map((d) => `  - ${d}`).join("\n")}\nWrite each of these settings plainly (one key per setting, values in plain YAML); nothing was previewed or changed`);
  }
}
