// Run by scripts/pulumi.sh (`npx pulumi`, `npm run pulumi`) before every Pulumi command in
// the project folder:
// - an empty secrets passphrase is refused (exit 2, nothing run): it protects nothing in a
//   committed stack file. `stack change-secrets-provider` is the one command allowed it, as
//   the way to move a stack off it;
// - stacks whose secrets open with the empty passphrase (lib/secrets-passphrase.ts) are
//   reported with the steps to rotate;
// - with --clear-stale-locks (before `up`, `preview`, `refresh`, `destroy`): a stack locked by
//   a `pulumi` process proven gone (lib/stale-locks.ts: one this project started on this
//   machine in this boot, which left a record, and which no longer runs) gets `pulumi cancel`
//   (Pulumi's documented remedy), with a note saying so. Any other lock of the stack (all the
//   project's stacks when the command names none) is never touched: a note says who holds it,
//   that it may be running on another machine with the same hostname, and how to clear it by
//   hand. Pulumi then runs all the same and, if the lock is still there, fails with its own
//   lock error: its check is atomic where ours is not (the holder may finish in between), and
//   `preview` takes no lock. Where the backend's locks cannot be read (a backend other than
//   file:// or postgres://, or no psql), a note says the check was skipped;
// - with --stack-named X (the command names --stack X): where X has no stack file in the
//   project's stacks/ and no stack in the backend, the stacks that exist (stack files, and
//   `pulumi stack ls`) and how to add X are listed before Pulumi's "no stack named 'X' found",
//   which names none (issue 63). Pulumi runs all the same: at a terminal it offers to create
//   the stack.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { closest, flag, option, parseCommandOrExit, text } from "../lib/cli";
import { REPO_ROOT } from "../lib/pulumi-env";
import { emptyPassphraseRefusal, projectOf, renderLeakReport, stacksWithEmptyPassphrase } from "../lib/secrets-passphrase";
import { removeTornMetadata, staleLocks } from "../lib/stale-locks";

const { options } = parseCommandOrExit("scripts/pulumi-guard.ts", {
  summary: "Checks the secrets passphrase and the stacks' secrets before a Pulumi command in the project folder; clears stack locks left by killed pulumi processes.",
  options: {
    "allow-empty-passphrase": flag("the command moves a stack off the empty passphrase (stack change-secrets-provider): do not refuse an empty one"),
    "clear-stale-locks": flag("run `pulumi cancel` for each stack of PULUMI_BACKEND_URL locked by a pulumi process proven gone (started here, this boot, no longer running); say who holds the other locks"),
    "stack-named": option({ type: text, placeholder: "STACK", description: "the stack the Pulumi command names: where it has neither a stack file nor a stack in the backend, list those that exist and how to add it" }),
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
  // The project of the folder the command was typed in, as Pulumi takes it.
  const projectFile = ["Pulumi.yaml", "Pulumi.yml"].map((f) => path.join(project.projectDir, f)).find((f) => fs.existsSync(f)) ?? path.join(REPO_ROOT, "Pulumi.yaml");
  const name = YAML.parse(fs.readFileSync(projectFile, "utf8")).name as string;
  const { stale, held, unreadable } = staleLocks(process.env.PULUMI_BACKEND_URL ?? "", name);
  if (unreadable) {
    process.stderr.write(`note: no check for stack locks left by a killed pulumi (${unreadable}); if pulumi says the stack is locked by a process that no longer runs, run \`npx pulumi cancel --stack <stack>\`\n`);
  }
  const torn = stale.length ? removeTornMetadata(process.env.PULUMI_BACKEND_URL ?? "") : [];
  if (torn.length) process.stderr.write(`note: removed ${torn.length} metadata file(s) of the backend that a killed pulumi left half-written (Pulumi reads a missing one as none; a torn one fails every read with "EOF"): ${torn.join(", ")}\n`);
  for (const lock of stale) {
    process.stderr.write(`note: stack ${lock.stack} was locked by pulumi pid ${lock.pid}, which no longer runs (killed?); running \`pulumi cancel\` for it\n`);
    execFileSync("pulumi", ["cancel", "--yes", "--stack", lock.stack], { stdio: "inherit" });
  }
  // The named stack's locks (its short name: locks are kept by stack name), else every stack's.
  const stackNamed = options["stack-named"]?.split("/").pop();
  for (const lock of held.filter((l) => stackNamed === undefined || l.stack === stackNamed)) {
    const since = lock.timestamp ? ` since ${lock.timestamp.replace(/\.\d+(?=Z|[+-]\d\d:\d\d$)/, "")}` : "";
    process.stderr.write(
      `pulumi: stack ${lock.stack} is locked by pulumi pid ${lock.pid} on host ${lock.hostname}${lock.username ? ` (user ${lock.username})` : ""}${since}; ${lock.why}; wait for it to finish, or, if you know that process is gone, run \`npx pulumi cancel --stack ${lock.stack}\`\n`,
    );
  }
}

const named = options["stack-named"];
if (named !== undefined) {
  // A qualified name (org/project/stack) has its stack file under its last part.
  const short = named.split("/").pop() ?? named;
  const files = fs.existsSync(project.stacksDir) ? fs.readdirSync(project.stacksDir).flatMap((f) => /^Pulumi\.(.+)\.ya?ml$/.exec(f)?.[1] ?? []).sort() : [];
  if (!files.includes(short)) {
    let backend: string[] | undefined;
    let unread = "";
    try {
      const listed = JSON.parse(execFileSync("pulumi", ["stack", "ls", "--json"], { cwd: project.projectDir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })) as { name: string }[];
      backend = listed.map((s) => s.name).sort();
    } catch (e) {
      unread = ((e as { stderr?: string }).stderr ?? (e as Error).message).trim().split("\n")[0];
    }
    const inBackend = backend?.some((s) => s === named || s.split("/").pop() === short) ?? false;
    if (!inBackend) {
      const stacksDir = path.relative(process.cwd(), project.stacksDir) || ".";
      const guess = closest(short, [...new Set([...files, ...(backend ?? []).map((s) => s.split("/").pop() ?? s)])]);
      const example = files.includes("b16t4-w2048") ? "b16t4-w2048" : files[0];
      const q = (w: string) => (/^[A-Za-z0-9_.\/@%+=:,-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);
      process.stderr.write(
        [
          `pulumi: no stack ${named}: ${stacksDir}/ has no Pulumi.${short}.yaml, and the backend (${process.env.PULUMI_BACKEND_URL ?? "Pulumi's default"}) has no stack ${named}.${guess ? ` Did you mean ${guess}?` : ""}`,
          `  stack files in ${stacksDir}/: ${files.length ? files.join(", ") : "none"}`,
          `  stacks in the backend: ${backend ? (backend.length ? backend.join(", ") : "none") : `could not be listed (${unread})`}`,
          `  To add ${named}: copy a stack file and change what differs (README, "Adding a configuration"), then create the stack:`,
          ...(example ? [`    cp ${q(`${stacksDir}/Pulumi.${example}.yaml`)} ${q(`${stacksDir}/Pulumi.${short}.yaml`)}`] : []),
          `    npx pulumi stack init ${q(named)}`,
          "",
        ].join("\n"),
      );
    }
  }
}
