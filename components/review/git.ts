// The git reads a review makes (review.ts, pull-request.ts): one place for each.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { readConfigYaml } from "./one-reader";

export function git(dir: string, args: string[]): string {
  return execFileSync("git", args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** The full hash of the commit `rev` names, or undefined when it names none. */
export function commitOf(dir: string, rev: string): string | undefined {
  try {
    return git(dir, ["rev-parse", "--verify", "--quiet", `${rev}^{commit}`]).trim();
  } catch {
    return undefined;
  }
}

/** A file of the project at a revision, or undefined where it has none. */
export function atRevision(dir: string, rev: string, file: string): string | undefined {
  try {
    return execFileSync("git", ["show", `${rev}:./${file}`], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return undefined;
  }
}

/** The project's stacks folder, relative to it (Pulumi.yaml's stackConfigDir), "." for the project folder. */
export function stacksDirOf(projectText: string | undefined, file = "Pulumi.yaml"): string {
  const dir = ((readConfigYaml(projectText ?? "", file) ?? {}) as { stackConfigDir?: string }).stackConfigDir ?? ".";
  return path.normalize(dir).replace(/\/+$/, "") || ".";
}
