// Fault table: each fault injected into the new configuration of a reconfiguration on
// a simulated host (real engine, SSH, systemd), with 3 streaming requests in flight when
// `pulumi up` starts. For each: outcome, time to detect (process exit -> first FAILED
// line), time to recover (FAILED line -> old config serving again, i.e. `up` returned),
// and requests lost. Writes bench/results/faults.{json,md}.
// Run: npx tsx bench/faults.ts
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import * as hosts from "../simhost/hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { readRepoStackConfig, simHostConfig, simWorkspace } from "../lib/workspace";
import { failureCause } from "../lib/sweep";

const HOST = `faults-${process.pid}`;
const GOOD = "b8t4-w2048";
const NEW = "b16t4-w2048";
const NEW_BUDGET = 16;

interface Scenario {
  name: string;
  faults: Record<string, unknown>;
  /** Fault applies to the new configuration only (so the old one can come back). */
  scoped: boolean;
  readySeconds?: number;
  stableSeconds?: number;
  extraArgs?: string[];
}

const SCENARIOS: Scenario[] = [
  { name: "none (baseline reconfiguration)", faults: {}, scoped: false },
  { name: "GPU memory released 8 s after exit", faults: { gpuReleaseDelaySeconds: 8 }, scoped: false },
  { name: "crash during load: CUDA OOM", faults: { crashDuringLoad: "oom" }, scoped: true },
  { name: "crash during load: other error", faults: { crashDuringLoad: "error" }, scoped: true },
  { name: "hang during load (port never opens)", faults: { hangDuringLoad: true }, scoped: true, readySeconds: 12 },
  { name: "slow load (3x)", faults: { loadSlowdown: 3 }, scoped: true },
  { name: "crash 1 s after ready", faults: { crashAfterReadySeconds: 1 }, scoped: true, stableSeconds: 5 },
  { name: "corrupt output", faults: { corruptOutput: true }, scoped: true },
  { name: "old server ignores SIGTERM for 5 s", faults: { ignoreSigtermSeconds: 5 }, scoped: false },
  { name: "stale old server answers 4 s after stop", faults: { staleSeconds: 4 }, scoped: false },
  { name: "flag unknown to the host's SGLang", faults: {}, scoped: false, extraArgs: ["--speculative-dflash-enable-ddtree"] },
];

async function streamChat(host: hosts.HostInfo, maxTokens: number): Promise<boolean> {
  try {
    const res = await fetch(`http://${host.address}:${host.sglangPort}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "benchmark" }], max_tokens: maxTokens, stream: true }),
    });
    let text = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
    return text.includes("data: [DONE]");
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 3, warmupSeconds: 0.3 } });
  const base = { ...readRepoStackConfig(GOOD), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 2 }, "dflash-sglang:timeouts": { readySeconds: 60, pollMs: 250 }, "dflash-sglang:benchmark": { enabled: false } };
  const ws = simWorkspace({ faults: base });
  const sh = async (cmd: string) => (await hosts.ssh(host, cmd)).stdout.trim();
  const rows: Record<string, unknown>[] = [];
  try {
    const stack = await ws.stack("faults");
    const model = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")).config["dflash-sglang:model"].value as Record<string, unknown>;
    await stack.up();
    for (const sc of SCENARIOS) {
      // Baseline: the good configuration serves, with no fault.
      hosts.fault(HOST, "{}");
      ws.setStackConfig("faults", "speculative", readRepoStackConfig(GOOD)["dflash-sglang:speculative"]);
      ws.setStackConfig("faults", "safety", { stableSeconds: 2 });
      ws.setStackConfig("faults", "timeouts", { readySeconds: 60, pollMs: 250 });
      ws.setStackConfig("faults", "model", model);
      await stack.up();

      hosts.fault(HOST, JSON.stringify({ ...sc.faults, ...(sc.scoped ? { match: { speculative_ddtree_budget: NEW_BUDGET } } : {}) }));
      ws.setStackConfig("faults", "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      if (sc.readySeconds) ws.setStackConfig("faults", "timeouts", { readySeconds: sc.readySeconds, pollMs: 250 });
      if (sc.stableSeconds) ws.setStackConfig("faults", "safety", { stableSeconds: sc.stableSeconds });
      if (sc.extraArgs) ws.setStackConfig("faults", "model", { ...model, extraArgs: sc.extraArgs });

      const inFlight = [streamChat(host, 600), streamChat(host, 600), streamChat(host, 600)];
      const started = Date.now();
      let failedAt = 0;
      let error = "";
      try {
        await stack.up({ onOutput: (s) => (failedAt ||= s.includes("FAILED:") ? Date.now() : 0) });
      } catch (e) {
        error = (e as Error).message;
      }
      const ended = Date.now();
      const completed = (await Promise.all(inFlight)).filter(Boolean).length;
      const info = JSON.parse((await sh(`curl -s http://${host.address}:${host.sglangPort}/get_server_info`)) || "{}");
      const exitLine = await sh("journalctl -u sglang-k26.service -o short-unix --no-pager | grep -E 'Main process exited, code=exited, status=1' | tail -n 1");
      const exitedAt = exitLine ? Math.round(Number(exitLine.split(" ")[0]) * 1000) : 0;
      const serving = info.speculative_ddtree_budget;
      const outcome = !error && serving === NEW_BUDGET ? "new config serving" : error && /Rolled back: .* is back and serving/.test(error) ? `old config restored (budget ${serving})` : error && /Preflight failed/.test(error) ? `clear failure before any change (old config budget ${serving} untouched)` : `UNEXPECTED: ${error.split("\n")[0]}`;
      // The reported line, past the "sglang X on HOST failed while PHASE after N s: " preamble.
      const cause = error ? failureCause(error).replace(/^.*? after [\d.]+ s: /, "").replace(/^Preflight failed.*$/, (l) => (/does not accept (\S+)/.exec(error)?.[0] ?? l)).slice(0, 110) : "";
      const detect = failedAt && exitedAt && exitedAt >= started ? ((failedAt - exitedAt) / 1000).toFixed(1) : sc.readySeconds && failedAt ? `deadline ${sc.readySeconds} s` : failedAt ? `${((failedAt - started) / 1000).toFixed(1)} after up started` : "-";
      const row = { fault: sc.name, outcome, cause: cause.trim(), detectSeconds: detect, recoverSeconds: failedAt ? ((ended - failedAt) / 1000).toFixed(1) : "-", upSeconds: ((ended - started) / 1000).toFixed(1), requestsInFlight: inFlight.length, requestsLost: inFlight.length - completed };
      rows.push(row);
      process.stderr.write(`${JSON.stringify(row)}\n`);
    }
  } finally {
    await hosts.stop(HOST);
    ws.cleanup();
  }
  const out = { command: "npx tsx bench/faults.ts", date: new Date().toISOString(), machine: "2 cores, 24 GB", loadSeconds: 3, rows };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "faults.json"), JSON.stringify(out, null, 2) + "\n");
  const md = [
    "# Fault table",
    "",
    `Command: \`${out.command}\` (${out.date}, ${out.machine}).`,
    "",
    `One simulated host (load ${out.loadSeconds} s). Each row reconfigures ${GOOD} -> ${NEW} with the fault injected (into the new`,
    "configuration only where it says so, so the old one can come back), with 3 streaming requests (600 tokens) in flight",
    "when `pulumi up` starts. Detect = the server process's exit (systemd's journal line) -> the first FAILED line of `up`;",
    "recover = that line -> `up` returned with the previous configuration serving again.",
    "",
    "| fault | outcome | cause reported | detect s | recover s | up s | in flight | lost |",
    "|---|---|---|---:|---:|---:|---:|---:|",
    ...rows.map((r) => `| ${r.fault} | ${r.outcome} | ${r.cause || "-"} | ${r.detectSeconds} | ${r.recoverSeconds} | ${r.upSeconds} | ${r.requestsInFlight} | ${r.requestsLost} |`),
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, "faults.md"), md);
  process.stdout.write(md);
}

main().catch((e) => {
  process.stderr.write(`fault benchmark failed: ${(e as Error).message}\n`);
  process.exit(1);
});
