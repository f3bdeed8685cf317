// Benchmark aid: where one reconfiguration's seconds go, as the engine reports them. Boots a
// simulated host, deploys one configuration, then changes it (b8t4-w2048 <-> b16t4-w2048) and
// prints each engine event of the change with its time since the `up` began: each resource's
// start and end, and the steps' progress lines (SIGTERM, drain, GPU release, serving, proven).
// Nothing is written; bench/results/reconfigure-floor.md quotes one run.
// Run: npx tsx bench/up-timeline.ts [--load 5] [--changes 2] (--help: the options)
import { engineTimeline } from "./stats";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { option, parseCommandOrExit, positiveInteger, positiveNumber } from "../lib/cli";

const { options } = parseCommandOrExit("npx tsx bench/up-timeline.ts", {
  summary: "Prints the engine's events of a reconfiguration on a simulated host, each with its time since the `up` began.",
  options: {
    load: option({ type: positiveNumber, placeholder: "S", description: "the simulated weight load, in seconds", default: "5" }),
    changes: option({ type: positiveInteger, placeholder: "N", description: "changes to time, one after the other", default: "2" }),
  },
});
const CONFIGS = ["b8t4-w2048", "b16t4-w2048"];
async function main(owned: OwnedHosts): Promise<void> {
  const host = await owned.start(`timeline-${process.pid}`, { sglang: { profile: "ddtree-fork", loadSeconds: options.load, warmupSeconds: 0.5 } });
  const ws = simWorkspace({ bench: { ...readRepoStackConfig(CONFIGS[0]), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 0 }, "dflash-sglang:benchmark": { enabled: false } } });
  try {
    await (await ws.stack("bench")).up(); // the first deploy, not timed
    for (let i = 1; i <= options.changes; i++) {
      ws.setStackConfig("bench", "speculative", readRepoStackConfig(CONFIGS[i % 2])["dflash-sglang:speculative"]);
      const stack = await ws.stack("bench");
      process.stdout.write(`change ${i}: to ${CONFIGS[i % 2]}\n`);
      const { onEvent, row } = engineTimeline((line) => process.stdout.write(line));
      const r = await stack.up({ onEvent });
      row(`up returned; restartTimings ${JSON.stringify(r.outputs.restartTimings?.value)}`);
    }
  } finally {
    await hosts.stop(host.name);
    ws.cleanup();
  }
}

void runWithHosts(main, { name: "benchmark" });
