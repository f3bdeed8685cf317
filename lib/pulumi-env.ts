// The environment the project's scripts give the Pulumi CLI, taken from
// scripts/pulumi-env.sh so there is one definition of the embedded defaults.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import type { PulumiCommand } from "@pulumi/pulumi/automation";

export const REPO_ROOT = path.resolve(__dirname, "..");

const cached = new Map<string, Record<string, string>>();

/**
 * Builds or finds the pinned toolchain (see toolchain/ensure.sh) and returns the env to run
 * it with. `root` is the project whose toolchain and defaults to use (another checkout of
 * this project, for a benchmark against an earlier version).
 */
export function pulumiEnv(overrides: Record<string, string> = {}, root = REPO_ROOT): Record<string, string> {
  let env = cached.get(root);
  if (!env) {
    const out = execFileSync("bash", ["-c", '. scripts/pulumi-env.sh && env -0'], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 16 * 1024 * 1024,
    });
    env = {};
    for (const entry of out.split("\0")) {
      const eq = entry.indexOf("=");
      if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
    }
    cached.set(root, env);
  }
  return { ...env, ...overrides };
}

/** The pinned CLI for the Automation API (which otherwise looks `pulumi` up on its own PATH). */
export async function pulumiCommand(root = REPO_ROOT): Promise<PulumiCommand> {
  const env = pulumiEnv({}, root);
  const binDir = env.PATH.split(":")[0];
  // Loaded here, not at the top: every script imports this module (for REPO_ROOT) before
  // it reads its command line, and the Automation API takes most of a second to load.
  const { PulumiCommand } = await import("@pulumi/pulumi/automation");
  return PulumiCommand.get({ root: path.dirname(binDir), skipVersionCheck: true });
}
