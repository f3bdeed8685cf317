// `npm run report -- [options]`: reads the outputs of every (matching) stack through the
// Automation API, whatever the backend, and writes report.md (one row per stack) and
// report.svg (the chart). The stacks come from one source: the project's own (its backend),
// the demo's (.demo/, kept by `npm run demo`) or the sweep's (.sweep/); by default the
// project's, or if it has none, the demo's or the sweep's, whichever measured last.
// `npm run report -- --help` lists the options.
import * as fs from "node:fs";
import * as path from "node:path";
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import { pulumiCommand, pulumiEnv, REPO_ROOT } from "../lib/pulumi-env";
import { command, existingDirectory, inProjectFolder, oneOf, option, outputDirectory, parseCommandOrExit, setUp, stackPattern, UsageError } from "../lib/cli";
import { KEPT_WORKSPACES, keptWorkspaceDir, workspaceEnv } from "../lib/workspace";
import { emptyPassphraseRefusal } from "../lib/secrets-passphrase";
import { globMatcher, renderMarkdown, renderSvg, withHistory } from "../components/benchmark/report";
import type { ReportRow } from "../components/verdict/rows";
import { readHistory } from "../components/benchmark/history";
import { storedResultOfOutputs } from "../components/benchmark/compare";

const SOURCES = ["project", "demo", "sweep"] as const;
type Source = (typeof SOURCES)[number];

const INVOCATION = "npm run report --";
const COMMAND = command({
  summary: [
    "Reads the outputs of every stack whose name matches --stacks (through the Automation API, whatever",
    "the backend) and writes report.md (one row per stack: decode tokens/s with its spread, output tokens/s",
    "per concurrency level, each with its speedup over the no-speculation baseline on the same host; host,",
    "GPU, SGLang version and date; the best marked only beyond noise, else a tie) and report.svg (decode",
    "tokens/s at short and long context with their spread, acceptance length, coding check, by configuration).",
  ].join("\n"),
  options: {
    stacks: option({ type: stackPattern, placeholder: "GLOB", description: "the stacks to report on", default: "*" }),
    from: option({
      type: oneOf(SOURCES),
      placeholder: "SOURCE",
      description: `whose stacks: project (its backend), demo (${KEPT_WORKSPACES.demo}/) or sweep (${KEPT_WORKSPACES.sweep}/); without it, the project's if it has any, else whichever of the demo's and the sweep's measured last`,
    }),
    out: option({ type: inProjectFolder(outputDirectory), placeholder: "DIR", description: "where to write report.md and report.svg", default: "bench/out" }),
    workdir: option({ type: inProjectFolder(existingDirectory), placeholder: "DIR", description: "read the stacks of this Pulumi project folder instead of this project's (so --from project)" }),
  },
  check({ options }) {
    if (options.workdir !== undefined && options.from !== undefined && options.from !== "project") {
      throw new UsageError(`--workdir names the project folder to read, so it goes with --from project only (got --from ${options.from})`);
    }
  },
});

/**
 * The rows of every stack of a backend whose name matches `glob`, from their outputs, with what
 * the project kept of their benchmarks (components/benchmark/history.ts, under `historyRoot`):
 * a destroyed stack still shows its last numbers, marked as such.
 */
export async function collectRows(workDir: string, env: Record<string, string>, glob: string, historyRoot = REPO_ROOT): Promise<ReportRow[]> {
  const live = await stackRows(workDir, env, glob);
  const { records, unreadable } = readHistory(historyRoot, env.PULUMI_BACKEND_URL ?? "");
  if (unreadable.length) process.stderr.write(`report: skipped ${unreadable.length} kept result(s) that do not parse: ${unreadable.join(", ")}\n`);
  return withHistory(live, records, glob);
}

async function stackRows(workDir: string, env: Record<string, string>, glob: string): Promise<ReportRow[]> {
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
      result: storedResultOfOutputs(out),
      takenAt: out.benchmarkTakenAt?.value,
      restartSeconds: t ? t.drainSeconds + t.stopSeconds + t.gpuReleaseSeconds + t.loadToReadySeconds : undefined,
    });
  }
  return rows;
}

/** Writes report.md and report.svg into `outDir` and returns the Markdown. */
export function writeReport(outDir: string, heading: string, rows: ReportRow[]): string {
  fs.mkdirSync(outDir, { recursive: true });
  const md = `# Benchmark report\n\n${heading}\n\n${renderMarkdown(rows)}\n![Decode tokens/s at short and long context with their spread and speedup, acceptance length and coding check by configuration](report.svg)\n`;
  fs.writeFileSync(path.join(outDir, "report.md"), md);
  fs.writeFileSync(path.join(outDir, "report.svg"), renderSvg(rows));
  return md;
}

export interface StackSource {
  source: Source;
  /** Where the stacks are, for the report's heading and messages. */
  description: string;
  dir: string;
  env: Record<string, string>;
}

export function stackSource(source: Source, projectDir = REPO_ROOT): StackSource {
  switch (source) {
    case "project": {
      const env = pulumiEnv();
      // The project's stacks are real ones: their secrets are never read with an empty passphrase.
      const refusal = emptyPassphraseRefusal(process.env);
      if (refusal) throw new Error(refusal);
      return { source, description: `the project's backend (${env.PULUMI_BACKEND_URL})`, dir: projectDir, env };
    }
    case "demo":
    case "sweep": {
      const dir = keptWorkspaceDir(source);
      return { source, description: `the ${source}'s workspace (${KEPT_WORKSPACES[source]}/, kept by npm run ${source})`, dir, env: workspaceEnv(dir) };
    }
    default: {
      const never: never = source;
      throw new Error(`unknown source ${never}`);
    }
  }
}

/** The line under the report's title: which stacks, from where, when. */
export function reportHeading(source: StackSource, glob: string): string {
  return `Stacks matching \`${glob}\` in ${source.description}, ${new Date().toISOString()}.`;
}

/** The rows of a source's matching stacks; none for a kept workspace that was never made. */
async function rowsOf(s: StackSource, glob: string): Promise<ReportRow[]> {
  if (s.source !== "project" && !fs.existsSync(path.join(s.dir, "Pulumi.yaml"))) return [];
  return collectRows(s.dir, s.env, glob);
}

/** When its newest benchmark was taken ("" for none), to pick the source measured last. */
function lastMeasured(rows: ReportRow[]): string {
  return rows.reduce((latest, r) => (r.takenAt && r.takenAt > latest ? r.takenAt : latest), "");
}

/**
 * Pure: the source to report on, from what each holds (in the order project, demo, sweep):
 * the project's own stacks if it has any; otherwise the demo's or the sweep's, whichever
 * took the newest benchmark. Undefined when none holds a stack.
 */
export function chooseSource<T extends { source: Source; rows: ReportRow[] }>(found: T[]): T | undefined {
  const withStacks = found.filter((f) => f.rows.length > 0);
  const project = withStacks.find((f) => f.source === "project");
  if (project) return project;
  return withStacks.reduce<T | undefined>((newest, f) => (!newest || lastMeasured(f.rows) > lastMeasured(newest.rows) ? f : newest), undefined);
}

/** Pure: what `npm run report` says when no source holds a (matching) stack: where it looked, what to run. */
export function nothingToReport(glob: string, places: string[]): string {
  const where = places.length > 1 ? `${places.slice(0, -1).join(", ")} or ${places[places.length - 1]}` : places[0];
  return [
    `report: nothing to report: ${glob === "*" ? "no stack" : `no stack matching "${glob}"`} in ${where}.`,
    "Run `npm run demo` (a simulated 8-GPU host, two configurations measured, a few minutes) or `npm run sweep`,",
    "or deploy a configuration of your own (`npx pulumi up --stack b16t4-w2048`, see the README), then `npm run report` again.",
  ].join("\n");
}

async function main(): Promise<number> {
  const { options } = parseCommandOrExit(INVOCATION, COMMAND);
  const glob = options.stacks;
  setUp({ hosts: false });
  const candidates: Source[] = options.from ? [options.from] : options.workdir ? ["project"] : [...SOURCES];
  const found: { source: Source; where: StackSource; rows: ReportRow[] }[] = [];
  for (const source of candidates) {
    const where = stackSource(source, options.workdir);
    found.push({ source, where, rows: await rowsOf(where, glob) });
    // The project's own stacks win: no need to read the others.
    if (source === "project" && found[0].rows.length > 0) break;
  }
  const chosen = chooseSource(found);
  if (!chosen) {
    process.stderr.write(`${nothingToReport(glob, found.map((f) => f.where.description))}\n`);
    return 1;
  }
  const others = candidates.length > 1 ? ` (--from ${SOURCES.filter((s) => s !== chosen.source).join(" or ")} reads another source)` : "";
  const md = writeReport(options.out, reportHeading(chosen.where, glob), chosen.rows);
  process.stdout.write(`${md}\nwrote ${path.join(options.out, "report.md")} and report.svg from the stacks in ${chosen.where.description}${others}\n`);
  return 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`report failed: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
