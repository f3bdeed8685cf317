// `npm run grid -- [options]`: writes one stack file per valid combination of DDTree
// settings; existing files are kept unless --force. `npm run grid -- --help` lists the
// options. It needs no set-up beyond the npm dependencies (it only writes files).
import * as fs from "node:fs";
import * as path from "node:path";
import { either, flag, inProjectFolder, listOf, oneOf, option, outputDirectory, parseCommandOrExit, positiveInteger } from "../lib/cli";
import * as YAML from "yaml";
import { gridStacks } from "../components/sweep/grid";
import { REPO_ROOT } from "../lib/pulumi-env";

const INVOCATION = "npm run grid --";
const COMMAND = {
  summary: [
    "Writes stacks/Pulumi.b<budget>t<topk>-w<window>.yaml for every combination of the lists given;",
    "combinations the schema refuses (topk above budget, a window under the draft block) are skipped, with the reason.",
  ].join("\n"),
  options: {
    budgets: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "DDTree node budgets", default: "4,8,16" }),
    topks: option({ type: listOf(positiveInteger), placeholder: "LIST", description: "DDTree top-k values", default: "4" }),
    windows: option({ type: listOf(either(positiveInteger, oneOf(["none"]))), placeholder: "LIST", description: "drafter windows in tokens", default: "2048,none" }),
    "compact-cache": option({ type: oneOf(["auto", "on", "off"]), placeholder: "MODE", description: "compact the drafter's windowed cache; auto: whenever there is a window", default: "auto" }),
    out: option({ type: inProjectFolder(outputDirectory), placeholder: "DIR", description: "where to write the stack files", default: "stacks" }),
    force: flag("overwrite stack files that exist"),
  },
  notes: "Example: npm run grid -- --budgets 4,8,12,16 --topks 4,6 --windows 2048,none",
};

function main(): number {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const { stacks, skipped } = gridStacks({ budgets: options.budgets, topks: options.topks, windows: options.windows, compactCache: options["compact-cache"] });
  for (const s of skipped) process.stdout.write(`skipped  ${s.name}: ${s.reason}\n`);
  if (stacks.length === 0) {
    process.stderr.write(`grid: every combination was skipped (above); nothing was written. Change --budgets, --topks or --windows (${INVOCATION} --help).\n`);
    return 1;
  }
  fs.mkdirSync(options.out, { recursive: true });
  for (const s of stacks) {
    const file = path.join(options.out, `Pulumi.${s.name}.yaml`);
    if (fs.existsSync(file) && !options.force) {
      process.stdout.write(`kept     ${file} (exists; --force to overwrite)\n`);
      continue;
    }
    fs.writeFileSync(file, s.yaml);
    process.stdout.write(`wrote    ${file}\n`);
  }
  // Pulumi reads stack files only from Pulumi.yaml's stackConfigDir.
  const stacksDir = path.resolve(REPO_ROOT, (YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")) as { stackConfigDir?: string }).stackConfigDir ?? ".");
  if (path.resolve(options.out) !== stacksDir) {
    process.stdout.write(`note: npx pulumi and npm run sweep read stack files from ${path.relative(REPO_ROOT, stacksDir) || "."}/ (stackConfigDir in Pulumi.yaml), not from ${options.out}: move the ones you want there.\n`);
  }
  return 0;
}

process.exitCode = main();
