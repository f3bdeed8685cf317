// The environment the project's scripts give the Pulumi CLI, taken from
// scripts/pulumi-env.sh so there is one definition of the embedded defaults.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { PulumiCommand } from "@pulumi/pulumi/automation";

export const REPO_ROOT = path.resolve(__dirname, "..");

let cached: Record<string, string> | undefined;

/** Builds or finds the pinned toolchain (see toolchain/ensure.sh) and returns the env to run it with. */
export function pulumiEnv(overrides: Record<string, string> = {}): Record<string, string> {
  if (!cached) {
    const out = execFileSync("bash", ["-c", '. scripts/pulumi-env.sh && env -0'], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 16 * 1024 * 1024,
    });
    cached = {};
    for (const entry of out.split("\0")) {
      const eq = entry.indexOf("=");
      if (eq > 0) cached[entry.slice(0, eq)] = entry.slice(eq + 1);
    }
  }
  return { ...cached, ...overrides };
}

/** The pinned CLI for the Automation API (which otherwise looks `pulumi` up on its own PATH). */
export async function pulumiCommand(): Promise<PulumiCommand> {
  const env = pulumiEnv();
  const binDir = env.PATH.split(":")[0];
  return PulumiCommand.get({ root: path.dirname(binDir), skipVersionCheck: true });
}
