// `npm run report -- [options]`: reads the outputs of every (matching) stack through the
// Automation API, whatever the backend, and writes report.md (one row per stack) and
// report.svg (tokens/s by configuration). `npm run report -- --help` lists the options.
import * as fs from "node:fs";
import * as path from "node:path";
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import { pulumiCommand, pulumiEnv } from "../lib/pulumi-env";
import { existingDirectory, inProjectFolder, option, outputDirectory, parseCommandOrExit, setUp, ValueType } from "../lib/cli";
import { globMatcher, renderMarkdown, renderSvg, ReportRow } from "../components/benchmark/report";

const stackPattern: ValueType<string> = {
  expects: "a pattern of stack names (* any characters, ? one)",
  parse(glob) {
    if (glob === "") throw new Error("");
    return glob;
  },
};

const INVOCATION = "npm run report --";
const COMMAND = {
  summary: [
    "Reads the outputs of every stack whose name matches --stacks (through the Automation API, whatever",
    "the backend) and writes report.md (one row per stack, the best marked) and report.svg (tokens/s).",
  ].join("\n"),
  options: {
    stacks: option({ type: stackPattern, placeholder: "GLOB", description: "the stacks to report on", default: "*" }),
    out: option({ type: inProjectFolder(outputDirectory), placeholder: "DIR", description: "where to write report.md and report.svg", default: "bench/out" }),
    workdir: option({ type: inProjectFolder(existingDirectory), placeholder: "DIR", description: "the Pulumi project folder whose stacks to read", default: "." }),
  },
};

export async function collectRows(workDir: string, env: Record<string, string>, glob: string): Promise<ReportRow[]> {
  const ws = await LocalWorkspace.create({ workDir, envVars: env, pulumiCommand: await pulumiCommand() });
  const match = globMatcher(glob);
  const names = (await ws.listStacks()).map((s) => s.name).filter(match).sort();
  const rows: ReportRow[] = [];
  for (const stack of names) {
    const out = await ws.stackOutputs(stack);
    const t = out.restartTimings?.value;
    rows.push({
      stack,
      configuration: out.configuration?.value ?? {},
      result: out.benchmark?.value ?? null,
      takenAt: out.benchmarkTakenAt?.value,
      restartSeconds: t ? t.drainSeconds + t.stopSeconds + t.gpuReleaseSeconds + t.loadToReadySeconds : undefined,
    });
  }
  return rows;
}

async function main(): Promise<void> {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const glob = options.stacks;
  const outDir = options.out;
  const workDir = options.workdir;
  setUp({ hosts: false });
  const rows = await collectRows(workDir, pulumiEnv(), glob);
  if (rows.length === 0) throw new Error(`no stack matches "${glob}" in ${workDir} (backend ${pulumiEnv().PULUMI_BACKEND_URL})`);
  fs.mkdirSync(outDir, { recursive: true });
  const md = `# Benchmark report\n\nStacks matching \`${glob}\`, ${new Date().toISOString()}.\n\n${renderMarkdown(rows)}\n![tokens/s by configuration](report.svg)\n`;
  fs.writeFileSync(path.join(outDir, "report.md"), md);
  fs.writeFileSync(path.join(outDir, "report.svg"), renderSvg(rows));
  process.stdout.write(`${md}\nwrote ${path.join(outDir, "report.md")} and report.svg\n`);
}

if (require.main === module) {
  main().catch((e) => {
    process.stderr.write(`report failed: ${(e as Error).message}\n`);
    process.exit(1);
  });
}
