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
