// `npm run grid -- --budgets 4,8,16 --topks 4,6 --windows 2048,none [--compact-cache auto|on|off] [--out stacks] [--force]`
// Writes one stack file per valid combination; existing files are kept unless --force.
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { gridStacks } from "../components/sweep/grid";

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

function numbers(name: string, dflt: string): number[] {
  const raw = arg(name) ?? dflt;
  const out = raw.split(",").map((x) => Number(x.trim()));
  if (out.some((x) => !Number.isInteger(x) || x <= 0)) throw new Error(`--${name} must be a comma list of positive integers, got "${raw}"`);
  return out;
}

const windows = (arg("windows") ?? "2048,none").split(",").map((w) => (w.trim() === "none" ? "none" : Number(w.trim()))) as (number | "none")[];
if (windows.some((w) => w !== "none" && (!Number.isInteger(w) || w <= 0))) throw new Error('--windows must list positive integers or "none"');
const compact = (arg("compact-cache") ?? "auto") as "on" | "off" | "auto";
if (!["on", "off", "auto"].includes(compact)) throw new Error("--compact-cache must be auto, on or off");
const outDir = path.resolve(arg("out") ?? path.join(REPO_ROOT, "stacks"));
const { stacks, skipped } = gridStacks({ budgets: numbers("budgets", "4,8,16"), topks: numbers("topks", "4"), windows, compactCache: compact });
fs.mkdirSync(outDir, { recursive: true });
for (const s of stacks) {
  const file = path.join(outDir, `Pulumi.${s.name}.yaml`);
  if (fs.existsSync(file) && !process.argv.includes("--force")) {
    process.stdout.write(`kept     ${file} (exists; --force to overwrite)\n`);
    continue;
  }
  fs.writeFileSync(file, s.yaml);
  process.stdout.write(`wrote    ${file}\n`);
}
for (const s of skipped) process.stdout.write(`skipped  ${s.name}: ${s.reason}\n`);
