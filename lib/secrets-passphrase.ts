// The secrets passphrase of the project's Pulumi commands: an empty one is refused, and a
// stack whose secrets were encrypted with the empty passphrase (by an earlier version of
// this project, which defaulted to it, or by an empty answer at Pulumi's prompt) is found
// and reported with the steps to rotate. An empty passphrase protects nothing: anyone who
// can read a committed stack file decrypts its `secure:` values.
//
// Pulumi's passphrase secrets manager (pkg/secrets/passphrase) keeps, as `encryptionsalt`,
// `v1:<salt>:v1:<nonce>:<sealed>` (base64 parts): the text "pulumi" sealed with AES-256-GCM
// under a key PBKDF2-SHA256(passphrase, salt, 1,000,000 rounds, 32 bytes). A passphrase is
// the stack's one when that opens; so is "" for a stack encrypted with the empty one.
import { createDecipheriv, createHash, pbkdf2Sync } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";

const PBKDF2_ROUNDS = 1_000_000;
const KEY_BYTES = 32;
const GCM_TAG_BYTES = 16;
const VERIFICATION_TEXT = "pulumi";

/** Thrown for an `encryptionsalt` value that is not Pulumi's format; says what it expected. */
export class MalformedSaltError extends Error {}

interface SealedSalt {
  salt: Buffer;
  nonce: Buffer;
  sealed: Buffer;
}

/** Pure: the parts of an `encryptionsalt` value. */
export function parseEncryptionSalt(value: string): SealedSalt {
  const parts = value.split(":");
  if (parts.length !== 5 || parts[0] !== "v1" || parts[2] !== "v1") {
    throw new MalformedSaltError(`not a Pulumi encryptionsalt (expected v1:<salt>:v1:<nonce>:<sealed>, base64): ${JSON.stringify(value.slice(0, 80))}`);
  }
  const [salt, nonce, sealed] = [parts[1], parts[3], parts[4]].map((b64) => Buffer.from(b64, "base64"));
  if (sealed.length <= GCM_TAG_BYTES || nonce.length === 0 || salt.length === 0) {
    throw new MalformedSaltError(`not a Pulumi encryptionsalt (a part is empty or too short): ${JSON.stringify(value.slice(0, 80))}`);
  }
  return { salt, nonce, sealed };
}

/** Whether `passphrase` opens this `encryptionsalt` (takes about a second: Pulumi's 1,000,000 PBKDF2 rounds). */
export function saltOpensWith(value: string, passphrase: string): boolean {
  const { salt, nonce, sealed } = parseEncryptionSalt(value);
  const key = pbkdf2Sync(passphrase, salt, PBKDF2_ROUNDS, KEY_BYTES, "sha256");
  const decipher = createDecipheriv("aes-256-gcm", key, nonce);
  decipher.setAuthTag(sealed.subarray(sealed.length - GCM_TAG_BYTES));
  try {
    const text = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - GCM_TAG_BYTES)), decipher.final()]).toString("utf8");
    return text === VERIFICATION_TEXT;
  } catch {
    return false;
  }
}

/**
 * Whether the empty passphrase opens this `encryptionsalt`. The answer depends on the value
 * alone, so it is remembered (by the value's sha256) in `cacheFile`: a command pays the
 * second of PBKDF2 once per salt, not once per run.
 */
export function saltOpensWithEmptyPassphrase(value: string, cacheFile = defaultCacheFile()): boolean {
  const id = createHash("sha256").update(value).digest("hex");
  let cache: Record<string, boolean> = {};
  try {
    cache = JSON.parse(fs.readFileSync(cacheFile, "utf8")) as Record<string, boolean>;
  } catch {
    // no cache yet, or an unreadable one: start afresh
  }
  if (typeof cache[id] === "boolean") return cache[id];
  const opens = saltOpensWith(value, "");
  try {
    fs.mkdirSync(path.dirname(cacheFile), { recursive: true });
    const tmp = `${cacheFile}.${process.pid}`;
    fs.writeFileSync(tmp, JSON.stringify({ ...cache, [id]: opens }));
    fs.renameSync(tmp, cacheFile);
  } catch {
    // the cache is an optimisation; the answer stands without it
  }
  return opens;
}

/** DFLASH_SALT_CHECK_CACHE, else beside the toolchain's cache (toolchain/ensure.sh). */
function defaultCacheFile(): string {
  if (process.env.DFLASH_SALT_CHECK_CACHE) return process.env.DFLASH_SALT_CHECK_CACHE;
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
  return path.join(base, "dflash-pulumi", "empty-passphrase-salts.json");
}

/**
 * Pure: why the passphrase this environment gives Pulumi must be refused, or undefined.
 * Only an empty one is: a set but empty PULUMI_CONFIG_PASSPHRASE (Pulumi would use it), or a
 * PULUMI_CONFIG_PASSPHRASE_FILE that is empty or cannot be read. Neither set is not refused here: Pulumi then
 * asks at a terminal, and refuses without one, when a stack needs a passphrase.
 */
export function emptyPassphraseRefusal(env: NodeJS.ProcessEnv, readFile: (file: string) => string = (f) => fs.readFileSync(f, "utf8")): string | undefined {
  const file = env.PULUMI_CONFIG_PASSPHRASE_FILE;
  const fix =
    "An empty passphrase protects nothing: anyone who can read a stack file (every clone) decrypts its secrets. " +
    "Set PULUMI_CONFIG_PASSPHRASE to a real passphrase (or PULUMI_CONFIG_PASSPHRASE_FILE to a file holding one), " +
    "unset both to be asked at the terminal, or give the stack a KMS or Vault secrets provider " +
    "(npx pulumi stack change-secrets-provider 'awskms://alias/NAME?region=REGION' --stack STACK).";
  if (env.PULUMI_CONFIG_PASSPHRASE === "") {
    return `refused: PULUMI_CONFIG_PASSPHRASE is set but empty. ${fix}`;
  }
  if (file) {
    let text: string;
    try {
      text = readFile(file);
    } catch (err) {
      return `refused: PULUMI_CONFIG_PASSPHRASE_FILE=${file} cannot be read (${(err as Error).message}). Point it at a file holding the passphrase.`;
    }
    // A file of nothing but whitespace (a newline from `echo >`) holds no passphrase worth the name.
    if (text.trim() === "") return `refused: PULUMI_CONFIG_PASSPHRASE_FILE=${file} is empty. ${fix}`;
  }
  return undefined;
}

/**
 * Pure: why a workspace whose new stacks take a passphrase cannot start, or undefined: neither
 * PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is set (a sweep's engine runs
 * without a terminal, where Pulumi would refuse each stack in turn, after set-up).
 */
export function missingPassphrase(env: NodeJS.ProcessEnv): string | undefined {
  if (env.PULUMI_CONFIG_PASSPHRASE !== undefined || env.PULUMI_CONFIG_PASSPHRASE_FILE) return undefined;
  return "refused: a sweep on real hosts keeps its stacks' secrets with your passphrase, and none is set: export PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE).";
}

/** A stack whose secrets open with the empty passphrase, and where that was found. */
export interface LeakedStack {
  stack: string;
  /** The stack file, or the state file of a file:// backend, that holds the salt. */
  file: string;
}

/**
 * The Pulumi project a command run in `cwd` uses (the nearest folder holding Pulumi.yaml, as
 * Pulumi finds it) and the folder of its stack files (its `stackConfigDir`); undefined outside one.
 */
export function projectOf(cwd: string): { projectDir: string; stacksDir: string } | undefined {
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    const file = ["Pulumi.yaml", "Pulumi.yml"].map((f) => path.join(dir, f)).find((f) => fs.existsSync(f));
    if (file) {
      const stackConfigDir = (YAML.parse(fs.readFileSync(file, "utf8")) as { stackConfigDir?: unknown } | null)?.stackConfigDir;
      return { projectDir: dir, stacksDir: path.resolve(dir, typeof stackConfigDir === "string" ? stackConfigDir : ".") };
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * Every stack whose secrets open with the empty passphrase: the `encryptionsalt` of each
 * `Pulumi.<stack>.yaml` in `stacksDir`, and, for a file:// backend, the salt in each stack's
 * state (which a stack file without its own takes, see PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER).
 * Stacks with a KMS or Vault provider have no salt.
 */
export function stacksWithEmptyPassphrase(stacksDir: string, backendUrl: string | undefined, cacheFile?: string): LeakedStack[] {
  const leaks: LeakedStack[] = [];
  const names = fs.existsSync(stacksDir) ? fs.readdirSync(stacksDir).sort() : [];
  for (const name of names) {
    const stack = /^Pulumi\.(.+)\.ya?ml$/.exec(name)?.[1];
    if (!stack) continue;
    const file = path.join(stacksDir, name);
    const salt = (YAML.parse(fs.readFileSync(file, "utf8")) as { encryptionsalt?: unknown } | null)?.encryptionsalt;
    if (typeof salt === "string" && saltOpensWithEmptyPassphrase(salt, cacheFile)) leaks.push({ stack, file });
  }
  const stateDir = backendUrl?.startsWith("file://") ? path.join(backendUrl.slice("file://".length), ".pulumi", "stacks") : undefined;
  for (const { stack, file } of stateFiles(stateDir)) {
    const salt = stateSalt(file);
    if (salt !== undefined && !leaks.some((l) => l.stack === stack) && saltOpensWithEmptyPassphrase(salt, cacheFile)) leaks.push({ stack, file });
  }
  return leaks;
}

/** The state files of a file:// backend: .pulumi/stacks/<project>/<stack>.json. */
function stateFiles(stateDir: string | undefined): { stack: string; file: string }[] {
  if (!stateDir || !fs.existsSync(stateDir)) return [];
  const out: { stack: string; file: string }[] = [];
  for (const project of fs.readdirSync(stateDir).sort()) {
    const dir = path.join(stateDir, project);
    if (!fs.statSync(dir).isDirectory()) continue;
    for (const name of fs.readdirSync(dir).sort()) {
      const stack = /^(.+)\.json$/.exec(name)?.[1];
      if (stack) out.push({ stack, file: path.join(dir, name) });
    }
  }
  return out;
}

function stateSalt(file: string): string | undefined {
  try {
    const state = JSON.parse(fs.readFileSync(file, "utf8")) as { checkpoint?: { latest?: { secrets_providers?: { type?: string; state?: { salt?: unknown } } } } };
    const providers = state.checkpoint?.latest?.secrets_providers;
    return providers?.type === "passphrase" && typeof providers.state?.salt === "string" ? providers.state.salt : undefined;
  } catch {
    return undefined;
  }
}

/** Pure: what a command says about stacks whose secrets open with the empty passphrase, with the steps to rotate. */
export function renderLeakReport(leaks: LeakedStack[], projectDir: string): string {
  if (leaks.length === 0) return "";
  const lines = [
    `warning: the secrets of ${leaks.length === 1 ? "this stack open" : "these stacks open"} with the EMPTY passphrase: anyone who can read the file decrypts them (npx pulumi config get apiKey), so treat every secret in them (apiKey, hfToken, sshPrivateKey) as leaked:`,
    ...leaks.map((l) => `  ${l.stack}: ${path.relative(projectDir, l.file) || l.file}`),
    "To rotate, for each stack:",
    "  1. PULUMI_CONFIG_PASSPHRASE= npx pulumi stack change-secrets-provider passphrase --stack STACK",
    "     (it asks for a new passphrase at the terminal; or give a KMS key instead of `passphrase`: 'awskms://alias/NAME?region=REGION')",
    "  2. export PULUMI_CONFIG_PASSPHRASE='the new passphrase'   (or PULUMI_CONFIG_PASSPHRASE_FILE)",
    "  3. npx pulumi config set --secret --stack STACK apiKey NEW-KEY   (a new key: the old one is known; the same for hfToken, sshPrivateKey)",
    "  4. npx pulumi up --stack STACK   (the server restarts with the new key), then commit the stack file",
  ];
  return `${lines.join("\n")}\n`;
}
