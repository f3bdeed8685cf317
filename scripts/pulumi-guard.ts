// Run by scripts/pulumi.sh (`npx pulumi`, `npm run pulumi`) before every Pulumi command in
// the project folder:
// - an empty secrets passphrase is refused (exit 2, nothing run): it protects nothing in a
//   committed stack file. `stack change-secrets-provider` is the one command allowed it, as
//   the way to move a stack off it;
// - stacks whose secrets open with the empty passphrase (lib/secrets-passphrase.ts) are
//   reported with the steps to rotate;
// - with --clear-stale-locks (before `up`, `preview`, `refresh`, `destroy`): a stack locked by
//   a `pulumi` process that no longer exists on this machine gets `pulumi cancel` (Pulumi's
//   documented remedy), with a note saying so. Locks of live processes, and locks taken on
//   other machines, are never touched. Where the backend's locks cannot be read (a backend
//   other than file:// or postgres://, or no psql), a note says the check was skipped.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { flag, parseCommandOrExit } from "../lib/cli";
import { REPO_ROOT } from "../lib/pulumi-env";
import { emptyPassphraseRefusal, projectOf, renderLeakReport, stacksWithEmptyPassphrase } from "../lib/secrets-passphrase";
import { removeTornMetadata, staleLocks } from "../lib/stale-locks";

const { options } = parseCommandOrExit("scripts/pulumi-guard.ts", {
  summary: "Checks the secrets passphrase and the stacks' secrets before a Pulumi command in the project folder; clears stack locks left by killed pulumi processes.",
  options: {
    "allow-empty-passphrase": flag("the command moves a stack off the empty passphrase (stack change-secrets-provider): do not refuse an empty one"),
    "clear-stale-locks": flag("run `pulumi cancel` for each stack of PULUMI_BACKEND_URL locked by a pulumi process that no longer runs here"),
  },
});

const refusal = options["allow-empty-passphrase"] ? undefined : emptyPassphraseRefusal(process.env);
if (refusal) {
  process.stderr.write(`pulumi: ${refusal}\nNothing was run.\n`);
  process.exit(2);
}
// The project Pulumi will use: the one of the folder the command was typed in.
const project = projectOf(process.cwd()) ?? { projectDir: REPO_ROOT, stacksDir: path.join(REPO_ROOT, "stacks") };
process.stderr.write(renderLeakReport(stacksWithEmptyPassphrase(project.stacksDir, process.env.PULUMI_BACKEND_URL), project.projectDir));

if (options["clear-stale-locks"]) {
  const name = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")).name as string;
  const { stale, unreadable } = staleLocks(process.env.PULUMI_BACKEND_URL ?? "", name);
  if (unreadable) {
    process.stderr.write(`note: no check for stack locks left by a killed pulumi (${unreadable}); if pulumi says the stack is locked by a process that no longer runs, run \`npx pulumi cancel --stack <stack>\`\n`);
  }
  const torn = stale.length ? removeTornMetadata(process.env.PULUMI_BACKEND_URL ?? "") : [];
  if (torn.length) process.stderr.write(`note: removed ${torn.length} metadata file(s) of the backend that a killed pulumi left half-written (Pulumi reads a missing one as none; a torn one fails every read with "EOF"): ${torn.join(", ")}\n`);
  for (const lock of stale) {
    process.stderr.write(`note: stack ${lock.stack} was locked by pulumi pid ${lock.pid}, which no longer runs (killed?); running \`pulumi cancel\` for it\n`);
    execFileSync("pulumi", ["cancel", "--yes", "--stack", lock.stack], { stdio: "inherit" });
  }
}
