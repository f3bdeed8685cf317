// `npm run apply -- --plans DIR`: applies what `npm run review` reviewed, or refuses, changing
// nothing, when a stack's configuration, its state or its host moved since (components/review/).
import { command, existingDirectory, inProjectFolder, option, parseCommandOrExit, setUp, text } from "../lib/cli";
import { pulumiEnv, REPO_ROOT } from "../lib/pulumi-env";
import { emptyPassphraseRefusal } from "../lib/secrets-passphrase";
import { ReviewMoved, runApply } from "../components/review/review";

const INVOCATION = "npm run apply --";
const COMMAND = command({
  summary: [
    "Applies the stacks of a review (npm run review), in its rollout order, each `up` under the Pulumi",
    "update plan its review saved. Before anything changes it checks every stack's configuration and",
    "state, and what its host runs, against the review; if any moved it refuses, changing nothing,",
    "and says what moved.",
  ].join("\n"),
  options: {
    plans: option({ type: inProjectFolder(existingDirectory), placeholder: "DIR", description: "the review's plans folder", default: ".review" }),
    pr: option({ type: text, placeholder: "COMMIT", description: "the approved commit of a pull request reviewed with --pr, applied from a clean checkout of its base branch; refused if the review is of another commit, or the pull request changes the program" }),
    digest: option({ type: text, placeholder: "sha256:HEX", description: "the digest that ends the approved words (the review run's job summary): refused unless the plans folder holds exactly that review, its words included" }),
  },
});

async function main(): Promise<number> {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const refusal = emptyPassphraseRefusal(process.env);
  if (refusal) throw new Error(refusal);
  setUp({ hosts: false });
  const done = await runApply({ dir: REPO_ROOT, env: pulumiEnv(), plansDir: options.plans, pullRequest: options.pr, digest: options.digest, progress: (l) => process.stderr.write(`apply: ${l}\n`), output: (t) => process.stdout.write(t) });
  for (const d of done) process.stdout.write(`${d.stack}: ${d.result}\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`apply ${e instanceof ReviewMoved ? "" : "failed: "}${(e as Error).message}\n`);
    process.exit(e instanceof ReviewMoved ? 2 : 1);
  },
);
