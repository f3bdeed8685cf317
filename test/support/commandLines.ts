// The project's commands run as a user runs them, for tests of their command lines. Every
// run has DFLASH_FORBID_SETUP=1, which makes set-up (scripts/setup.sh, simhost/prepare.sh)
// refuse to run and say so: a command line that should end before set-up cannot boot a
// host or build anything even when it wrongly goes on.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { STATE_ROOT, status as hostStatus } from "../../simhost/hosts";
import { REPO_ROOT } from "../../lib/pulumi-env";

export interface CommandRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** What set-up prints when DFLASH_FORBID_SETUP stopped it. */
export const SETUP_REFUSED = /(setup|simhost prepare): refused: DFLASH_FORBID_SETUP is set/;

function run(file: string, args: string[]): CommandRun {
  const r = spawnSync(file, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, DFLASH_FORBID_SETUP: "1" },
    encoding: "utf8",
    timeout: 60_000,
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A TypeScript script of the project (path from the project folder), as `tsx` runs it. */
export function runScript(script: string, ...args: string[]): CommandRun {
  return run(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, script), ...args]);
}

/** `npm run <name> -- <args>`, through package.json. */
export function npmRun(name: string, ...args: string[]): CommandRun {
  return run("npm", ["run", "--silent", name, "--", ...args]);
}

/** Simulated hosts on this machine now (names under /run/dflash-simhost). */
export function simulatedHosts(): Set<string> {
  return new Set(fs.existsSync(STATE_ROOT) ? fs.readdirSync(STATE_ROOT) : []);
}

/**
 * The command ended without reaching set-up, and no simulated host whose name matches
 * `ours` appeared since `before` and outlived the command. Other tests on this machine start
 * hosts of the same names (`sweep-<pid>-<n>`, from their own sweeps), so a host counts only
 * where its owner no longer runs (the command has ended) or it was kept: a host another test's
 * live process owns (or is still starting, its owner not yet written) is that test's (a sweep
 * test's `sweep-351-1` appeared during `sweep --help` in one whole run).
 */
export function assertNothingStarted(r: CommandRun, before: Set<string>, ours: RegExp): void {
  assert.doesNotMatch(r.stderr, SETUP_REFUSED, "the command reached set-up");
  const left = hostStatus().filter((h) => !before.has(h.name) && ours.test(h.name) && (h.owner === "kept" || (h.owner !== null && !h.owner.running)));
  assert.deepEqual(
    left.map((h) => h.name),
    [],
    "the command started simulated hosts",
  );
}

/** Exit 2, the message on stderr, a pointer at --help, and nothing on stdout. */
export function assertRefused(r: CommandRun, message: string | RegExp, help: string): void {
  assert.equal(r.status, 2, `exit status; stderr: ${r.stderr}`);
  if (typeof message === "string") assert.ok(r.stderr.includes(message), `stderr should say ${JSON.stringify(message)}:\n${r.stderr}`);
  else assert.match(r.stderr, message);
  assert.ok(r.stderr.includes(`See \`${help}\` for what is valid.`), `stderr points at ${help}:\n${r.stderr}`);
  assert.equal(r.stdout, "", "nothing else happened");
}

/** Exit 0 with the usage text on stdout. */
export function assertUsage(r: CommandRun, usageLine: string): void {
  assert.equal(r.status, 0, `exit status; stderr: ${r.stderr}`);
  assert.ok(r.stdout.startsWith(`${usageLine}\n`), `usage text starts with ${JSON.stringify(usageLine)}:\n${r.stdout}`);
  assert.equal(r.stderr, "");
}
