// `npm run demo`: boots a simulated 8-GPU host, then deploys the no-speculation baseline and
// two configurations of the users' sweep in turn through the real Pulumi engine, and prints
// what each `up` did. Every deploy after the first is a real reconfiguration: drain, stop, wait for GPU memory
// (released 3 s after the old process exits, as on real hosts), start, readiness. It ends
// with the comparison report (bench/out/report.md and report.svg) from the stacks' outputs,
// and keeps its workspace and state in .demo/, where `npm run report` finds them again.
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { parseCommandOrExit, setUp } from "../lib/cli";
import { KEPT_WORKSPACES, keptWorkspaceDir, readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { collectRows, reportHeading, stackSource, writeReport } from "./report";
import { summaryLine, type BenchmarkSummary } from "../components/benchmark/summary";

/** The baseline first: the report's speedups divide by it. */
const CONFIGS = ["baseline", "b8t4-w2048", "b16t4-w2048"];
const LAST = CONFIGS[CONFIGS.length - 1];
const HOST = `demo-${process.pid}`;

function say(line: string): void {
  process.stdout.write(`\n=== ${line}\n`);
}

const COMMAND = {
  summary: [
    "Boots a simulated 8-GPU host, deploys baseline (no speculation), b8t4-w2048 and b16t4-w2048 through the real",
    "Pulumi engine (each after the first a real reconfiguration), shows a no-op up, stops the host, and writes the comparison report",
    `(bench/out/report.md and report.svg). Its stacks and their outputs stay in ${KEPT_WORKSPACES.demo}/ for npm run report; each run`,
    "starts that folder afresh. The first run sets up the machine: npm dependencies, the pinned Pulumi engine,",
    "the host image (minutes, cached after).",
  ].join("\n"),
  notes: "Ctrl-C (or SIGTERM, SIGHUP) stops the simulated host before the demo exits.",
  options: {},
};

/** What Pulumi's resource changes are called in words (its summary's keys). */
const CHANGE_WORDS: Record<string, string> = {
  same: "unchanged",
  create: "created",
  update: "updated",
  delete: "deleted",
  replace: "replaced",
  "create-replacement": "created as replacements",
  "delete-replaced": "deleted as replaced",
  read: "read",
  refresh: "refreshed",
  discard: "discarded",
  import: "imported",
};

/**
 * Pure: an `up`'s resource changes (Pulumi's summary, `{ same: 9 }`) in words: "9 resources
 * unchanged, nothing restarted" when nothing changed, else each kind of change with its count
 * ("1 updated, 8 unchanged").
 */
export function changesInWords(changes: Record<string, number> | undefined): string {
  const counts = Object.entries(changes ?? {}).filter(([, n]) => n > 0);
  const total = counts.reduce((t, [, n]) => t + n, 0);
  if (counts.every(([kind]) => kind === "same")) return `${total} resource${total === 1 ? "" : "s"} unchanged, nothing restarted`;
  const order = Object.keys(CHANGE_WORDS);
  const rank = (kind: string) => (order.includes(kind) ? order.indexOf(kind) : order.length);
  // What changed first, the unchanged last.
  return counts
    .sort(([a], [b]) => (a === "same" ? 1 : b === "same" ? -1 : rank(a) - rank(b)))
    .map(([kind, n]) => `${n} ${CHANGE_WORDS[kind] ?? kind}`)
    .join(", ");
}

async function demo(owned: OwnedHosts): Promise<void> {
  setUp({ hosts: true });
  say(`starting simulated GPU host ${HOST} (Debian + systemd + sshd, simulated SGLang DDTree build and 8 GPUs)`);
  const host = await owned.start(HOST, {
    sglang: { profile: "ddtree-fork", loadSeconds: 6, warmupSeconds: 1 },
    onProgress: (m) => process.stdout.write(`  ${m}\n`),
  });
  hosts.fault(HOST, JSON.stringify({ gpuReleaseDelaySeconds: 3 }));
  say(`host ready at ${host.address} (ssh key ${host.privateKeyPath})`);
  // A short benchmark so the demo stays quick; the defaults measure more (see components/benchmark/schema.ts).
  const benchmark = { runs: 3, maxTokens: 128, longContextTokens: [8192], concurrency: [1, 4], codingMaxTokens: 400 };
  // A fresh folder: the stacks of an earlier run point at its host, which is gone.
  const dir = keptWorkspaceDir("demo");
  fs.rmSync(dir, { recursive: true, force: true });
  const ws = simWorkspace(
    Object.fromEntries(CONFIGS.map((c) => [c, { ...readRepoStackConfig(c), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 3 }, "dflash-sglang:benchmark": benchmark }])),
    { dir },
  );
  const summary: string[] = [];
  try {
    for (const name of CONFIGS) {
      say(`pulumi up --stack ${name}`);
      const stack = await ws.stack(name);
      const started = Date.now();
      const up = await stack.up({ onOutput: (s) => process.stdout.write(s), color: "never" });
      const t = up.outputs.restartTimings?.value ?? {};
      const b = up.outputs.benchmark?.value as BenchmarkSummary | null;
      summary.push(
        `${name.padEnd(14)} ${up.summary.result.padEnd(10)} up ${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s | drain ${t.drainSeconds} s, old process gone ${t.stopSeconds} s, GPU release ${t.gpuReleaseSeconds} s, load-to-ready ${t.loadToReadySeconds} s`,
        `${"".padEnd(14)} benchmark: ${b ? `${summaryLine(b)}${b.warnings.length ? `; warnings: ${b.warnings.join("; ")}` : ""}` : "none (benchmark.enabled false)"}`,
      );
    }
    say(`pulumi up --stack ${LAST} again: nothing changed, so nothing on the host is touched`);
    const again = await (await ws.stack(LAST)).up({ color: "never" });
    summary.push(`${LAST.padEnd(14)} no-op up: ${changesInWords(again.summary.resourceChanges)}`);
    say("summary");
    process.stdout.write(summary.join("\n") + "\n");
    say("comparison report, from the stacks' outputs");
    const source = stackSource("demo");
    const outDir = path.join(REPO_ROOT, "bench", "out");
    process.stdout.write(writeReport(outDir, reportHeading(source, "*"), await collectRows(source.dir, source.env, "*")));
    process.stdout.write(`\nwrote ${path.join(outDir, "report.md")} and ${path.join(outDir, "report.svg")} (the chart); npm run report writes them again from ${KEPT_WORKSPACES.demo}/\n`);
  } finally {
    say(`stopping ${HOST}`);
    await hosts.stop(HOST);
  }
}

if (require.main === module) {
  parseCommandOrExit("npm run demo --", COMMAND);
  void runWithHosts(demo, { name: "demo" });
}
