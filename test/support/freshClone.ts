// A fresh clone of this working tree, as a newcomer's `git clone` has it, for tests that run the
// docs' commands as written (test/docs/guides.test.ts, test/readme-walkthrough.test.ts): its files (tracked, and new ones not ignored) committed to a new
// repository, node_modules hard-linked. Also the shell environment such a newcomer has.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "../../lib/pulumi-env";

/**
 * A new folder under the system's temp folder (`prefix` + random) holding the working tree's
 * files (tracked, and untracked ones git does not ignore), committed to a new repository, so
 * `git status` there shows what the commands run in it changed. `edit`, if given, changes the
 * files before that commit (a test's speed settings), so they read as the clone's own.
 * node_modules is hard-linked as `npm ci` leaves it (a fresh `npm ci` costs a minute); its links
 * (node_modules/.bin) point into the clone. Remove it with fs.rmSync(dir, {recursive: true}).
 */
export function freshClone(prefix: string, edit?: (dir: string) => void): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard", "-z"], { cwd: REPO_ROOT, encoding: "utf8" })
    .split("\0")
    .filter((f) => f && fs.existsSync(path.join(REPO_ROOT, f)));
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(REPO_ROOT, f), path.join(dir, f));
    fs.chmodSync(path.join(dir, f), fs.statSync(path.join(REPO_ROOT, f)).mode);
  }
  edit?.(dir);
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=fresh-clone", "-c", "user.email=fresh-clone@127.0.0.1", ...args], { cwd: dir, stdio: "ignore" });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "fresh clone");
  execFileSync("cp", ["-al", path.join(REPO_ROOT, "node_modules"), path.join(dir, "node_modules")]);
  return dir;
}

/** PATH without the project's cached Node.js (which `npm test` put first): the machine's own. */
export const machinePath = (): string =>
  (process.env.PATH ?? "")
    .split(":")
    .filter((d) => d && !d.includes("dflash-pulumi/node/"))
    .join(":");

/**
 * The environment of a newcomer's shell: this process's, with the machine's own Node.js first on
 * PATH and none of the Pulumi settings a test run may carry (backend, passphrase, home).
 */
export function newcomerEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: machinePath() };
  for (const k of ["PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_HOME"]) delete env[k];
  return env;
}

/** Whether process `pid` runs (a host named after a test's pid outlives a killed test run). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
