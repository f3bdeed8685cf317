// How every script of this project starts: it parses its command line first (the one
// parser, simhost/command-line.ts, which lives in simhost/ because simhost/ imports nothing
// from outside itself), so that --help and a refused command line end the process before
// anything happens, and only then sets up the machine.
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { REPO_ROOT } from "./pulumi-env";
import type { ValueType } from "../simhost/command-line";

export * from "../simhost/command-line";

/**
 * A path type whose relative paths start at the project folder (where `npm run` runs
 * scripts, whatever folder it was typed in); the value is the absolute path.
 */
export function inProjectFolder<T>(type: ValueType<T>): ValueType<T> {
  return { expects: `${type.expects}, relative to the project folder`, parse: (text) => type.parse(text === "" ? "" : path.resolve(REPO_ROOT, text)) };
}

/** A pattern of stack names, as --stacks takes it. */
export const stackPattern: ValueType<string> = {
  expects: "a pattern of stack names (* any characters, ? one)",
  parse(glob) {
    if (glob === "") throw new Error("");
    return glob;
  },
};

/**
 * Runs scripts/setup.sh: npm dependencies, the pinned Pulumi toolchain, bubblewrap and,
 * with `hosts`, the simulated hosts' image and compiled simulators. Each step is cached;
 * on a fresh machine this takes minutes. Throws if set-up fails.
 */
export function setUp(what: { hosts: boolean }): void {
  const args = [path.join(REPO_ROOT, "scripts", "setup.sh"), ...(what.hosts ? [] : ["--no-hosts"])];
  const run = spawnSync("bash", args, { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"] });
  if (run.error) throw new Error(`could not run set-up (bash ${args.join(" ")}): ${run.error.message}`);
  if (run.status !== 0) {
    throw new Error(`set-up failed (bash ${args.join(" ")} ended with ${run.status ?? run.signal}); its output above says where; fix that and run the command again`);
  }
}
