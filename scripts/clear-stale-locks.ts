// Run by scripts/pulumi.sh before commands that need the stack lock: a stack locked by a
// `pulumi` process that no longer exists on this machine gets `pulumi cancel` (Pulumi's
// documented remedy), with a note saying so. Locks of live processes, and locks taken on
// other machines, are never touched. Where the backend's locks cannot be read (a backend
// other than file:// or postgres://, or no psql), a note says the check was skipped.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { parseCommandOrExit } from "../lib/cli";
import { REPO_ROOT } from "../lib/pulumi-env";
import { staleLocks } from "../lib/stale-locks";

parseCommandOrExit("scripts/clear-stale-locks.ts", {
  summary: "Runs `pulumi cancel` for each stack of PULUMI_BACKEND_URL locked by a pulumi process that no longer runs here.",
  options: {},
});
const project = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")).name as string;
const { stale, unreadable } = staleLocks(process.env.PULUMI_BACKEND_URL ?? "", project);
if (unreadable) {
  process.stderr.write(`note: no check for stack locks left by a killed pulumi (${unreadable}); if pulumi says the stack is locked by a process that no longer runs, run \`npx pulumi cancel --stack <stack>\`\n`);
}
for (const lock of stale) {
  process.stderr.write(`note: stack ${lock.stack} was locked by pulumi pid ${lock.pid}, which no longer runs (killed?); running \`pulumi cancel\` for it\n`);
  execFileSync("pulumi", ["cancel", "--yes", "--stack", lock.stack], { stdio: "inherit" });
}
