// Benchmark: how much a safe reconfiguration costs beyond the unavoidable waits.
//
//   overhead ratio = wall time of `pulumi up` for a config change / (simulated load time + GPU release delay)
//
// at several load times, plus the engine's fixed cost (no-op `up`, `preview`). Each
// figure is the median of RUNS runs with min/max. Writes bench/results/<out>.{json,md} (default reconfigure).
// Run: npx tsx bench/reconfigure.ts [--loads 10,30,60] [--runs 3] [--release 5] [--baseline REV] (--help: the options)
// With --baseline, a checkout of REV runs the same changes on its own host, turn by turn.
// Every run's phases are kept (the JSON's and the report's per-run table), with the floor they
// set: the ratio at no cost of the tool's own, and with a no-op \`up\`'s cost, which every
// \`up\` pays (the engine, the program, the hosts' reads).
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { checkoutRevision } from "../lib/checkout";
import { summarize, Summary, timed } from "./stats";
import { prng } from "../lib/prng";
import { listOf, nonNegativeNumber, option, parseCommandOrExit, positiveInteger, positiveNumber, text } from "../lib/cli";

const { options } = parseCommandOrExit("npx tsx bench/reconfigure.ts", {
  summary: "Measures the wall time of `pulumi up` for a config change on a simulated host against its unavoidable waits\n(load + GPU release), and the engine's fixed cost, with every run's phases and the floor they set.\nWrites bench/results/<out>.{json,md} (--out, default reconfigure).",
  options: {
    loads: option({ type: listOf(positiveNumber), placeholder: "LIST", description: "simulated weight load times, in seconds", default: "10,30,60" }),
    runs: option({ type: positiveInteger, placeholder: "N", description: "changes measured per load time", default: "3" }),
    release: option({ type: nonNegativeNumber, placeholder: "S", description: "seconds until GPU memory is free after the old process exits", default: "5" }),
    stable: option({ type: nonNegativeNumber, placeholder: "S", description: "safety.stableSeconds, the deliberate post-ready wait", default: "0" }),
    baseline: option({ type: text, placeholder: "REV", description: "a git revision to measure side by side with this checkout, each on its own host" }),
    jitter: option({ type: nonNegativeNumber, placeholder: "S", description: "before each measured change, wait a seeded uniform 0-S s (not counted), so that SIGTERM falls anywhere in SGLang's 5 s watchdog period, as a user's change does (0: changes follow each other at once, and the tick falls where the tool's own timing puts it)", default: "5" }),
    seed: option({ type: positiveInteger, placeholder: "N", description: "the seed of those waits", default: "1" }),
    out: option({ type: text, placeholder: "NAME", description: "results name under bench/results/", default: "reconfigure" }),
  },
});
const LOADS = options.loads;
const RUNS = options.runs;
const RELEASE = options.release;
const STABLE = options.stable;
const WARMUP = 0.5;
const CONFIGS = ["b8t4-w2048", "b16t4-w2048"];
/** A git revision to measure side by side with this checkout (e.g. the version before a change). */
const BASELINE = options.baseline ?? "";

/** One measured change: its `up`'s wall time and the restart's phases (restartTimings), in seconds. */
interface RunRow {
  upSeconds: number;
  drainSeconds: number;
  stopSeconds: number;
  gpuReleaseSeconds: number;
  loadToReadySeconds: number;
}
const PHASES = ["drainSeconds", "stopSeconds", "gpuReleaseSeconds", "loadToReadySeconds"] as const;
const phaseSum = (r: RunRow) => PHASES.reduce((sum, p) => sum + r[p], 0);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

interface Variant {
  name: string;
  host: hosts.HostInfo;
  ws: ReturnType<typeof simWorkspace>;
  results: { loadSeconds: number; releaseSeconds: number; upSeconds: Summary; ratio: Summary; phases: Record<string, Summary>; runs: RunRow[] }[];
  fixed?: { noopUp: Summary; preview: Summary };
}

async function main(owned: OwnedHosts): Promise<void> {
  const baseline = BASELINE ? checkoutRevision(BASELINE) : undefined;
  const variants: Variant[] = [];
  try {
    for (const [name, root] of [...(baseline ? [[`baseline ${BASELINE}`, baseline.root]] : []), ["this checkout", REPO_ROOT]] as [string, string][]) {
      const host = await owned.start(`bench-${variants.length}-${process.pid}`, { sglang: { profile: "ddtree-fork", loadSeconds: LOADS[0], warmupSeconds: WARMUP } });
      // The stability window (safety.stableSeconds, default 10 s) is a deliberate wait; it is
      // off here so the ratio shows the machinery's own overhead. The benchmark resource is off too.
      const ws = simWorkspace({ bench: { ...readRepoStackConfig(CONFIGS[0]), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: STABLE }, "dflash-sglang:benchmark": { enabled: false } } }, { projectRoot: root });
      variants.push({ name, host, ws, results: [] });
      await (await ws.stack("bench")).up(); // first deploy, not measured
    }
    // Variants take turns run by run, so both see the same machine.
    let which = 0;
    const jitter = prng(options.seed);
    for (const load of LOADS) {
      const ups = variants.map(() => [] as number[]);
      const phases = variants.map((): Record<string, number[]> => ({ drainSeconds: [], stopSeconds: [], gpuReleaseSeconds: [], loadToReadySeconds: [] }));
      const rest = variants.map(() => [] as number[]);
      const rows = variants.map(() => [] as RunRow[]);
      for (const v of variants) {
        hosts.configure(v.host.name, JSON.stringify({ loadSeconds: load }));
        hosts.fault(v.host.name, JSON.stringify({ gpuReleaseDelaySeconds: RELEASE }));
      }
      for (let r = 0; r < RUNS; r++) {
        which = 1 - which;
        for (const [k, v] of variants.entries()) {
          v.ws.setStackConfig("bench", "speculative", readRepoStackConfig(CONFIGS[which])["dflash-sglang:speculative"]);
          const stack = await v.ws.stack("bench");
          // Where SIGTERM falls in SGLang's watchdog period decides the drain (0-5 s). Back to
          // back, the changes would put it at the same place each time, decided by the tool's
          // own timing rather than by chance; a user's change comes at any moment.
          const wait = jitter() * options.jitter;
          if (wait > 0) await new Promise((r) => setTimeout(r, wait * 1000));
          let outputs: Record<string, { value: any }> = {};
          ups[k].push(await timed(async () => (outputs = (await stack.up()).outputs)));
          const row = { upSeconds: ups[k][ups[k].length - 1], ...Object.fromEntries(PHASES.map((p) => [p, Number(outputs.restartTimings.value[p])])) } as RunRow;
          rows[k].push(row);
          for (const p of PHASES) phases[k][p].push(row[p]);
          // The rest of the up's wall time: the engine, SSH, the steps' own checks and waits.
          rest[k].push(row.upSeconds - phaseSum(row));
          process.stderr.write(`${v.name}: load ${load} s run ${r + 1}/${RUNS}: up ${ups[k][ups[k].length - 1].toFixed(1)} s ${JSON.stringify(outputs.restartTimings.value)}\n`);
        }
      }
      const unavoidable = load + RELEASE;
      for (const [k, v] of variants.entries()) {
        v.results.push({
          loadSeconds: load,
          releaseSeconds: RELEASE,
          upSeconds: summarize(ups[k]),
          ratio: summarize(ups[k].map((u) => u / unavoidable)),
          phases: { ...Object.fromEntries(Object.entries(phases[k]).map(([p, x]) => [p, summarize(x)])), restSeconds: summarize(rest[k]) },
          runs: rows[k],
        });
      }
    }
    const noop = variants.map(() => [] as number[]);
    const preview = variants.map(() => [] as number[]);
    for (let r = 0; r < Math.max(RUNS, 5); r++) {
      for (const [k, v] of variants.entries()) {
        const stack = await v.ws.stack("bench");
        noop[k].push(await timed(() => stack.up()));
        preview[k].push(await timed(() => stack.preview()));
      }
    }
    variants.forEach((v, k) => (v.fixed = { noopUp: summarize(noop[k]), preview: summarize(preview[k]) }));
  } finally {
    for (const v of variants) {
      await hosts.stop(v.host.name);
      v.ws.cleanup();
    }
    baseline?.remove();
  }
  const command = `npx tsx bench/reconfigure.ts --loads ${LOADS.join(",")} --runs ${RUNS} --release ${RELEASE} --stable ${STABLE}${BASELINE ? ` --baseline ${BASELINE}` : ""}${options.jitter !== 5 ? ` --jitter ${options.jitter}` : ""}${options.seed !== 1 ? ` --seed ${options.seed}` : ""}${options.out !== "reconfigure" ? ` --out ${options.out}` : ""}`;
  const out = { command, date: new Date().toISOString(), machine: "2 cores, 24 GB", variants: variants.map((v) => ({ name: v.name, results: v.results, fixed: v.fixed })) };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${options.out}.json`), JSON.stringify(out, null, 2) + "\n");
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
    options.jitter > 0
      ? `Before each change, a wait of 0-${options.jitter} s (uniform, seed ${options.seed}; not counted), so that SIGTERM falls anywhere in SGLang's 5 s watchdog period, as a user's change does.`
      : "Changes follow each other at once: where SIGTERM falls in SGLang's 5 s watchdog period is decided by the tool's own timing, the same each run, not by chance.",
    ...(BASELINE ? ["", `Both versions ran in the same process, each on its own simulated host, taking turns run by run: the baseline is \`${BASELINE}\`.`] : []),
    "",
    "The phases are the stack's restartTimings: drain (SIGTERM to the main process's exit: SGLang's own drain, which notices the signal at its watchdog's next 5 s tick), old process gone (the rest of its group), GPU release, load to ready (start to a real generation served). The rest: the up's wall time less the phases (the engine, SSH, the steps' own checks).",
    "",
    "| load s | version | up wall s | ratio | drain s | old process gone s | GPU release s | load-to-ready s | the rest s |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ...LOADS.flatMap((_, i) => variants.map((v) => {
      const r = v.results[i];
      return `| ${r.loadSeconds} | ${v.name} | ${fmt(r.upSeconds)} | ${fmt(r.ratio, 3)} | ${fmt(r.phases.drainSeconds)} | ${fmt(r.phases.stopSeconds)} | ${fmt(r.phases.gpuReleaseSeconds)} | ${fmt(r.phases.loadToReadySeconds)} | ${fmt(r.phases.restSeconds)} |`;
    })),
    "",
    "Engine fixed cost (nothing to change), median (min-max) of " + Math.max(RUNS, 5) + " runs:",
    "",
    "| version | no-op `pulumi up` s | `pulumi preview` s |",
    "|---|---:|---:|",
    ...variants.map((v) => `| ${v.name} | ${fmt(v.fixed!.noopUp, 2)} | ${fmt(v.fixed!.preview, 2)} |`),
    "",
    ...floorLines(variants),
  ].join("\n");
  fs.writeFileSync(path.join(dir, `${options.out}.md`), md);
  process.stdout.write(md);
}

/**
 * Every run, and the floor its phases set: "SGLang and the GPU" is the ratio the change would
 * have at no cost of the tool's own (the phases alone over load + release); "with a no-op up"
 * adds the median no-op \`up\` of the same version, which every \`up\` pays before and after
 * its steps (the engine, the program, the hosts' reads), so no change can cost less.
 */
function floorLines(variants: Variant[]): string[] {
  const f = (x: number, d = 1) => x.toFixed(d);
  const lines = ["## Every run, and the floor its phases set", "", "Per run: the ratio as measured; \"SGLang and the GPU\": the phases alone (drain, old process gone, GPU release, load to ready) over load + release, the ratio at no cost of the tool's own; \"with a no-op `up`\": those phases plus the version's median no-op `up`, which every `up` pays (the engine, the program, the hosts' reads), so no change costs less. Means are over the runs (the drain depends on where SGLang's 5 s watchdog tick falls, so its mean is what a user gets).", ""];
  for (const v of variants) {
    const noop = v.fixed!.noopUp.median;
    for (const r of v.results) {
      const unavoidable = r.loadSeconds + r.releaseSeconds;
      lines.push(`### ${v.name}, load ${r.loadSeconds} s`, "", "| run | up wall s | ratio | drain s | old process gone s | GPU release s | load-to-ready s | the rest s | SGLang and the GPU | with a no-op `up` |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
      r.runs.forEach((x, i) => lines.push(`| ${i + 1} | ${f(x.upSeconds)} | ${f(x.upSeconds / unavoidable, 3)} | ${f(x.drainSeconds)} | ${f(x.stopSeconds)} | ${f(x.gpuReleaseSeconds)} | ${f(x.loadToReadySeconds)} | ${f(x.upSeconds - phaseSum(x))} | ${f(phaseSum(x) / unavoidable, 3)} | ${f((phaseSum(x) + noop) / unavoidable, 3)} |`));
      const m = (k: keyof RunRow) => mean(r.runs.map((x) => x[k]));
      const sum = mean(r.runs.map(phaseSum));
      lines.push(`| mean | ${f(m("upSeconds"))} | ${f(m("upSeconds") / unavoidable, 3)} | ${f(m("drainSeconds"))} | ${f(m("stopSeconds"))} | ${f(m("gpuReleaseSeconds"))} | ${f(m("loadToReadySeconds"))} | ${f(m("upSeconds") - sum)} | ${f(sum / unavoidable, 3)} | ${f((sum + noop) / unavoidable, 3)} |`, "");
    }
  }
  return lines;
}

void runWithHosts(main, { name: "benchmark" });
