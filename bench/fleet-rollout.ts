// Benchmark: a fleet's rollout as its clients see it. Three replicas on simulated hosts behind
// HAProxy (Debian's, on a simulated host of its own), a client ledger sending through the
// balancer the whole time (components/fleet/ledger.ts), several rollouts of a new
// configuration; beside each, the same change on a single-host stack (its own simulated host),
// so the rollout's wall time reads against replicas x one single-host restart in one run.
// Then replica 2's new configuration crashes while loading: the rollout must halt with no
// client failure, and the next `up` after the fix must complete.
// Writes bench/results/fleet-rollout.{json,md}. Also the documented way to boot a fleet on
// simulated hosts: --keep leaves it running, and prints how to reach it.
// Run: npm run fleet -- [--runs 3] [--rate 2] [--load 2] [--keep]
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { mergedConfig, readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { parseDeployment } from "../components/sglang-service/schema";
import { bashCommand } from "../components/sglang-service/hostScript";
import { parseServers, renderBalancerStep, standing } from "../components/fleet/render";
import { LedgerReport, startLedger } from "../components/fleet/ledger";
import { engineTimeline, summarize, Summary, timed } from "./stats";
import { option, parseCommandOrExit, positiveInteger, positiveNumber, nonNegativeNumber, setUp, flag } from "../lib/cli";
import { prng } from "../lib/prng";

const { options } = parseCommandOrExit("npm run fleet --", {
  summary:
    "Boots a fleet of 3 replicas behind HAProxy on simulated hosts, rolls new configurations through it with clients sending\nthrough the balancer, and a crashing one; writes bench/results/fleet-rollout.{json,md}. With --keep, the fleet stays up.",
  options: {
    runs: option({ type: positiveInteger, placeholder: "N", description: "rollouts measured (each beside a single-host change)", default: "3" }),
    rate: option({ type: positiveNumber, placeholder: "R", description: "client requests per second through the balancer (every third streams)", default: "2" }),
    load: option({ type: positiveNumber, placeholder: "S", description: "simulated weight load time, seconds", default: "2" }),
    phase: option({ type: nonNegativeNumber, placeholder: "S", description: "before each timed up, an untimed pause drawn uniform in 0-S s (seeded by --seed), so that no restart's drain lands on the same phase of SGLang's 5 s watchdog run after run (0: none)", default: "5" }),
    seed: option({ type: positiveInteger, placeholder: "N", description: "the seed of those pauses", default: "1" }),
    timeline: flag("print each rollout's engine events (each resource's start and end, the steps' progress lines) with their seconds since its `up` began, to stderr"),
    keep: flag("leave the fleet's hosts running and its workspace in .fleet/ at the end (stop the hosts with npm run simhost -- stop NAME)"),
  },
});

const STACK = "fleet";
const BUDGETS = [16, 8];
const NAMES = ["r1", "r2", "r3", "lb", "single"].map((n) => `fleetbench-${n}`);

interface Rollout {
  budget: number;
  rolloutSeconds: number;
  singleHostSeconds: number;
  ledger: LedgerReport;
  /** The fewest replicas HAProxy called serving, sampled each second during the rollout. */
  fewestServing: number;
  serving: number[];
  /** Summed over the replicas, whole seconds as the steps reported them: the rejoins' waits for two passing checks, the leaves' waits for HAProxy's sessions. */
  rejoinSeconds: number;
  leaveSeconds: number;
}

async function main(owned: OwnedHosts): Promise<void> {
  setUp({ hosts: true });
  const sglang = { profile: "ddtree-fork" as const, loadSeconds: options.load, warmupSeconds: 0.5 };
  // Kept hosts outlive this program (simhost's own `start`); otherwise they are this program's, stopped at its end.
  const hs = await Promise.all(NAMES.map((n) => (options.keep ? hosts.start(n, { sglang, keep: true }) : owned.start(n, { sglang }))));
  const entry = (h: hosts.HostInfo) => ({ address: h.address, port: h.port, user: h.user, privateKeyPath: h.privateKeyPath, hostKey: h.hostKey });
  const base = readRepoStackConfig("b8t4-w2048");
  const spec = (budget: number) => ({ ...(base["dflash-sglang:speculative"] as object), budget });
  const common = { ...base, "dflash-sglang:safety": { stableSeconds: 1 }, "dflash-sglang:benchmark": { enabled: false } };
  const ws = simWorkspace(
    {
      [STACK]: { ...common, ...simHostConfig(hs[0]), "dflash-sglang:fleet": { replicas: [entry(hs[1]), entry(hs[2])], loadBalancer: { host: entry(hs[3]), port: 8080 } } },
      single: { ...common, ...simHostConfig(hs[4]) },
    },
    options.keep ? { dir: path.join(REPO_ROOT, ".fleet") } : {},
  );
  const d = parseDeployment(mergedConfig(ws.stackConfig(STACK)), STACK);
  const baseUrl = `http://${hs[3].address}:8080`;
  const show = async () => {
    const r = await hosts.ssh(hs[3], bashCommand(renderBalancerStep(d, STACK, "show")));
    return (parseServers(r.stdout) ?? []).map((s) => standing(s));
  };
  const budgetsNow = () => Promise.all(hs.slice(0, 3).map(async (h) => ((await (await fetch(`http://${h.address}:${h.sglangPort}/server_info`)).json()) as { speculative_ddtree_budget: number }).speculative_ddtree_budget));
  const fleet = await ws.stack(STACK);
  const single = await ws.stack("single");
  const say = (s: string) => process.stderr.write(`fleet benchmark: ${s}\n`);
  say(`first up of the fleet (3 replicas, HAProxy on ${hs[3].address}) and of the single host`);
  await fleet.up();
  await single.up();

  // SGLang's SIGTERM watchdog counts the requests in flight every 5 s from its server's start, so
  // a restart's drain ends 0-5 s after its SIGTERM by phase. Run after run, this benchmark's
  // strict rhythm (the same steps, the same durations) would hand each replica about the same
  // phase every time: a pause of a random length before each timed up draws it anew, as the
  // hours between a team's rollouts do.
  const rand = prng(options.seed);
  const pause = () => new Promise((r) => setTimeout(r, rand() * options.phase * 1000));
  const ledgerOf = () => startLedger({ baseUrl, model: d.model.path, perSecond: options.rate, streamEvery: 3, maxTokens: 256, timeoutMs: 120_000 });
  const rollouts: Rollout[] = [];
  const timeline = engineTimeline((line) => options.timeline && process.stderr.write(line));
  const onEvent = timeline.onEvent;
  for (let i = 0; i < options.runs; i++) {
    const budget = BUDGETS[i % BUDGETS.length];
    ws.setStackConfig(STACK, "speculative", spec(budget));
    ws.setStackConfig("single", "speculative", spec(budget));
    // Side by side: the single host's change first, then the fleet's rollout under load.
    if (options.timeline) process.stderr.write(`single-host up ${i + 1}:\n`);
    await pause();
    timeline.restart();
    const singleHostSeconds = await timed(() => single.up({ onEvent }));
    await pause();
    const ledger = ledgerOf();
    const serving: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        serving.push((await show()).filter((s) => s === "serving").length);
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    let out = "";
    if (options.timeline) process.stderr.write(`rollout ${i + 1}:\n`);
    timeline.restart();
    const rolloutSeconds = await timed(() => fleet.up({ onOutput: (t) => (out += t), onEvent }));
    // Where the time beyond the restarts goes, as the steps said it: each rejoin's wait for its checks, each leave's for HAProxy's sessions.
    const said = (re: RegExp) => [...new Set([...out.matchAll(re)].map((m) => `${m[1]} ${m[2]}`))].reduce((a, x) => a + Number(x.split(" ")[1]), 0);
    const rejoinSeconds = said(/(replica-\S+) is back in the balancer and serving \(its health check passed after (\d+) s\)/g);
    const leaveSeconds = said(/(replica-\S+) left the balancer(?:; HAProxy holds no request for it|: HAProxy sends it no new request) \((\d+) s\)/g);
    sampling = false;
    await sampler;
    const report = await ledger.stop();
    const fewestServing = Math.min(...serving);
    rollouts.push({ budget, rolloutSeconds, singleHostSeconds, ledger: report, fewestServing, serving, rejoinSeconds, leaveSeconds });
    say(`rollout ${i + 1} (budget ${budget}): ${rolloutSeconds.toFixed(1)} s (single host ${singleHostSeconds.toFixed(1)} s); ${report.completed}/${report.sent} completed, ${report.failed} failed, ${report.cut} cut; fewest serving ${fewestServing}`);
  }

  // Replica 2's new configuration crashes while loading.
  say("replica 2's new configuration crashes while loading");
  const crashBudget = 12;
  hosts.fault(NAMES[1], JSON.stringify({ crashDuringLoad: "oom", match: { speculative_ddtree_budget: crashBudget } }));
  ws.setStackConfig(STACK, "speculative", spec(crashBudget));
  const before = await budgetsNow();
  const crashLedger = ledgerOf();
  let upError = "";
  await fleet.up().then(
    () => (upError = "(up succeeded)"),
    (e: Error) => (upError = e.message),
  );
  const crashReport = await crashLedger.stop();
  const afterCrash = { budgets: await budgetsNow(), standings: await show() };
  hosts.fault(NAMES[1], "{}");
  const fixLedger = ledgerOf();
  const fixSeconds = await timed(() => fleet.up());
  const fixReport = await fixLedger.stop();
  const afterFix = { budgets: await budgetsNow(), standings: await show() };
  // What `up` said of the fleet: its account after the halt (the error holds the engine's whole output; the account once).
  const errorLines = upError.split("\n");
  const halted = errorLines.findIndex((l) => /The rollout stopped here/.test(l));
  const list = errorLines.slice(halted + 2);
  const listEnd = list.findIndex((l) => !/^\s+- replica-/.test(l));
  const account = halted < 0 ? ["(no account of the fleet in the error)"] : [errorLines[halted].trim(), errorLines[halted + 1].trim(), ...list.slice(0, listEnd < 0 ? list.length : listEnd).map((l) => `  ${l.trim()}`)];
  say(`crash: up failed; budgets now ${afterCrash.budgets.join(", ")} (before ${before.join(", ")}); ${crashReport.failed} failed, ${crashReport.cut} cut; after the fix ${afterFix.budgets.join(", ")}`);

  const ratio = summarize(rollouts.map((r) => r.rolloutSeconds / (3 * r.singleHostSeconds)));
  const roll = summarize(rollouts.map((r) => r.rolloutSeconds));
  const one = summarize(rollouts.map((r) => r.singleHostSeconds));
  const dir = path.join(REPO_ROOT, "bench", "results");
  fs.writeFileSync(path.join(dir, "fleet-rollout.json"), `${JSON.stringify({ options, rollouts, crash: { before, afterCrash, report: crashReport, account, afterFix, fixSeconds, fixReport } }, null, 2)}\n`);
  const fmt = (s: Summary, digits = 1) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
  const total = (k: "sent" | "completed" | "failed" | "cut" | "garbled") => rollouts.reduce((a, r) => a + r.ledger[k], 0);
  const md = [
    "# A fleet's rollout as its clients see it",
    "",
    `Command: \`npm run fleet -- --runs ${options.runs} --rate ${options.rate} --load ${options.load} --phase ${options.phase} --seed ${options.seed}\` (bench/fleet-rollout.ts), ${new Date().toISOString().slice(0, 16)} UTC, on this 2-core machine.`,
    `Three replicas on simulated hosts (simulated SGLang, weights load in ${options.load} s) behind HAProxy 2.6 (Debian bookworm's) on a simulated host of its own; health checks every 2 s (a generation, GET /health_generate) and an agent check on each replica as often (a four-token chat completion whose answer must be text). A client sends ${options.rate} requests/s through the balancer during each whole \`pulumi up\` (every third streams; 256 tokens each, about 1.3 s at the simulator's speed, so requests are in flight at every drain). Beside each rollout, the same change on a single-host stack (its own simulated host). Before each timed \`up\` (single-host and rollout) an untimed pause drawn uniform in 0-${options.phase} s (seed ${options.seed}): SGLang's SIGTERM watchdog counts the requests in flight every 5 s from its server's start, so a restart's drain ends 0-5 s after its SIGTERM by phase, and without the pause this benchmark's fixed rhythm handed each replica about the same phase run after run (with none, on 2026-12-07: five rollouts of 40.4-40.9 s whatever the steps before the SIGTERMs took, each replica's restart 4.6-5.7 s).`,
    "",
    "| rollout | budget | rollout s | single-host up s | rollout / (3 x single) | leaves' waits s | rejoins' waits s | sent | completed | failed | cut | fewest replicas serving |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...rollouts.map((r, i) => `| ${i + 1} | ${r.budget} | ${r.rolloutSeconds.toFixed(1)} | ${r.singleHostSeconds.toFixed(1)} | ${(r.rolloutSeconds / (3 * r.singleHostSeconds)).toFixed(2)} | ${r.leaveSeconds} | ${r.rejoinSeconds} | ${r.ledger.sent} | ${r.ledger.completed} | ${r.ledger.failed} | ${r.ledger.cut} | ${r.fewestServing} |`),
    "",
    "The waits are whole seconds as the steps reported them, summed over the three replicas (a leave waits until HAProxy queues nothing for the replica, and hands the requests it still runs to the server's own drain (fleet.drainPolicy cut); a rejoin for two passing checks, 2 s apart). The rest of the difference from three single-host changes is not broken down here (among it: each balancer step's SSH login, the minHealthy check (each other replica's agent asked for an answer with text, all at once), the fleet program's reads of four hosts, and the engine running the replicas' steps one after another); \`--timeline\` prints each rollout's engine events with their times. Each restart's drain takes 0-5 s more by chance: SGLang's SIGTERM watchdog counts the requests in flight every 5 s (the simulator does as SGLang does), so a single-host change varies by up to 5 s and the rollout, three drains, less in proportion.",
    "",
    `Median (min-max) of ${rollouts.length}: rollout ${fmt(roll)} s, single-host up ${fmt(one)} s, ratio ${fmt(ratio, 2)} (the medians' ratio, rollout / (3 x single-host): ${(roll.median / (3 * one.median)).toFixed(2)}). All rollouts: ${total("sent")} requests sent, ${total("completed")} completed, **${total("failed")} failed, ${total("cut")} cut, ${total("garbled")} garbled**.`,
    "",
    `Completed requests per 10 s of the last rollout (the capacity the clients saw): ${rollouts.at(-1)?.ledger.completedPer10s.join(", ")}. Replicas serving, sampled each second: ${rollouts.at(-1)?.serving.join(" ")}.`,
    "",
    "## Replica 2's new configuration crashes while loading",
    "",
    `Budget ${crashBudget} for every replica; replica 2's server crashes while loading it (the simulator's \`crashDuringLoad: oom\` for that budget). Budgets before: ${before.join(", ")}.`,
    "",
    `- \`up\` failed. Clients during it: ${crashReport.sent} sent, ${crashReport.completed} completed, **${crashReport.failed} failed, ${crashReport.cut} cut**.`,
    `- Afterwards the replicas run budgets ${afterCrash.budgets.join(", ")} and stand ${afterCrash.standings.join(", ")} in the balancer.`,
    "- What `up` said of the fleet:",
    "",
    "```",
    ...account,
    "```",
    "",
    `- The fault cleared, the next \`up\` took ${fixSeconds.toFixed(1)} s: budgets ${afterFix.budgets.join(", ")}, standing ${afterFix.standings.join(", ")}; clients: ${fixReport.sent} sent, ${fixReport.failed} failed, ${fixReport.cut} cut.`,
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, "fleet-rollout.md"), md);
  process.stdout.write(md);
  if (options.keep) {
    process.stdout.write(`\nThe fleet stays up: clients at ${baseUrl}; workspace ${ws.dir} (stack ${STACK}); stop it with: ${NAMES.map((n) => `npm run simhost -- stop ${n}`).join("; ")}\n`);
  } else {
    ws.cleanup();
  }
}

void runWithHosts(main, { name: "fleet benchmark" });
