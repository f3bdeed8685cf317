// Writes docs/review-example.md from a real review, and docs/review-example.png as GitHub
// would show it (docs/review-look.sh): three stacks deployed on a simulated host, then one
// change that restarts one, turns another's window off, and measures the third again.
//   npx tsx docs/review-example.ts
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { runWithHosts } from "../simhost/owned-hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { REPO_ROOT } from "../lib/pulumi-env";
import { runReview } from "../components/review/review";

const STACKS = ["baseline", "b8t4-w2048", "b16t4-w2048"];
const BENCH = { runs: 3, warmupRuns: 1, maxTokens: 64, longContextTokens: [4096], concurrency: [1, 4], codingMaxTokens: 400 };

void runWithHosts(
  async (hosts) => {
    const host = await hosts.start(`review-example-${process.pid}`, { sglang: { profile: "ddtree-fork", loadSeconds: 3, warmupSeconds: 0.5 } });
    const config = (s: string) => ({ ...readRepoStackConfig(s), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": BENCH });
    const ws = simWorkspace(Object.fromEntries(STACKS.map((s) => [s, config(s)])));
    try {
      const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=example", "-c", "user.email=example@example.invalid", ...args], { cwd: ws.dir, encoding: "utf8" });
      fs.writeFileSync(path.join(ws.dir, ".gitignore"), "state/\nengine/\nplans/\n");
      git("init", "-q", "-b", "main");
      for (const s of STACKS) {
        process.stdout.write(`up ${s}\n`);
        await (await ws.stack(s)).up();
      }
      git("add", "-A");
      git("commit", "-qm", "base");
      ws.setStackConfig("b8t4-w2048", "speculative", { algorithm: "DDTREE", budget: 12, topk: 4, draftWindowSize: 2048, compactCache: true });
      ws.setStackConfig("b16t4-w2048", "speculative", { algorithm: "DDTREE", budget: 16, topk: 4, draftWindowSize: "none", compactCache: false });
      ws.setStackConfig("baseline", "benchmark", { ...BENCH, runId: "2" });
      git("commit", "-qam", "b8: budget 12; b16: no window; baseline: measure again");
      const { markdown } = await runReview({ dir: ws.dir, env: ws.env, base: "HEAD~1", plansDir: path.join(ws.dir, "plans"), progress: (l) => process.stdout.write(`${l}\n`) });
      const out = path.join(REPO_ROOT, "docs", "review-example.md");
      fs.writeFileSync(out, markdown);
      execFileSync("bash", [path.join(REPO_ROOT, "docs", "review-look.sh"), out, path.join(REPO_ROOT, "docs", "review-example.png")], { stdio: "inherit" });
      return 0;
    } finally {
      ws.cleanup();
    }
  },
  { name: "review example" },
);
