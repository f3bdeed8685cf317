// Benchmark: is the benchmark client itself a bottleneck? Single-stream decode tokens/s
// the client measures against a simulated server (a local process, no host) configured
// at increasing rates, versus the simulator's ground truth. Median (min-max) of RUNS
// requests per rate. Writes bench/results/client-overhead.{json,md}.
// Run: npx tsx bench/client-overhead.ts [--runs 5] [--tokens 2000] (--help: the options)
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { freePort, launch, sandbox, status, until } from "../test/support/localSim";
import { streamChat } from "../components/benchmark/client";
import { generationDecodeRate, specSettings } from "../simhost/sim/sglang/perf";
import { summarize } from "./stats";
import { option, parseCommandOrExit, positiveInteger } from "../lib/cli";

const { options } = parseCommandOrExit("npx tsx bench/client-overhead.ts", {
  summary: "Measures single-stream decode tokens/s through the benchmark client against a local simulated server at\nincreasing speeds, versus the simulator's ground truth. Writes bench/results/client-overhead.{json,md}.",
  options: {
    runs: option({ type: positiveInteger, placeholder: "N", description: "measured requests per speed", default: "5" }),
    tokens: option({ type: positiveInteger, placeholder: "N", description: "output tokens per request", default: "2000" }),
  },
});
const RUNS = options.runs;
const TOKENS = options.tokens;
const SCALES = [1, 5, 10.8, 20, 40];

async function main(): Promise<void> {
  const spec = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});
  const rows: { speedScale: number; truth: number; measured: ReturnType<typeof summarize>; ratio: ReturnType<typeof summarize> }[] = [];
  for (const speedScale of SCALES) {
    const sb = sandbox({ speedScale });
    const port = await freePort();
    const args = ["--model-path", path.join(sb.dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1",
      "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(sb.dir, "drafter"), "--speculative-draft-window-size", "2048"];
    const server = launch(sb.env, args);
    try {
      await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
      const ep = { baseUrl: `http://127.0.0.1:${port}`, model: "m" };
      await streamChat(ep, "warm up", 64);
      const measured: number[] = [];
      let promptTokens = 0;
      for (let r = 0; r < RUNS; r++) {
        const res = await streamChat(ep, "Tell me about speculative decoding.", TOKENS);
        measured.push(res.decodeTokensPerSecond);
        promptTokens = res.promptTokens;
      }
      const truth = generationDecodeRate(spec, promptTokens, TOKENS, speedScale);
      rows.push({ speedScale, truth, measured: summarize(measured), ratio: summarize(measured.map((m) => m / truth)) });
      process.stderr.write(`speedScale ${speedScale}: truth ${truth} tok/s, measured median ${summarize(measured).median.toFixed(1)}\n`);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
      sb.cleanup();
    }
  }
  const out = { command: `npx tsx bench/client-overhead.ts --runs ${RUNS} --tokens ${TOKENS}`, date: new Date().toISOString(), machine: "2 cores, 24 GB", rows };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "client-overhead.json"), JSON.stringify(out, null, 2) + "\n");
  const f = (x: number, d = 1) => x.toFixed(d);
  const md = [
    "# Benchmark client overhead",
    "",
    `Command: \`${out.command}\` (${out.date}, ${out.machine}).`,
    "",
    `Single-stream decode tokens/s measured by our client (\`components/benchmark/client.ts\`) for a ${TOKENS}-token`,
    "generation from the simulated SGLang server (a local process) at increasing speeds, against the simulator's",
    `ground truth for the same generation (\`generationDecodeRate\`: the model slows slightly as the context grows).`,
    `Median (min-max) of ${RUNS} requests. Ratio 1.000 = the client adds nothing measurable.`,
    "",
    "| ground truth tok/s | measured tok/s | ratio measured/truth |",
    "|---:|---:|---:|",
    ...rows.map((r) => `| ${f(r.truth)} | ${f(r.measured.median)} (${f(r.measured.min)}-${f(r.measured.max)}) | ${f(r.ratio.median, 3)} (${f(r.ratio.min, 3)}-${f(r.ratio.max, 3)}) |`),
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, "client-overhead.md"), md);
  process.stdout.write(md);
}

main().catch((e) => {
  process.stderr.write(`client overhead benchmark failed: ${(e as Error).message}\n`);
  process.exit(1);
});
