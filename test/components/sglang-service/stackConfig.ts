// Reads the committed configuration the way Pulumi combines it: project config from
// Pulumi.yaml (`key: {value: ...}` or the short `key: value`), then a stack file from
// stacks/, whose keys replace the project's. Shared by the schema and render tests.
import * as fs from "node:fs";
import * as path from "node:path";
import { parse } from "yaml";
import { CONFIG_NAMESPACE } from "../../../components/sglang-service/schema";
import { projectConfig } from "../../../lib/workspace";
import { REPO_ROOT } from "../../../lib/pulumi-env";

const STACKS_DIR = path.join(REPO_ROOT, "stacks");

/** An address the schema accepts, in place of the committed `.invalid` placeholder. */
export const TEST_ADDRESS = "127.0.0.10";

/** Stack names from the stack files in stacks/, sorted. */
export function stackNames(): string[] {
  return fs
    .readdirSync(STACKS_DIR)
    .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
    .filter((s): s is string => s !== undefined)
    .sort();
}

function configSection(file: string): Record<string, unknown> {
  const doc = parse(fs.readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
  return doc?.config ?? {};
}

function withoutNamespace(key: string): string {
  const prefix = `${CONFIG_NAMESPACE}:`;
  if (!key.startsWith(prefix)) throw new Error(`config key ${key} is outside the ${CONFIG_NAMESPACE} namespace`);
  return key.slice(prefix.length);
}

/** Project config: each key's `value` (long form) or the value itself (short form). */
export { projectConfig };

/** The raw config a stack sees: project config with the stack file's keys replacing it. */
export function stackConfig(stack: string): Record<string, unknown> {
  const raw = projectConfig();
  for (const [key, value] of Object.entries(configSection(path.join(STACKS_DIR, `Pulumi.${stack}.yaml`)))) {
    raw[withoutNamespace(key)] = value;
  }
  return raw;
}

/** A copy of raw config with host.address set to TEST_ADDRESS (the committed one is a placeholder). */
export function withTestAddress(raw: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(raw);
  copy.host = { ...(copy.host as Record<string, unknown>), address: TEST_ADDRESS };
  return copy;
}

/** The stack's config as committed, with a usable host.address. */
export function testStackConfig(stack: string): Record<string, unknown> {
  return withTestAddress(stackConfig(stack));
}
