// Run by scripts/pulumi.sh before commands that need the stack lock: a stack locked by a
// `pulumi` process that no longer exists on this machine gets `pulumi cancel` (Pulumi's
// documented remedy), with a note saying so. Locks of live processes are never touched.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as YAML from "yaml";
import { staleLocks } from "../lib/stale-locks";

const project = YAML.parse(fs.readFileSync("Pulumi.yaml", "utf8")).name as string;
for (const lock of staleLocks(process.env.PULUMI_BACKEND_URL ?? "", project)) {
  process.stderr.write(`note: stack ${lock.stack} was locked by pulumi pid ${lock.pid}, which no longer runs (killed?); running \`pulumi cancel\` for it\n`);
  execFileSync("pulumi", ["cancel", "--yes", "--stack", lock.stack], { stdio: "inherit" });
}
