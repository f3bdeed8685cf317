// The README's walkthrough, run as written: the lines of its block, one after the other in one
// shell, in a fresh clone of this working tree (its files committed to a new repository, as a
// clone has them), under the machine's Node.js (20 here: set-up brings 22) or, with
// DFLASH_WALKTHROUGH_NODE=22, with the cached Node.js 22 first on PATH. Then it checks what a
// newcomer would: the report before and after the destroy, and that no tracked file changed.
// One change to the lines: the host's name, `try1`, is made unique, so that a host of that
// name the user started by following the README is never touched.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "../lib/pulumi-env";
import { alive, freshClone, machinePath } from "./support/freshClone";

const README = fs.readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");

/** Pure: the lines of the block after the walkthrough marker, as a user types them. */
function walkthroughLines(readme: string): string[] {
  const at = readme.indexOf("<!-- walkthrough:");
  assert.ok(at >= 0, "README.md has no walkthrough marker");
  const block = readme.slice(at).match(/```sh\n([\s\S]*?)\n```/);
  assert.ok(block, "no ```sh block after the walkthrough marker");
  return block[1].split("\n").filter((l) => l.trim() !== "");
}

function runLines(dir: string, lines: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  // Then what Pulumi's language host ran the program with (`pulumi about` asks it).
  const script = ["set -eo pipefail", ...lines.flatMap((l) => [`echo ${JSON.stringify(`+++ ${l}`)}`, l]), "echo '+++ npx pulumi about'", "npx pulumi about"].join("\n");
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", script], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

test("the README's walkthrough, run as written in a fresh clone: preview, up, report, destroy, the report kept, nothing tracked changed", async () => {
  const lines = walkthroughLines(README);
  assert.ok(lines.some((l) => l.startsWith("npx pulumi up ")) && lines.some((l) => l.includes("simhost -- stop")), lines.join("\n"));
  const host = `walk-${process.pid}`;
  // Hosts of earlier runs of this test that were killed before they could stop theirs (the
  // walkthrough's host is a kept one, which nothing reclaims): their pid is gone.
  for (const line of execFileSync("node", ["--import", "tsx", path.join(REPO_ROOT, "simhost/cli.ts"), "status"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean)) {
    const name = (JSON.parse(line) as { name?: string }).name ?? "";
    const pid = Number(/^walk-(\d+)$/.exec(name)?.[1]);
    if (pid && pid !== process.pid && !alive(pid)) execFileSync("node", ["--import", "tsx", path.join(REPO_ROOT, "simhost/cli.ts"), "stop", name], { cwd: REPO_ROOT, stdio: "ignore" });
  }
  const mine = lines.map((l) => l.replace(/\btry1\b/g, host));
  const dir = freshClone("walkthrough-");
  const cachedNode = (process.env.PATH ?? "").split(":").find((d) => d.includes("dflash-pulumi/node/"));
  const node22 = process.env.DFLASH_WALKTHROUGH_NODE === "22";
  if (node22) assert.ok(cachedNode, "DFLASH_WALKTHROUGH_NODE=22 needs the cached Node.js 22 on PATH (run it under npm test)");
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: node22 ? `${cachedNode}:${machinePath()}` : machinePath() };
  for (const k of ["PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_HOME"]) delete env[k];
  const machineNode = execFileSync("node", ["-v"], { env, encoding: "utf8" }).trim();
  try {
    const r = await runLines(dir, mine, env);
    const tail = r.output.slice(-6000);
    assert.equal(r.code, 0, `the walkthrough stopped (machine's node ${machineNode}):\n${tail}`);
    // The program ran under Node.js 22, whatever the machine's is.
    assert.match(r.output, /This project is written in nodejs: executable='[^']+' version='v22\./, tail);
    // The preview said where the stack runs and what it installs; the up proved it.
    assert.match(r.output, /dflash\.local\.yaml \(this checkout's, git-ignored\) sets host\.address, .* for stack b16t4-w2048/);
    assert.match(r.output, /sglang-k26 on 127\.0\.0\.\d+: not installed yet; `up` installs this stack's unit/);
    // The report after the up, and the one after the destroy with the same numbers, marked. A
    // lone configuration is never "best" (no baseline on the host shows it beats no speculation).
    const reports = [...r.output.matchAll(/^\| b16t4-w2048((?: \(destroyed\))? \|.*)$/gm)].map((m) => m[1]);
    assert.equal([...r.output.matchAll(/\*\*No best configuration\*\*: b16t4-w2048 is the only eligible configuration/g)].length, 2, tail);
    assert.equal(reports.length, 2, tail);
    assert.doesNotMatch(reports[0], /destroyed/);
    assert.match(reports[1], /^ \(destroyed\) \|.* \| \d{4}-\d\d-\d\d \d\d:\d\d \|$/);
    const numbers = (row: string) => row.split("|").slice(2, 8).join("|");
    assert.equal(numbers(reports[1]), numbers(reports[0]));
    assert.match(r.output, /note: took the removed stack's encryptionsalt out of stacks\/Pulumi\.b16t4-w2048\.yaml/);
    assert.match(r.output, /keeping the stack's settings file in stacks\//);
    // Nothing a commit would pick up: the tracked files are as cloned, the new ones ignored.
    assert.equal(execFileSync("git", ["status", "--porcelain"], { cwd: dir, encoding: "utf8" }), "");
  } finally {
    // Whatever happened: the host the walkthrough started is stopped.
    try {
      execFileSync("bash", ["-c", `npm run --silent simhost -- stop ${host}`], { cwd: dir, env, stdio: "ignore" });
    } catch {
      // Already stopped (the last line ran), or never started.
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
