// The fault campaign: safety tested as a property. For each sequence, fresh simulated hosts
// (a two-node group for one sequence in four), two stacks that share the unit, and a seeded
// list of steps (bench/campaign/plan.ts): `up` of either stack with a generated change
// (speculative settings, the API key set, rotated or removed, the unit renamed, the host
// reached by another SSH port, a flag the host lacks, preview first) and a fault armed for
// it, `preview`, `refresh`, `destroy`, with client traffic during every up and destroy. After
// every step the invariants of bench/campaign/runner.ts are checked. A sequence that breaks
// one is shrunk (--shrink: steps dropped while it still breaks) and written to
// test/campaign/cases/, which `npm test` replays. Not run by `npm test`: a campaign is a benchmark.
// Run: npm run campaign -- --seed S --sequences N --steps K   (--help lists the options)
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { checkoutRevision } from "../lib/checkout";
import { flag, integerBetween, option, parseCommandOrExit, positiveInteger, setUp, text } from "../lib/cli";
import { FaultWeights, fillWeights, formatWeights, onlyWeights, parseWeights, planCampaignSequence, shorter } from "./campaign/plan";
import { CampaignRun, renderCampaign, tally } from "./campaign/report";
import { describe, readCases, RegressionCase, runSequence, SequenceResult, stepBoundSeconds, STEP_MARGIN_SECONDS } from "./campaign/runner";

const { options } = parseCommandOrExit("npm run campaign --", {
  summary: [
    "The fault campaign: seeded sequences of operator steps with faults, on simulated hosts through the real engine,",
    "with the safety invariants checked after every step. Writes bench/results/campaign-<seed>.{json,md}.",
  ].join("\n"),
  options: {
    seed: option({ type: integerBetween(0, 2_147_483_647), placeholder: "S", description: "the seed: the same seed gives the same sequences", default: "1" }),
    sequences: option({ type: positiveInteger, placeholder: "N", description: "sequences to run, each on fresh simulated hosts", default: "3" }),
    steps: option({ type: positiveInteger, placeholder: "K", description: "steps per sequence", default: "6" }),
    parallel: option({ type: integerBetween(1, 8), placeholder: "P", description: "sequences run at once, each on its own hosts", default: "1" }),
    rev: option({ type: text, placeholder: "REV", description: "run the program of this git revision (a worktree beside this checkout) instead of this one's" }),
    cases: option({ type: text, placeholder: "PATH", description: "replay the regression cases in this file or folder (test/campaign/cases) instead of seeded sequences; writes bench/results/campaign-cases-<rev or HEAD>[-<case>].md" }),
    weights: option({ type: text, placeholder: "KIND=N,...", description: "draw the faults of an up by these weights (a kind not named: 1) instead of evenly; a run's command records them, so it replays" }),
    only: option({ type: text, placeholder: "KIND,...", description: "draw the faults of an up among these kinds only (each weight 1, every other 0): forces a kind; recorded as --weights" }),
    fill: option({ type: positiveInteger, placeholder: "N", description: "weights favouring the fault kinds the recorded runs (bench/results/campaign-*.json) used fewer than N times; recorded as --weights" }),
    dense: flag("more ups (86% of steps, not 72%), each with a fault that acts (no up without one, no change preflight refuses): for a campaign whose other steps are counted often enough; recorded in the command"),
    shrink: flag("shrink a sequence that breaks an invariant to a shorter one that still does, and save it to test/campaign/cases/"),
  },
});

/** Replays regression cases (at a revision, to show one failing before its fix). */
async function replay(owned: OwnedHosts, where: string, rev: string | undefined, parallel: number): Promise<number> {
  const say = (l: string) => process.stdout.write(`${l}\n`);
  const checkout = rev ? checkoutRevision(rev) : undefined;
  const cases = readCases(where);
  const results: { file: string; r: SequenceResult }[] = [];
  try {
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < cases.length; i = next++) {
        const { file, case: c } = cases[i];
        say(`case ${path.basename(file)}${c.group ? " (two-node group)" : ""}${c.sudo ? " (through sudo)" : ""}: ${c.steps.map(describe).join(" | ")}`);
        results.push({ file, r: await runSequence((n, o) => owned.start(n, o), hosts.stop, `case-${i}`, c, c.steps, say, checkout?.root) });
      }
    };
    await Promise.all(Array.from({ length: Math.min(parallel, cases.length) }, worker));
  } finally {
    checkout?.remove();
  }
  const label = rev ?? "HEAD";
  const md = [
    `# Regression cases replayed at ${label}`,
    "",
    `Command: \`npm run campaign -- --cases ${path.relative(REPO_ROOT, path.resolve(where))}${parallel > 1 ? ` --parallel ${parallel}` : ""}${rev ? ` --rev ${rev}` : ""}\` (${new Date().toISOString()}, this machine: 2 cores).`,
    "",
    "| case | steps | violations |",
    "|---|---:|---|",
    ...results.sort((a, b) => a.file.localeCompare(b.file)).map(({ file, r }) => `| ${path.basename(file)} | ${r.steps.length} | ${r.violations.map((v) => v.replace(/\|/g, "\\|").replace(/\n/g, " ").slice(0, 400)).join("<br>") || "none"} |`),
    "",
  ].join("\n");
  // One case file replayed: named after it too, so that replays of several cases at one revision do not overwrite each other.
  const one = where.endsWith(".json") ? `-${path.basename(where, ".json")}` : "";
  fs.writeFileSync(path.join(REPO_ROOT, "bench", "results", `campaign-cases-${label.replace(/[^A-Za-z0-9._-]/g, "-")}${one}.md`), md);
  say(`\n${md}`);
  return results.some(({ r }) => r.violations.length) ? 1 : 0;
}

/** Every run recorded by this runner (bench/results/campaign-<seed>.json), oldest first. */
function recordedRuns(out: string): CampaignRun[] {
  if (!fs.existsSync(out)) return [];
  return fs.readdirSync(out).filter((f) => /^campaign-\d+\.json$/.test(f)).map((f) => JSON.parse(fs.readFileSync(path.join(out, f), "utf8")) as CampaignRun).filter((r) => r.format === 2).sort((a, b) => a.date.localeCompare(b.date));
}

/** The fault weights the options ask for: none (even), --weights, --only's, or --fill's from the recorded runs. */
function chosenWeights(out: string): FaultWeights | undefined {
  if ([options.weights, options.only, options.fill].filter((o) => o !== undefined).length > 1) {
    process.stderr.write("npm run campaign: give one of --weights, --only and --fill\n");
    process.exit(2);
  }
  try {
    if (options.weights !== undefined) return parseWeights(options.weights);
    if (options.only !== undefined) return onlyWeights(options.only);
  } catch (e) {
    process.stderr.write(`npm run campaign: ${(e as Error).message}\n`);
    process.exit(2);
  }
  if (options.fill !== undefined) return fillWeights(tally(recordedRuns(out)).faults, options.fill);
  return undefined;
}

async function main(owned: OwnedHosts): Promise<number> {
  setUp({ hosts: true });
  const { seed, sequences, steps, parallel, rev } = options;
  if (options.cases) return replay(owned, options.cases, rev, parallel);
  const out = path.join(REPO_ROOT, "bench", "results");
  const weights = chosenWeights(out);
  const say = (l: string) => process.stdout.write(`${l}\n`);
  const checkout = rev ? checkoutRevision(rev) : undefined;
  const start = (name: string, opts: Parameters<typeof hosts.start>[1]) => owned.start(name, opts);
  const plans = Array.from({ length: sequences }, (_, i) => planCampaignSequence(seed, i, steps, weights, options.dense));
  const results: SequenceResult[] = new Array(sequences);
  const started = Date.now();
  try {
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < sequences; i = next++) {
        const plan = plans[i];
        say(`sequence ${i} (seed ${seed}${plan.group ? ", two-node group" : ""}${plan.sudo ? ", through sudo" : ""}): ${plan.steps.map(describe).join(" | ")}`);
        let r = await runSequence(start, hosts.stop, `${seed}-${i}`, plan, plan.steps, say, checkout?.root);
        if (r.violations.length && options.shrink) {
          let smallest = r.steps.map((s) => s.step);
          for (let shrinking = true; shrinking; ) {
            shrinking = false;
            for (const candidate of shorter(smallest)) {
              say(`  shrinking ${i}: trying ${candidate.length} step(s)`);
              const again = await runSequence(start, hosts.stop, `${seed}-${i}-s`, plan, candidate, say, checkout?.root);
              if (again.violations.length) {
                smallest = candidate;
                r = { ...again, label: r.label };
                shrinking = true;
                break;
              }
            }
          }
          const dir = path.join(REPO_ROOT, "test", "campaign", "cases");
          fs.mkdirSync(dir, { recursive: true });
          const file = path.join(dir, `seed-${seed}-sequence-${i}.json`);
          const kept: RegressionCase = { name: `seed ${seed}, sequence ${i}, shrunk`, source: `npm run campaign -- --seed ${seed} --sequences ${sequences} --steps ${steps}${weights ? ` --weights ${formatWeights(weights)}` : ""}${options.dense ? " --dense" : ""} --shrink`, group: plan.group, ...(plan.sudo ? { sudo: true } : {}), steps: smallest, brokeBefore: { revision: rev || "HEAD", violations: r.violations } };
          fs.writeFileSync(file, `${JSON.stringify(kept, null, 2)}\n`);
          say(`  shrunk to ${smallest.length} step(s): ${file}`);
        }
        results[i] = r;
      }
    };
    await Promise.all(Array.from({ length: Math.min(parallel, sequences) }, worker));
  } finally {
    checkout?.remove();
  }
  const wall = (Date.now() - started) / 1000;
  const command = `npm run campaign -- --seed ${seed} --sequences ${sequences} --steps ${steps}${parallel > 1 ? ` --parallel ${parallel}` : ""}${rev ? ` --rev ${rev}` : ""}${weights ? ` --weights ${formatWeights(weights)}` : ""}${options.dense ? " --dense" : ""}${options.shrink ? " --shrink" : ""}`;
  fs.mkdirSync(out, { recursive: true });
  const run: CampaignRun = { format: 2, seed, sequences, steps, parallel, rev: rev || null, command, date: new Date().toISOString(), wallSeconds: wall, results, ...(weights ? { weights } : {}), ...(options.dense ? { dense: true } : {}) };
  const bound = `Step time bound: ${stepBoundSeconds()} s (the stacks' deadlines, lock wait, a restart and a rollback, plus ${STEP_MARGIN_SECONDS} s for the engine)`;
  const md = renderCampaign(`Fault campaign, seed ${seed}`, [run], 1, bound);
  fs.writeFileSync(path.join(out, `campaign-${seed}.md`), md);
  fs.writeFileSync(path.join(out, `campaign-${seed}.json`), `${JSON.stringify(run, null, 2)}\n`);
  // Every run of this runner adds up in one table (issue 18 asks for 100 sequences and each
  // fault and operator step 20 times, over as many runs as that takes).
  const all = recordedRuns(out);
  fs.writeFileSync(path.join(out, "campaign.md"), renderCampaign("Fault campaign: every run so far", all, 20, bound));
  say(`\n${md}\nwrote bench/results/campaign-${seed}.{md,json} and bench/results/campaign.md (${all.length} runs)`);
  return results.some((r) => r.violations.length) ? 1 : 0;
}

void runWithHosts(main, { name: "campaign" });
