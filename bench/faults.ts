// Fault table: each fault injected into the new configuration of a reconfiguration on
// a simulated host that behaves like real SGLang (real engine, SSH, systemd), with
// requests in flight when `pulumi up` starts. For each: outcome, time to detect (process
// exit -> first FAILED line), time to recover (FAILED line -> old config serving again,
// i.e. `up` returned), requests lost, and notes. Writes bench/results/faults.{json,md}.
// Run: npx tsx bench/faults.ts [--line release|main|both] (both by default: every row against
// the newest release of SGLang, v0.5.21, and against main, simhost/sim/sglang/lines.ts).
import * as fs from "node:fs";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import * as YAML from "yaml";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../lib/workspace";
import { failureCause } from "../components/sweep/sweep";
import { oneOf, option, parseCommandOrExit, setUp, text } from "../lib/cli";
import { SGLANG_LINES, SglangLine } from "../simhost/sim/sglang/lines";
import { sudoersFor } from "../components/sglang-service/become";

const { options } = parseCommandOrExit("npx tsx bench/faults.ts", {
  summary: "The fault table: each fault injected into the new configuration of a reconfiguration on a simulated host,\nwith requests in flight; outcome, time to detect, time to recover, requests lost. Writes bench/results/faults.{json,md}.",
  options: {
    line: option({ type: oneOf(["release", "main", "both"] as const), placeholder: "LINE", description: "the SGLang the hosts run: its newest release (v0.5.21), main, or every row against each", default: "both" }),
    sudo: option({
      type: oneOf(["release", "main", "both", "none"] as const),
      placeholder: "LINE",
      description: "the line whose hosts root may not log in to: the stack reaches them as deploy, through sudo with the README's sudoers lines",
      default: "release",
    }),
    only: option({ type: text, placeholder: "TEXT", description: "run only the rows whose fault names TEXT; writes bench/results/faults-only-<TEXT>.{json,md}, not the whole table" }),
  },
});
const LINES_RUN: readonly SglangLine[] = options.line === "both" ? SGLANG_LINES : [options.line];
const throughSudo = (line: SglangLine) => options.sudo === "both" || options.sudo === line;

/** The hosts of a line's run (the lines run at once, each on its own hosts). */
const hostNames = (line: SglangLine) => ({ host: `faults-${line}-${process.pid}`, node1: `faults-${line}-node1-${process.pid}` });
const UNIT = "sglang-k26";
const GOOD = "b8t4-w2048";
const NEW = "b16t4-w2048";
const NEW_BUDGET = 16;
const STACK = "faults";

interface Context {
  names: { host: string; node1: string };
  host: hosts.HostInfo;
  /** Node 1 of the group rows (a second simulated host). */
  node1: hosts.HostInfo;
  ws: SimWorkspace;
  sh: (cmd: string) => Promise<string>;
  /** Filled by the scenario: what it saw, for the notes column. */
  notes: string[];
}

interface Scenario {
  name: string;
  faults: Record<string, unknown>;
  /** Fault applies to the new configuration only (so the old one can come back). */
  scoped: boolean;
  readySeconds?: number;
  stableSeconds?: number;
  extraArgs?: string[];
  /** Requests in flight when `up` starts: 3 streams of 600 tokens unless given. */
  inFlight?: { streams: number; tokens: number };
  /** The API key the requests in flight send (the one the old server was started with). */
  streamKey?: string;
  /** SGLang's own configuration on the host (e.g. endpoints it lacks). */
  sglang?: Record<string, unknown>;
  /** Runs right before `up` (after the streams started). */
  before?: (c: Context) => Promise<void>;
  /** Runs after `up` returned and the streams ended. */
  after?: (c: Context, upOutput: string) => Promise<void>;
  /** A sentinel API key for this row (secret config), with the benchmark on. */
  apiKey?: string;
  /** Runs before the baseline `up` of this row (e.g. the secret that is then rotated). */
  setup?: (c: Context) => Promise<void>;
  /** The change this row applies instead of b8t4-w2048 -> b16t4-w2048's speculative settings alone. */
  change?: (c: Context) => Promise<void>;
  /** Acts while `up` runs, once its output matches `when`. */
  during?: { when: RegExp; act: (c: Context) => Promise<void> };
  /** The row deploys a two-node group (host + node1); the next row's baseline goes back to one node. */
  group?: boolean;
  /** `destroy` instead of `up`. */
  destroy?: boolean;
  /** After a failed `up`, what undoes the row's own change besides its faults (e.g. a secret it set), before the same change is applied again. */
  fix?: (c: Context) => Promise<void>;
  /** The outcome column, where the usual "new config serving / old config restored" does not say it. */
  judge?: (c: Context, r: { error: string; output: string }) => Promise<string>;
}

const SENTINEL = `sk-SENTINEL-${process.pid}-7f3a`;

/** Files under a folder, concatenated (state, bench/out). */
function allFiles(dir: string): string {
  if (!fs.existsSync(dir)) return "";
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => fs.readFileSync(path.join(e.parentPath, e.name), "utf8"))
    .join("\n");
}

/** The change of the rename rows: the new budget under the unit's new name. */
async function renamedWithNewBudget(c: Context): Promise<void> {
  c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
  c.ws.setStackConfig(STACK, "service", simHostConfig(c.host, `${UNIT}-renamed`)["dflash-sglang:service"]);
}

/** The budget the host's server reports now (undefined when nothing answers). */
async function servingBudget(c: Context): Promise<unknown> {
  return JSON.parse((await c.sh(`curl -s -m 2 http://${c.host.address}:${c.host.sglangPort}/server_info`)) || "{}").speculative_ddtree_budget;
}

const SCENARIOS: Scenario[] = [
  { name: "none (baseline reconfiguration)", faults: {}, scoped: false },
  { name: "GPU memory released 8 s after exit", faults: { gpuReleaseDelaySeconds: 8 }, scoped: false },
  { name: "crash during load: torch CUDA OOM", faults: { crashDuringLoad: "oom" }, scoped: true },
  { name: "crash during load: Not enough memory (KV cache)", faults: { crashDuringLoad: "not-enough-memory" }, scoped: true },
  { name: "crash during load: memory capacity unbalanced", faults: { crashDuringLoad: "unbalanced" }, scoped: true },
  { name: "crash during load: CUDA graph capture failed", faults: { crashDuringLoad: "cuda-graph" }, scoped: true },
  { name: "crash during load: other error", faults: { crashDuringLoad: "error" }, scoped: true },
  // SGLang (v0.5.17 on) gives its schedulers up to 15 s after the drain; an idle stop must not read as a kill.
  { name: "schedulers take 15 s to exit after the drain (the ShutdownReq wait)", faults: {}, scoped: false, inFlight: { streams: 0, tokens: 0 }, sglang: { schedulerExitSeconds: 30 } },
  // The same wait after a drain of requests in flight, HTTP frozen throughout it (a blocking wait
  // in SGLang's event loop), while a client polls /health and /metrics as a load balancer would.
  {
    name: "schedulers take 15 s after a drain of requests in flight, HTTP frozen, a client polling /health and /metrics",
    faults: {},
    scoped: false,
    sglang: { schedulerExitSeconds: 30 },
    before: async (c) => void POLLERS.set(c, pollHealth(c.host)),
    after: async (c) => void c.notes.push(await POLLERS.get(c)!.stop()),
    // The row shows the freeze: the new configuration serves, and the poller met a silence of
    // most of the 15 s wait (a simulator that kept answering would not).
    judge: async (c, { error }) => {
      const silence = POLLERS.get(c)!.silenceSeconds();
      if (error) return `UNEXPECTED: ${error.split("\n")[0]}`;
      return silence >= 10 ? "new config serving" : `UNEXPECTED: HTTP answered through the scheduler wait (longest silence ${silence.toFixed(1)} s)`;
    },
  },
  { name: "hang during load (port never opens)", faults: { hangDuringLoad: true }, scoped: true, readySeconds: 12 },
  { name: "slow load (3x)", faults: { loadSlowdown: 3 }, scoped: true },
  { name: "crash 1 s after ready", faults: { crashAfterReadySeconds: 1 }, scoped: true, stableSeconds: 5 },
  { name: "corrupt output", faults: { corruptOutput: true }, scoped: true },
  { name: "old server notices SIGTERM 5 s late", faults: { ignoreSigtermSeconds: 5 }, scoped: false },
  { name: "stale old server answers 4 s after its drain", faults: { staleSeconds: 4 }, scoped: false },
  { name: "flag unknown to the host's SGLang", faults: {}, scoped: false, extraArgs: ["--speculative-dflash-enable-ddtree"] },
  // Issue 59: what real SGLang does that the tool must meet before anything stops.
  {
    name: 'API key changed to one starting with "-" (SGLang\'s argparse: "--api-key: expected one argument")',
    faults: {},
    scoped: false,
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      await (await c.ws.stack(STACK)).setConfig("dflash-sglang:apiKey", { value: `-k${process.pid}`, secret: true });
    },
    fix: async (c) => void (await (await c.ws.stack(STACK)).removeConfig("dflash-sglang:apiKey")),
    judge: async (c, r) => (/apiKey: starts with "-"/.test(r.error) && (await servingBudget(c)) === 8 ? "clear failure before any change (old config budget 8 untouched)" : `UNEXPECTED: ${r.error.split("\n")[0] || "up succeeded"}`),
  },
  {
    name: "--log-level warning in model.extraArgs (it would hide SGLang's drain counts)",
    faults: {},
    scoped: false,
    extraArgs: ["--log-level", "warning"],
    judge: async (c, r) => (/hides SGLang's INFO lines this tool reads/.test(r.error) && (await servingBudget(c)) === 8 ? "clear failure before any change (old config budget 8 untouched)" : `UNEXPECTED: ${r.error.split("\n")[0] || "up succeeded"}`),
  },
  {
    // Each worker drains and counts its own requests (srt/managers/multi_tokenizer_mixin.py).
    name: "two tokenizer workers (--tokenizer-worker-num 2), requests in flight on both",
    faults: {},
    scoped: false,
    inFlight: { streams: 4, tokens: 600 },
    setup: async (c) => c.ws.setStackConfig(STACK, "model", { ...(c.ws.stackConfig(STACK)["dflash-sglang:model"] as object), extraArgs: ["--tokenizer-worker-num", "2"] }),
  },
  { name: "bad flag value (invalid choice)", faults: {}, scoped: false, extraArgs: ["--quantization", "fp3"] },
  {
    name: "60 s streaming generation in flight when up starts",
    faults: {},
    scoped: false,
    // ~180 tok/s single stream on the simulated host: 10,800 tokens is about 60 s.
    inFlight: { streams: 1, tokens: 10_800 },
  },
  {
    name: "stale gauges after traffic stopped",
    faults: {},
    scoped: false,
    inFlight: { streams: 0, tokens: 0 },
    before: async (c) => {
      await streamChat(c.host, 32);
      const gauge = /^sglang:num_running_reqs\{.*\} (\S+)$/m.exec(await (await fetch(`http://${c.host.address}:${c.host.sglangPort}/metrics`)).text())?.[1];
      c.notes.push(`num_running_reqs read ${gauge} with nothing in flight`);
    },
  },
  {
    name: "host SGLang without /get_server_info",
    faults: {},
    scoped: false,
    sglang: { removedEndpoints: ["/get_server_info"] },
  },
  {
    name: "sentinel API key: where does it appear?",
    faults: {},
    scoped: false,
    apiKey: SENTINEL,
    after: async (c, upOutput) => {
      const env = c.ws.env;
      const pulumi = path.join(env.PATH.split(":")[0], "pulumi");
      const places: Record<string, string> = {
        "state": allFiles(path.join(c.ws.dir, "state")),
        "stack output --json": execFileSync(pulumi, ["stack", "output", "--json", "--show-secrets=false", "--stack", STACK], { cwd: c.ws.dir, env, encoding: "utf8" }),
        "bench/out": allFiles(path.join(REPO_ROOT, "bench", "out")),
        "up output": upOutput,
        "host ps": await c.sh("ps -eo args"),
        "host unit": await c.sh(`cat /etc/systemd/system/${UNIT}.service`),
        "host journal": await c.sh("journalctl --no-pager -o cat"),
      };
      const found = Object.keys(places).filter((k) => places[k].includes(SENTINEL));
      const clean = Object.keys(places).filter((k) => !places[k].includes(SENTINEL));
      const why = found.includes("host journal") && /server_args=(ServerArgs\(.*api_key='|\{.*'api_key': ')/.test(places["host journal"]) ? " (SGLang's own start-up line server_args=..., sgl-project/sglang#37457)" : "";
      c.notes.push(`found in: ${found.join(", ") || "nowhere"}${why}; not in: ${clean.join(", ")}`);
    },
  },
  // Issue 12's scenarios as rows.
  {
    name: "secret rotation: only apiKey changes",
    faults: {},
    scoped: false,
    streamKey: `sk-first-${process.pid}`,
    setup: async (c) => (await c.ws.stack(STACK)).setConfig("dflash-sglang:apiKey", { value: `sk-first-${process.pid}`, secret: true }),
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(GOOD)["dflash-sglang:speculative"]);
      await (await c.ws.stack(STACK)).setConfig("dflash-sglang:apiKey", { value: `sk-second-${process.pid}`, secret: true });
    },
    judge: async (c, r) => {
      const code = (key: string) => c.sh(`curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' http://${c.host.address}:${c.host.sglangPort}/v1/models`);
      const [second, first] = [await code(`sk-second-${process.pid}`), await code(`sk-first-${process.pid}`)];
      return !r.error && second === "200" && first === "401" ? "restarted with the new key (new key 200, old key 401)" : `UNEXPECTED: new key ${second}, old key ${first} ${r.error.split("\n")[0]}`;
    },
  },
  {
    name: "every SSH session into the host dropped during the GPU wait",
    faults: { gpuReleaseDelaySeconds: 5 },
    scoped: false,
    during: { when: /waiting for GPU memory to be released/, act: async (c) => void c.notes.push(`${await hosts.dropSessions(c.host)} session(s) killed`) },
    judge: async (c, r) => {
      // The host-side transaction goes on under its lock: wait (bounded) for what it started.
      const deadline = Date.now() + 60_000;
      let budget: unknown;
      while (Date.now() < deadline && budget !== NEW_BUDGET) {
        budget = await servingBudget(c);
        if (budget !== NEW_BUDGET) await new Promise((res) => setTimeout(res, 500));
      }
      return r.error && budget === NEW_BUDGET ? "up failed (connection lost); the host finished the restart under its lock: new config serving" : `UNEXPECTED: serving ${budget}; ${r.error.split("\n")[0] || "up succeeded"}`;
    },
  },
  {
    name: "unit renamed (service.unitName)",
    faults: {},
    scoped: false,
    change: renamedWithNewBudget,
    after: async (c) => void c.notes.push(`old unit file left: ${(await hosts.ssh(c.host, `test -e /etc/systemd/system/${UNIT}.service`)).code === 0 ? "yes" : "no"}`),
  },
  {
    name: "unit renamed, and the new configuration crashes during load (torch CUDA OOM)",
    faults: { crashDuringLoad: "oom" },
    scoped: true,
    change: renamedWithNewBudget,
    after: async (c) => void c.notes.push(`serving under: ${(await c.sh(`systemctl list-units --state=active --no-legend --plain '${UNIT}*.service' | cut -d' ' -f1`)) || "nothing"}`),
  },
  {
    name: "host reached by another name (a second sshd port)",
    faults: {},
    scoped: false,
    setup: async (c) => {
      await hosts.addSshPort(c.host, ALIAS_PORT);
    },
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      c.ws.setStackConfig(STACK, "host", { ...(simHostConfig(c.host)["dflash-sglang:host"] as object), port: ALIAS_PORT });
    },
  },
  {
    name: "GPU memory freed 12 s after exit, past timeouts.gpuReleaseSeconds (4 s)",
    faults: { gpuReleaseDelaySeconds: 12 },
    scoped: false,
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      c.ws.setStackConfig(STACK, "timeouts", { readySeconds: 60, pollMs: 250, gpuReleaseSeconds: 4 });
    },
    judge: async (c, r) => {
      // Nobody acts: the known configuration must come back by itself once the GPUs are free.
      const returned = Date.now();
      const deadline = returned + 90_000;
      let budget: unknown;
      while (Date.now() < deadline && budget === undefined) {
        budget = await servingBudget(c);
        if (budget === undefined) await new Promise((res) => setTimeout(res, 500));
      }
      return r.error && /RECOVERING:/.test(r.error) && budget !== undefined ? `old config back by itself (budget ${budget}) ${((Date.now() - returned) / 1000).toFixed(1)} s after up returned` : `UNEXPECTED: serving ${budget}; ${r.error.split("\n")[0]}`;
    },
  },
  // Issue 18's sequences (two ordinary things at once) as rows.
  {
    name: "apiKey removed, and the new configuration crashes during load (torch CUDA OOM)",
    faults: { crashDuringLoad: "oom" },
    scoped: true,
    streamKey: `sk-removed-${process.pid}`,
    setup: async (c) => (await c.ws.stack(STACK)).setConfig("dflash-sglang:apiKey", { value: `sk-removed-${process.pid}`, secret: true }),
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      await (await c.ws.stack(STACK)).removeConfig("dflash-sglang:apiKey");
    },
    judge: async (c, r) => {
      const code = (key?: string) => c.sh(`curl -s -o /dev/null -w '%{http_code}' ${key ? `-H 'Authorization: Bearer ${key}' ` : ""}http://${c.host.address}:${c.host.sglangPort}/v1/models`);
      const [own, none] = [await code(`sk-removed-${process.pid}`), await code()];
      return /Rolled back: .* is back and serving/.test(r.error) && own === "200" && none === "401" ? "old config restored with the key it ran with (its key 200, no key 401)" : `UNEXPECTED: its key ${own}, no key ${none}; ${r.error.split("\n")[0]}`;
    },
  },
  {
    name: "unit renamed, plus a flag unknown to the host's SGLang",
    faults: {},
    scoped: false,
    change: renamedWithNewBudget,
    extraArgs: ["--speculative-dflash-enable-ddtree"],
    judge: async (c, r) => {
      const active = (await c.sh(`systemctl list-units --state=active --no-legend --plain '${UNIT}*.service' | cut -d' ' -f1`)) || "nothing";
      const budget = await servingBudget(c);
      return /Preflight failed/.test(r.error) && active === `${UNIT}.service` && budget === 8 ? `clear failure before any change: ${UNIT} (budget 8) still serving, never stopped` : `UNEXPECTED: active ${active}, budget ${budget}; ${r.error.split("\n")[0]}`;
    },
  },
  {
    name: "every SSH session into the host dropped during the rollback",
    faults: { crashDuringLoad: "oom" },
    scoped: true,
    during: { when: /rolling back/, act: async (c) => void c.notes.push(`${await hosts.dropSessions(c.host)} session(s) killed`) },
    judge: async (c, r) => {
      // The rollback is a host step: it finishes without the session that started it.
      const deadline = Date.now() + 60_000;
      let budget: unknown;
      while (Date.now() < deadline && budget !== 8) {
        budget = await servingBudget(c);
        if (budget !== 8) await new Promise((res) => setTimeout(res, 500));
      }
      return r.error && budget === 8 ? "up failed (connection lost); the rollback finished on the host: old config serving" : `UNEXPECTED: serving ${budget}; ${r.error.split("\n")[0] || "up succeeded"}`;
    },
  },
  {
    name: "two-node group, node 1 frees its GPUs past timeouts.gpuReleaseSeconds (3 s)",
    faults: {},
    scoped: false,
    group: true,
    setup: async (c) => {
      c.ws.setStackConfig(STACK, "nodes", [simHostConfig(c.node1)["dflash-sglang:host"]]);
      c.ws.setStackConfig(STACK, "model", { ...(c.ws.stackConfig(STACK)["dflash-sglang:model"] as object), tpSize: 16 });
    },
    before: async (c) => hosts.fault(c.names.node1, JSON.stringify({ gpuReleaseDelaySeconds: 8 })),
    change: async (c) => {
      c.ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      c.ws.setStackConfig(STACK, "timeouts", { readySeconds: 60, pollMs: 250, gpuReleaseSeconds: 3 });
    },
    judge: async (c, r) => {
      hosts.fault(c.names.node1, "{}");
      // Both nodes must end on the previous configuration (node 1 once its GPUs are free).
      const returned = Date.now();
      const deadline = returned + 90_000;
      let budget: unknown;
      let node1 = "";
      while (Date.now() < deadline) {
        budget = await servingBudget(c);
        node1 = (await hosts.ssh(c.node1, `systemctl is-active ${UNIT}.service && grep -o -- '--speculative-ddtree-budget [0-9]*' /etc/systemd/system/${UNIT}.service`)).stdout.trim().replace(/\n/g, ", ");
        if (budget === 8 && node1 === "active, --speculative-ddtree-budget 8") break;
        await new Promise((res) => setTimeout(res, 500));
      }
      return r.error && budget === 8 && node1 === "active, --speculative-ddtree-budget 8" ? `the group went back as one: node 0 serves budget 8, node 1 runs rank 1 of budget 8 (${((Date.now() - returned) / 1000).toFixed(1)} s after up returned)` : `UNEXPECTED: node 0 serves ${budget}, node 1 ${node1}; ${r.error.split("\n")[0]}`;
    },
  },
  {
    name: "SSH unreachable for 5 s while the new configuration loads",
    faults: {},
    scoped: false,
    during: { when: /loading weights/, act: async (c) => void (await hosts.sshOutage(c.host, 5), c.notes.push("sshd unreachable 5 s")) },
  },
  {
    name: "destroy with requests in flight",
    faults: {},
    scoped: false,
    destroy: true,
    judge: async (c, r) => {
      const left = await c.sh(`ls -d /etc/systemd/system/${UNIT}.service /etc/dflash-sglang /var/lib/dflash-sglang /usr/local/lib/dflash-sglang 2>/dev/null; true`);
      return !r.error && left === "" ? "drained, stopped, nothing of the stack left on the host" : `UNEXPECTED: left ${left.split("\n").join(", ")} ${r.error.split("\n")[0]}`;
    },
  },
];

/** The health pollers of rows that run one, by row. */
const POLLERS = new WeakMap<Context, { stop: () => Promise<string>; silenceSeconds: () => number }>();

/**
 * A client polling /health and /metrics every 250 ms, each asked with a 2 s limit, as a load
 * balancer does; `stop` says what it saw: answers by status, no answer within 2 s, and the
 * connections refused or reset, and the longest time without any answer.
 */
function pollHealth(host: hosts.HostInfo): { stop: () => Promise<string>; silenceSeconds: () => number } {
  let stopped = false;
  const seen = new Map<string, number>();
  let lastAnswer = Date.now();
  let silence = 0;
  const probe = async (p: string) => {
    let kind: string;
    try {
      const res = await fetch(`http://${host.address}:${host.sglangPort}${p}`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer().catch(() => undefined);
      kind = `${res.status}`;
      silence = Math.max(silence, Date.now() - lastAnswer);
      lastAnswer = Date.now();
    } catch (e) {
      kind = (e as Error).name === "TimeoutError" ? "no answer within 2 s" : "refused or reset";
    }
    seen.set(kind, (seen.get(kind) ?? 0) + 1);
  };
  const loop = (async () => {
    while (!stopped) {
      await Promise.all(["/health", "/metrics"].map(probe));
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  return {
    silenceSeconds: () => silence / 1000,
    stop: async () => {
      stopped = true;
      await loop;
      // A silence that lasts until the stop counts too.
      silence = Math.max(silence, Date.now() - lastAnswer);
      const counts = [...seen.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${n}x ${/^\d+$/.test(k) ? `HTTP ${k}` : k}`);
      return `the poller saw ${counts.join(", ")}; longest without an answer ${(silence / 1000).toFixed(1)} s`;
    },
  };
}

/** A second sshd address on the host: "another name of the same machine". */
const ALIAS_PORT = 2222;

async function streamChat(host: hosts.HostInfo, maxTokens: number, apiKey?: string): Promise<boolean> {
  try {
    const res = await fetch(`http://${host.address}:${host.sglangPort}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      // ignore_eos: the stream runs its full length (the model's own answer ends far sooner).
      body: JSON.stringify({ messages: [{ role: "user", content: "benchmark" }], max_tokens: maxTokens, stream: true, ignore_eos: true }),
    });
    let text = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += Buffer.from(chunk).toString("utf8");
    return text.includes("data: [DONE]");
  } catch {
    return false;
  }
}

/** Every row against one SGLang line, on hosts of its own; returns the rows. */
async function runLine(owned: OwnedHosts, line: SglangLine): Promise<Record<string, unknown>[]> {
  const names = hostNames(line);
  const { host: HOST, node1: NODE1 } = names;
  const sudoers = throughSudo(line) ? { sudoers: sudoersFor("deploy") } : {};
  const [host, node1] = await Promise.all([HOST, NODE1].map((n) => owned.start(n, { sglang: { profile: "ddtree-fork", line, loadSeconds: 3, warmupSeconds: 0.3 }, ...sudoers })));
  const base = { ...readRepoStackConfig(GOOD), ...simHostConfig(host), "dflash-sglang:safety": { stableSeconds: 2 }, "dflash-sglang:timeouts": { readySeconds: 60, pollMs: 250 }, "dflash-sglang:benchmark": { enabled: false } };
  const ws = simWorkspace({ [STACK]: base });
  const sh = async (cmd: string) => (await hosts.ssh(host, cmd)).stdout.trim();
  const rows: Record<string, unknown>[] = [];
  try {
    const stack = await ws.stack(STACK);
    const model = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "Pulumi.yaml"), "utf8")).config["dflash-sglang:model"].value as Record<string, unknown>;
    await stack.up();
    for (const sc of SCENARIOS.filter((x) => options.only === undefined || x.name.includes(options.only))) {
      // Baseline: the good configuration serves, with no fault and no secret.
      hosts.fault(HOST, "{}");
      hosts.configure(HOST, JSON.stringify({ removedEndpoints: [], schedulerExitSeconds: 0.5 }));
      await stack.removeConfig("dflash-sglang:apiKey").catch(() => undefined);
      ws.setStackConfig(STACK, "speculative", readRepoStackConfig(GOOD)["dflash-sglang:speculative"]);
      ws.setStackConfig(STACK, "safety", { stableSeconds: 2 });
      ws.setStackConfig(STACK, "timeouts", { readySeconds: 60, pollMs: 250 });
      ws.setStackConfig(STACK, "model", model);
      ws.setStackConfig(STACK, "benchmark", { enabled: false });
      ws.setStackConfig(STACK, "service", simHostConfig(host)["dflash-sglang:service"]);
      ws.setStackConfig(STACK, "host", simHostConfig(host)["dflash-sglang:host"]);
      ws.setStackConfig(STACK, "nodes", []);
      hosts.fault(NODE1, "{}");
      const ctx: Context = { names, host, node1, ws, sh, notes: [] };
      await sc.setup?.(ctx);
      await stack.up();

      if (sc.sglang) hosts.configure(HOST, JSON.stringify(sc.sglang));
      hosts.fault(HOST, JSON.stringify({ ...sc.faults, ...(sc.scoped ? { match: { speculative_ddtree_budget: NEW_BUDGET } } : {}) }));
      if (sc.change) await sc.change(ctx);
      else ws.setStackConfig(STACK, "speculative", readRepoStackConfig(NEW)["dflash-sglang:speculative"]);
      if (sc.readySeconds) ws.setStackConfig(STACK, "timeouts", { readySeconds: sc.readySeconds, pollMs: 250 });
      if (sc.stableSeconds) ws.setStackConfig(STACK, "safety", { stableSeconds: sc.stableSeconds });
      if (sc.extraArgs) ws.setStackConfig(STACK, "model", { ...(ws.stackConfig(STACK)["dflash-sglang:model"] as object), extraArgs: sc.extraArgs });
      if (sc.apiKey) {
        await stack.setConfig("dflash-sglang:apiKey", { value: sc.apiKey, secret: true });
        ws.setStackConfig(STACK, "benchmark", { runs: 1, warmupRuns: 0, maxTokens: 32, longContextTokens: [1024], concurrency: [2], coding: false });
      }

      const flight = sc.inFlight ?? { streams: 3, tokens: 600 };
      const streamStarted = Date.now();
      const inFlight = Array.from({ length: flight.streams }, () => streamChat(host, flight.tokens, sc.streamKey).then((ok) => ({ ok, seconds: (Date.now() - streamStarted) / 1000 })));
      await sc.before?.(ctx);
      const started = Date.now();
      let failedAt = 0;
      let error = "";
      let output = "";
      let timings: Record<string, number> = {};
      let acting: Promise<void> | undefined;
      const onOutput = (s: string) => {
        output += s;
        failedAt ||= s.includes("FAILED:") ? Date.now() : 0;
        if (sc.during && !acting && sc.during.when.test(output)) acting = sc.during.act(ctx);
      };
      try {
        if (sc.destroy) await stack.destroy({ onOutput, runProgram: true });
        else timings = (await stack.up({ onOutput })).outputs.restartTimings?.value ?? {};
      } catch (e) {
        error = (e as Error).message;
        output += error;
      }
      const ended = Date.now();
      await acting;
      const streams = await Promise.all(inFlight);
      const completed = streams.filter((x) => x.ok).length;
      await sc.after?.(ctx, output);
      if (flight.streams === 1 && flight.tokens > 5000) ctx.notes.push(`the stream ran ${streams[0].seconds.toFixed(0)} s and ended with [DONE]: ${streams[0].ok}`);
      if (timings.drainSeconds !== undefined) ctx.notes.push(`drain ${timings.drainSeconds} s + exit ${timings.stopSeconds} s`);
      const info = JSON.parse((await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info${sc.apiKey ? ` -H 'Authorization: Bearer ${sc.apiKey}'` : ""}`)) || "{}");
      const exitLine = await sh(`journalctl -u ${UNIT}.service -o short-unix --no-pager | grep -E 'Main process exited, code=exited, status=1|SIGQUIT received' | tail -n 1`);
      const exitedAt = exitLine ? Math.round(Number(exitLine.split(" ")[0]) * 1000) : 0;
      const serving = info.speculative_ddtree_budget;
      const outcome = sc.judge ? await sc.judge(ctx, { error, output }) : !error && serving === NEW_BUDGET ? "new config serving" : error && /Rolled back: .* is back and serving/.test(error) ? `old config restored (budget ${serving})` : error && /Preflight failed/.test(error) ? `clear failure before any change (old config budget ${serving} untouched)` : `UNEXPECTED: ${error.split("\n")[0]}`;
      // The reported line, past the "sglang X on HOST failed while PHASE after N s: " preamble.
      const cause = error ? failureCause(error).replace(/^.*? after [\d.]+ s: /, "").replace(/^Preflight failed.*$/, (l) => (/does not accept (\S+)|(\S+) is not a flag of the SGLang on \S+/.exec(error)?.[0] ?? l)).slice(0, 140) : "";
      const detect = failedAt && exitedAt && exitedAt >= started ? ((failedAt - exitedAt) / 1000).toFixed(1) : sc.readySeconds && failedAt ? `deadline ${sc.readySeconds} s` : failedAt ? `${((failedAt - started) / 1000).toFixed(1)} after up started` : "-";
      // A failed `up`, then the fault fixed and the same change applied again: the next
      // `up` must converge on the new configuration by itself.
      let thenFixed = "-";
      if (error) {
        await sc.fix?.(ctx);
        hosts.fault(HOST, "{}");
        hosts.fault(NODE1, "{}");
        ws.setStackConfig(STACK, "model", sc.group ? { ...model, tpSize: 16 } : model);
        ws.setStackConfig(STACK, "timeouts", { readySeconds: 60, pollMs: 250 });
        const again = Date.now();
        try {
          await stack.up();
          const now = JSON.parse((await sh(`curl -s http://${host.address}:${host.sglangPort}/server_info${sc.apiKey ? ` -H 'Authorization: Bearer ${sc.apiKey}'` : ""}`)) || "{}");
          thenFixed = now.speculative_ddtree_budget === NEW_BUDGET ? `new config serving (${((Date.now() - again) / 1000).toFixed(1)} s)` : `UNEXPECTED: serving budget ${now.speculative_ddtree_budget}`;
        } catch (e) {
          thenFixed = `UNEXPECTED: ${failureCause((e as Error).message).slice(0, 100)}`;
        }
      }
      const row = { sglang: line, login: host.become ? `${host.user}, sudo` : host.user, fault: sc.name, outcome, cause: cause.trim(), detectSeconds: detect, recoverSeconds: failedAt ? ((ended - failedAt) / 1000).toFixed(1) : "-", upSeconds: ((ended - started) / 1000).toFixed(1), requestsInFlight: inFlight.length, requestsLost: inFlight.length - completed, thenFixed, notes: ctx.notes.join("; ") };
      rows.push(row);
      process.stderr.write(`${JSON.stringify(row)}\n`);
    }
  } finally {
    await Promise.all([hosts.stop(HOST), hosts.stop(NODE1)]);
    ws.cleanup();
  }
  return rows;
}

async function main(owned: OwnedHosts): Promise<void> {
  // The simulators the hosts mount are compiled from this checkout, not left from an older one.
  setUp({ hosts: true });
  // The lines at once, each on its own hosts and workspace (they share the machine's cores).
  const rows = (await Promise.all(LINES_RUN.map((line) => runLine(owned, line)))).flat();
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO_ROOT, encoding: "utf8" }).trim() + (execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: REPO_ROOT, encoding: "utf8" }).trim() ? " (with changes not committed)" : "");
  const out = { commit, command: `npx tsx bench/faults.ts --line ${options.line} --sudo ${options.sudo}${options.only === undefined ? "" : ` --only ${JSON.stringify(options.only)}`}`, date: new Date().toISOString(), machine: "2 cores, 24 GB", loadSeconds: 3, rows };
  const dir = path.join(REPO_ROOT, "bench/results");
  fs.mkdirSync(dir, { recursive: true });
  const name = options.only === undefined ? "faults" : `faults-only-${options.only.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 40)}`;
  fs.writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(out, null, 2) + "\n");
  const md = [
    "# Fault table",
    "",
    `Command: \`${out.command}\` (${out.date}, ${out.machine}).`,
    "",
    `Tool at commit ${out.commit}. One simulated host (load ${out.loadSeconds} s) whose SGLang behaves like the real one: SIGTERM is a drain`,
    "(checked every 5 s) that ends with exit 0 through uvicorn (v0.5.20 on), a scheduler's crash ends with SGLang's SIGQUIT and",
    "its own SIGKILL after every rank's traceback (the model runs on 8 GPUs, TP 8), gauges are stale, /get_server_info is",
    "deprecated, errors are `sglang serve`'s.",
    `Each row reconfigures ${GOOD} -> ${NEW} with the fault injected (into the new configuration only where it says so,`,
    "so the old one can come back), with requests in flight when `pulumi up` starts (3 streams of 600 tokens unless the",
    "row says otherwise). Detect = the server process's exit (systemd's journal line; for a crash, SGLang's SIGQUIT line, just",
    "before it SIGKILLs itself) -> the first FAILED line of `up`;",
    "recover = that line -> `up` returned with the previous configuration serving again. Then, fixed = after a failed",
    "`up`, the fault removed and the same change applied by the next `up` (no other step). The last twelve rows (issue 12's",
    "scenarios, then issue 18's sequences of two ordinary things at once) apply the change they name instead (a key rotation,",
    "sessions dropped mid-restart, a renamed unit, one whose new configuration crashes, another address of the same host,",
    "GPUs freed past their deadline, an API key removed as the new configuration crashes, a rename with a flag the host",
    "lacks, sessions dropped mid-rollback, a two-node group whose node 1 frees its GPUs late (node 1: a second simulated",
    "host), SSH unreachable while weights load, a destroy) and say their outcome in words where the usual columns do not.",
    "",
    "The SGLang column says which the host ran: its newest release, v0.5.21 (`release`), or main (simhost/sim/sglang/lines.ts",
    "and the fidelity table, docs/design/simulated-hosts.md, which says how each was found and what was read where: both wait",
    "up to 15 s for their schedulers after the drain with HTTP frozen, then exit 0; both make \"unbalanced\" fatal by default).",
    "The two ran at once, each on hosts of its own, sharing the machine's two cores: times are those of a busy machine.",
    "",
    "The login column says how the stack reached the hosts: as root, or (`--sudo`) as `deploy` on hosts where root may",
    "not log in, every host step through `sudo -n -- bash -s` with the README's sudoers lines (issue 23).",
    "",
    "| SGLang | login | fault | outcome | cause reported | detect s | recover s | up s | in flight | lost | then, fixed | notes |",
    "|---|---|---|---|---|---:|---:|---:|---:|---|---|",
    ...rows.map((r) => `| ${r.sglang} | ${r.login ?? "root"} | ${r.fault} | ${r.outcome} | ${String(r.cause || "-").replace(/\|/g, "\\|")} | ${r.detectSeconds} | ${r.recoverSeconds} | ${r.upSeconds} | ${r.requestsInFlight} | ${r.requestsLost} | ${r.thenFixed} | ${r.notes || "-"} |`),
    "",
  ].join("\n");
  fs.writeFileSync(path.join(dir, `${name}.md`), md);
  process.stdout.write(md);
}

void runWithHosts(main, { name: "fault benchmark" });
