// Benchmark: the engine's fixed cost of one operation (a no-op `pulumi up`, a `pulumi preview`
// with nothing to change), with Node.js's compile cache (scripts/node-env.sh sets
// NODE_COMPILE_CACHE for every process) and without it (NODE_DISABLE_COMPILE_CACHE=1), side by
// side in one run: two simulated hosts, one workspace each, taking turns operation by operation.
// Writes bench/results/engine-cost.{json,md}.
// Run: npx tsx bench/engine-cost.ts [--runs 7]
import * as fs from "node:fs";
import * as path from "node:path";
import { execFileSync, spawn } from "node:child_process";
import type { Stack } from "@pulumi/pulumi/automation";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { readRepoStackConfig, simHostConfig, simWorkspace, type SimWorkspace } from "../lib/workspace";
import { summarize, Summary, timed } from "./stats";
import { option, parseCommandOrExit, positiveInteger, text } from "../lib/cli";
import { checkoutRevision } from "../lib/checkout";

const { options } = parseCommandOrExit("npx tsx bench/engine-cost.ts", {
  summary: "Measures a no-op `pulumi up` and `pulumi preview` of one stack on a simulated host, with and without\nNode.js's compile cache, taking turns; then `npx pulumi preview` through the project's wrapper, with the\ntoolchain checked by its stat record and hashed. Writes bench/results/engine-cost.{json,md}.",
  options: {
    runs: option({ type: positiveInteger, placeholder: "N", description: "operations of each kind measured per variant", default: "7" }),
    baseline: option({ type: text, placeholder: "REV", description: "a git revision to measure beside this checkout (both with the compile cache), instead of the cache's own effect" }),
  },
});

const VARIANTS: { name: string; env: Record<string, string>; root?: string }[] = [
  { name: "compile cache (as shipped)", env: {} },
  { name: "no compile cache", env: { NODE_DISABLE_COMPILE_CACHE: "1" } },
];

/** The toolchain folders whose files ensure.sh checks (they hold SHA256SUMS). */
function toolchainRecords(env: Record<string, string>): string[] {
  const bin = execFileSync("bash", [path.join(REPO_ROOT, "toolchain", "ensure.sh")], { env, encoding: "utf8" }).trim();
  const cache = path.dirname(path.dirname(bin));
  return path.basename(path.dirname(bin)).split("+").map((d) => path.join(cache, d, "SHA256SUMS.stat"));
}

/**
 * `npx pulumi preview` as a user types it in the project folder, run on the workspace's stack:
 * from a shell whose PATH lacks the toolchain (the workspace's first entry), as a user's does, so
 * that ensure.sh checks its own cached build (a pinned `pulumi` already on PATH is used as it is).
 */
function wrapperPreview(ws: { dir: string; env: Record<string, string> }, stack: string): Promise<void> {
  const env = { ...ws.env, PATH: ws.env.PATH.split(":").slice(1).join(":") };
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["pulumi", "-C", ws.dir, "preview", "--stack", stack, "--non-interactive"], { cwd: REPO_ROOT, env, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d));
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`npx pulumi preview exited ${code}: ${err}`))));
  });
}

const fmt = (s: Summary) => `${s.median.toFixed(2)} (${s.min.toFixed(2)}-${s.max.toFixed(2)})`;

type OpRow = { variant: string; noopUp: Summary; preview: Summary };

/** Each setup's operations, summarized. */
const opRows = (setups: { name: string; up: number[]; preview: number[] }[]): OpRow[] => setups.map((s) => ({ variant: s.name, noopUp: summarize(s.up), preview: summarize(s.preview) }));

/** The markdown table of a no-op `up` and a `preview` per row; `label` heads the first column. */
const opTable = (label: string, rows: OpRow[]): string[] => [`| ${label} | no-op \`pulumi up\` s | \`pulumi preview\` s |`, "|---|---:|---:|", ...rows.map((r) => `| ${r.variant} | ${fmt(r.noopUp)} | ${fmt(r.preview)} |`)];

async function main(owned: OwnedHosts): Promise<void> {
  const started = new Date().toISOString();
  const setups: { name: string; env: Record<string, string>; ws: SimWorkspace; stack: Stack; up: number[]; preview: number[] }[] = [];
  const baseline = options.baseline ? checkoutRevision(options.baseline) : undefined;
  const variants = baseline ? [{ name: `baseline ${options.baseline}`, env: {}, root: baseline.root }, { name: "this checkout", env: {} }] : VARIANTS;
  for (const [i, v] of variants.entries()) {
    const host = await owned.start(`cost-${i}-${process.pid}`, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.5 } });
    const ws = simWorkspace({ bench: { ...readRepoStackConfig("b8t4-w2048"), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 0 }, "dflash-sglang:benchmark": { enabled: false } } }, { projectRoot: v.root });
    Object.assign(ws.env, v.env);
    const stack = await ws.stack("bench");
    await stack.up(); // the first deploy, not measured
    await stack.up(); // one no-op to fill the cache, not measured
    setups.push({ ...v, ws, stack, up: [] as number[], preview: [] as number[] });
  }
  const wrapper = { recorded: [] as number[], hashed: [] as number[] };
  try {
    for (let r = 0; r < options.runs; r++) {
      // Turns alternate which variant goes first.
      for (const s of r % 2 ? [...setups].reverse() : setups) {
        s.up.push(await timed(() => s.stack.up()));
        s.preview.push(await timed(() => s.stack.preview()));
        process.stderr.write(`${s.name}: run ${r + 1}/${options.runs}: no-op up ${s.up.at(-1)!.toFixed(2)} s, preview ${s.preview.at(-1)!.toFixed(2)} s\n`);
      }
    }
    if (baseline) return writeBaseline(started, setups);
    // The user's command, through the wrapper, on the first workspace.
    const records = toolchainRecords(setups[0].ws.env);
    await wrapperPreview(setups[0].ws, "bench"); // fills the stat record, not measured
    for (let r = 0; r < options.runs; r++) {
      for (const hashed of r % 2 ? [true, false] : [false, true]) {
        if (hashed) for (const f of records) fs.rmSync(f, { force: true });
        (hashed ? wrapper.hashed : wrapper.recorded).push(await timed(() => wrapperPreview(setups[0].ws, "bench")));
        process.stderr.write(`npx pulumi preview, toolchain ${hashed ? "hashed" : "checked by its stat record"}: run ${r + 1}/${options.runs}: ${(hashed ? wrapper.hashed : wrapper.recorded).at(-1)!.toFixed(2)} s\n`);
      }
    }
  } finally {
    for (const s of setups) s.ws.cleanup();
    baseline?.remove();
  }
  const rows = opRows(setups);
  const wrapperRows = [
    { variant: "toolchain checked by its stat record (as shipped)", preview: summarize(wrapper.recorded) },
    { variant: "toolchain hashed on every command (before a7d8a77)", preview: summarize(wrapper.hashed) },
  ];
  const out = path.join(REPO_ROOT, "bench", "results");
  fs.writeFileSync(path.join(out, "engine-cost.json"), JSON.stringify({ started, runs: options.runs, rows, wrapper: wrapperRows }, null, 2) + "\n");
  const [on, off] = rows;
  fs.writeFileSync(
    path.join(out, "engine-cost.md"),
    [
      "# The engine's fixed cost of one operation",
      "",
      `Command: \`npx tsx bench/engine-cost.ts --runs ${options.runs}\` (${started}).`,
      "",
      "One stack (b8t4-w2048, benchmark off) on a simulated host, nothing to change; two hosts and two workspaces, one per variant, taking turns operation by operation.",
      `Median (min-max) of ${options.runs} operations, in seconds of wall time as the Automation API's caller sees them.`,
      "",
      ...opTable("variant", rows),
      "",
      `With the cache / without, on the medians: no-op up ${(on.noopUp.median / off.noopUp.median).toFixed(3)}, preview ${(on.preview.median / off.preview.median).toFixed(3)}.`,
      "",
      "The command a user types in the project folder, `npx pulumi preview` (scripts/pulumi.sh: toolchain/ensure.sh, scripts/pulumi-guard.ts, then the CLI), on the first workspace's stack, taking turns:",
      "",
      "| variant | `npx pulumi preview` s |",
      "|---|---:|",
      ...wrapperRows.map((r) => `| ${r.variant} | ${fmt(r.preview)} |`),
      "",
      `As shipped / hashed, on the medians: ${(wrapperRows[0].preview.median / wrapperRows[1].preview.median).toFixed(3)} (${(wrapperRows[1].preview.median - wrapperRows[0].preview.median).toFixed(2)} s less per command).`,
      "",
    ].join("\n"),
  );
  process.stdout.write(fs.readFileSync(path.join(out, "engine-cost.md"), "utf8"));
}

/** --baseline: the two checkouts' operations, side by side. */
function writeBaseline(started: string, setups: { name: string; up: number[]; preview: number[] }[]): void {
  const rows = opRows(setups);
  const out = path.join(REPO_ROOT, "bench", "results");
  fs.writeFileSync(path.join(out, "engine-cost-baseline.json"), JSON.stringify({ started, runs: options.runs, baseline: options.baseline, rows }, null, 2) + "\n");
  const [base, head] = rows;
  fs.writeFileSync(
    path.join(out, "engine-cost-baseline.md"),
    [
      "# The engine's fixed cost of one operation, against an earlier revision",
      "",
      `Command: \`npx tsx bench/engine-cost.ts --runs ${options.runs} --baseline ${options.baseline}\` (${started}).`,
      "",
      `One stack (b8t4-w2048, benchmark off) on a simulated host, nothing to change; a checkout of ${options.baseline} and this one, each on its own host and workspace, both with Node.js's compile cache, taking turns operation by operation.`,
      `Median (min-max) of ${options.runs} operations, in seconds of wall time as the Automation API's caller sees them.`,
      "",
      ...opTable("version", rows),
      "",
      `This checkout / the baseline, on the medians: no-op up ${(head.noopUp.median / base.noopUp.median).toFixed(3)} (${(base.noopUp.median - head.noopUp.median).toFixed(2)} s less), preview ${(head.preview.median / base.preview.median).toFixed(3)} (${(base.preview.median - head.preview.median).toFixed(2)} s less).`,
      "",
    ].join("\n"),
  );
  process.stdout.write(fs.readFileSync(path.join(out, "engine-cost-baseline.md"), "utf8"));
}

void runWithHosts(main, { name: "benchmark" });
