// `npm run report -- [--stacks GLOB] [--out DIR] [--workdir DIR]`: reads the outputs of
// every (matching) stack through the Automation API, whatever the backend, and writes
// report.md (one row per stack) and report.svg (tokens/s by configuration).
import * as fs from "node:fs";
import * as path from "node:path";
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import { REPO_ROOT, pulumiCommand, pulumiEnv } from "../lib/pulumi-env";
import { globMatcher, renderMarkdown, renderSvg, ReportRow } from "../components/benchmark/report";

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}

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
  const glob = arg("stacks", "*");
  const outDir = path.resolve(arg("out", path.join(REPO_ROOT, "bench", "out")));
  const workDir = path.resolve(arg("workdir", REPO_ROOT));
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
