// `npm run review -- [options]`: previews the stacks a change touches and writes one Markdown
// document for the pull request (components/review/). `npm run review -- --help` lists the options.
import * as fs from "node:fs";
import * as path from "node:path";
import { command, inProjectFolder, option, outputDirectory, parseCommandOrExit, setUp, stackPattern, text } from "../lib/cli";
import { pulumiEnv, REPO_ROOT } from "../lib/pulumi-env";
import { emptyPassphraseRefusal } from "../lib/secrets-passphrase";
import { globMatcher } from "../components/benchmark/report";
import { runReview } from "../components/review/review";
import { COMMENT_LIMIT } from "../components/review/render";
import { WORDS_FILE } from "../components/review/record";

const INVOCATION = "npm run review --";
const COMMAND = command({
  summary: [
    "Finds the stacks a change touches (their stack file changed, Pulumi.yaml changed, or named with",
    "--stacks), previews each against the backend and the hosts with an update plan saved, and writes one",
    `Markdown document for the pull request (at most ${COMMENT_LIMIT} characters, secrets masked): a summary`,
    "table (what changes in words, restart or not, expected downtime, rollout order), warnings, and per",
    "stack the unit lines that change against what the host runs now and the last benchmarks.",
    "`npm run apply -- --plans DIR` then applies exactly what was reviewed, or refuses if anything moved.",
  ].join("\n"),
  options: {
    base: option({ type: text, placeholder: "REF", description: "the git revision to compare with; default: the merge base of HEAD with the main branch" }),
    stacks: option({ type: stackPattern, placeholder: "GLOB", description: "also review these stacks, changed or not" }),
    out: option({ type: inProjectFolder(text), placeholder: "FILE", description: "where to write the document; default: review.md in the plans folder" }),
    plans: option({ type: inProjectFolder(outputDirectory), placeholder: "DIR", description: "where to keep the plans and the record that apply checks", default: ".review" }),
    pr: option({ type: text, placeholder: "COMMIT", description: "review this pull request's commit from a clean checkout of its base branch: its configuration is read with git and reviewed by this checkout's program; its other files are listed, never run (docs/review.md, trust)" }),
  },
  notes: "State is read from PULUMI_BACKEND_URL (a team's postgres://..., or the project's .pulumi-state/), secrets with PULUMI_CONFIG_PASSPHRASE(_FILE), as `npx pulumi` does.",
});

async function main(): Promise<number> {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const refusal = emptyPassphraseRefusal(process.env);
  if (refusal) throw new Error(refusal);
  setUp({ hosts: false });
  const named = options.stacks === undefined ? undefined : globMatcher(options.stacks);
  const { markdown, record, digest } = await runReview({ dir: REPO_ROOT, env: pulumiEnv(), base: options.base, named, plansDir: options.plans, pullRequest: options.pr, progress: (l) => process.stderr.write(`review: ${l}\n`) });
  // The words are in the plans folder already (review.md, beside what they describe); --out is a copy.
  const out = options.out ?? path.join(options.plans, WORDS_FILE);
  if (path.resolve(out) !== path.resolve(options.plans, WORDS_FILE)) {
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, markdown);
  }
  process.stdout.write(markdown);
  process.stderr.write(`review: wrote ${out} (${markdown.length} characters) and the plans of ${record.stacks.filter((s) => s.plan).length} stack(s) in ${options.plans}; digest ${digest} (apply --digest takes it)\n`);
  return record.stacks.some((s) => s.effect === "preview failed") ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`review failed: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
