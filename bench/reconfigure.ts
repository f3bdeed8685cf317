// Benchmark: how much a safe reconfiguration costs beyond the unavoidable waits.
//
//   overhead ratio = wall time of `pulumi up` for a config change / (simulated load time + GPU release delay)
//
// at several load times, plus the engine's fixed cost (no-op `up`, `preview`). Each
// figure is the median of RUNS runs with min/max. Writes bench/results/reconfigure.{json,md}.
// Run: npx tsx bench/reconfigure.ts [--loads 10,30,60] [--runs 3] [--release 5]
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { summarize, Summary } from "./stats";

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
}

const LOADS = arg("loads", "10,30,60").split(",").map(Number);
const RUNS = Number(arg("runs", "3"));
const RELEASE = Number(arg("release", "5"));
const STABLE = Number(arg("stable", "0"));
const WARMUP = 0.5;
const CONFIGS = ["b8t4-w2048", "b16t4-w2048"];

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = Date.now();
  await fn();
  return (Date.now() - t) / 1000;
}

async function main(): Promise<void> {
  const host = await hosts.start(`bench-${process.pid}`, { sglang: { profile: "ddtree-fork", loadSeconds: LOADS[0], warmupSeconds: WARMUP } });
  // The stability window (safety.stableSeconds, default 10 s) is a deliberate wait; it is
  // off here so the ratio shows the machinery's own overhead. The benchmark resource is off too.
  const ws = simWorkspace({ bench: { ...readRepoStackConfig(CONFIGS[0]), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: STABLE }, "dflash-sglang:benchmark": { enabled: false } } });
  const results: { loadSeconds: number; releaseSeconds: number; upSeconds: Summary; ratio: Summary; phases: Record<string, Summary> }[] = [];
  let fixed: { noopUp: Summary; preview: Summary } | undefined;
  try {
    const stack = await ws.stack("bench");
    hosts.configure(host.name, JSON.stringify({ loadSeconds: LOADS[0] }));
    await stack.up(); // first deploy, not measured
    let which = 0;
    for (const load of LOADS) {
      hosts.configure(host.name, JSON.stringify({ loadSeconds: load }));
      hosts.fault(host.name, JSON.stringify({ gpuReleaseDelaySeconds: RELEASE }));
      const ups: number[] = [];
      const phases: Record<string, number[]> = { drainSeconds: [], stopSeconds: [], gpuReleaseSeconds: [], loadToReadySeconds: [] };
      for (let r = 0; r < RUNS; r++) {
        which = 1 - which;
        ws.setStackConfig("bench", "speculative", readRepoStackConfig(CONFIGS[which])["dflash-sglang:speculative"]);
        let outputs: Record<string, { value: any }> = {};
        ups.push(await timed(async () => (outputs = (await stack.up()).outputs)));
        for (const k of Object.keys(phases)) phases[k].push(outputs.restartTimings.value[k]);
        process.stderr.write(`load ${load} s run ${r + 1}/${RUNS}: up ${ups[ups.length - 1].toFixed(1)} s ${JSON.stringify(outputs.restartTimings.value)}\n`);
      }
      const unavoidable = load + RELEASE;
      results.push({
        loadSeconds: load,
        releaseSeconds: RELEASE,
        upSeconds: summarize(ups),
        ratio: summarize(ups.map((u) => u / unavoidable)),
        phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, summarize(v)])),
      });
    }
    const noop: number[] = [];
    const preview: number[] = [];
    for (let r = 0; r < Math.max(RUNS, 5); r++) {
      noop.push(await timed(() => stack.up()));
      preview.push(await timed(() => stack.preview()));
    }
    fixed = { noopUp: summarize(noop), preview: summarize(preview) };
  } finally {
    await hosts.stop(host.name);
    ws.cleanup();
  }
  const out = { command: `npx tsx bench/reconfigure.ts --loads ${LOADS.join(",")} --runs ${RUNS} --release ${RELEASE} --stable ${STABLE}`, date: new Date().toISOString(), machine: "2 cores, 24 GB", results, fixed };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "reconfigure.json"), JSON.stringify(out, null, 2) + "\n");
  const fmt = (s: Summary, digits = 1) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
  const md = [
    "# Reconfiguration overhead",
    "",
    `Command: \`${out.command}\` (${out.date}, ${out.machine}).`,
    "",
    "Each row: a config change (`pulumi up` alternating b8t4-w2048 / b16t4-w2048) on one simulated host whose",
    `SGLang takes the given load time and whose GPU memory is released ${RELEASE} s after the old process exits.`,
    `Ratio = wall time of \`pulumi up\` / (load + release). Median (min-max) of ${RUNS} runs. safety.stableSeconds = ${STABLE}`,
    "(the post-ready stability window, a deliberate wait of its own: it adds exactly that many seconds).",
    "",
    "| load s | up wall s | ratio | drain s | old process gone s | GPU release s | load-to-ready s |",
    "|---:|---:|---:|---:|---:|---:|---:|",
    ...results.map((r) => `| ${r.loadSeconds} | ${fmt(r.upSeconds)} | ${fmt(r.ratio, 3)} | ${fmt(r.phases.drainSeconds)} | ${fmt(r.phases.stopSeconds)} | ${fmt(r.phases.gpuReleaseSeconds)} | ${fmt(r.phases.loadToReadySeconds)} |`),
    "",
    "Engine fixed cost (nothing to change):",
    "",
    `- no-op \`pulumi up\`: ${fmt(fixed!.noopUp, 2)} s`,
    `- \`pulumi preview\`: ${fmt(fixed!.preview, 2)} s`,
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, "reconfigure.md"), md);
  process.stdout.write(md);
}

main().catch((e) => {
  process.stderr.write(`benchmark failed: ${(e as Error).message}\n`);
  process.exit(1);
});
