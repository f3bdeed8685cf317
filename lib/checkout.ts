// Another version of this project beside this one: a git worktree of a revision sharing
// this checkout's node_modules, for what must be compared with or upgraded from it.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { REPO_ROOT } from "./pulumi-env";

export interface Checkout {
  root: string;
  remove(): void;
}

export function checkoutRevision(rev: string): Checkout {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-rev-"));
  try {
    execFileSync("git", ["worktree", "add", "--detach", root, rev], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "pipe"] });
  } catch (e) {
    fs.rmSync(root, { recursive: true, force: true });
    throw new Error(`cannot check out revision ${rev} of ${REPO_ROOT}: ${(e as { stderr?: Buffer }).stderr?.toString().trim() || (e as Error).message}`);
  }
  fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(root, "node_modules"));
  return {
    root,
    remove: () => {
      execFileSync("git", ["worktree", "remove", "--force", root], { cwd: REPO_ROOT, stdio: "ignore" });
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * This checkout's working tree (committed or not, what `git ls-files` lists as tracked or
 * untracked-but-not-ignored) copied to another folder: the same code at another path, as a
 * colleague's clone would be.
 */
export function copyWorkingTree(): Checkout {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-copy-"));
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\0").filter(Boolean);
  for (const file of files) {
    const from = path.join(REPO_ROOT, file);
    // Deleted in the working tree but not yet committed; node_modules is linked below (a link
    // to it, as in a worktree, is not ignored by the `node_modules/` pattern).
    if (file === "node_modules" || !fs.existsSync(from)) continue;
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.cpSync(from, path.join(root, file), { verbatimSymlinks: true });
  }
  fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(root, "node_modules"));
  return { root, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}
