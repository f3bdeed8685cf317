// The fault campaign: safety tested as a property. For each sequence, a fresh simulated host,
// two stacks that share its unit, and a seeded list of steps (bench/campaign/plan.ts): `up`
// of either stack with a generated change (speculative settings, the API key set, rotated or
// removed) and a fault armed for it, `preview`, `refresh`. After every step (and a settle
// period, for what comes back by itself) the invariants are checked:
//   - the host serves the configuration the last successful `up` proved (or, after a failed
//     `up` that rolled nothing back, the one it proved before failing), from that stack's unit;
//   - it answers with that configuration's API key and refuses another (or needs none);
//   - `preview` and `refresh` change nothing on the host (same server process);
//   - no API key of the sequence, in any encoding, in Pulumi state, the stack files or `up` output.
// A sequence that breaks one is shrunk (--shrink: steps dropped while it still breaks) and
// written to test/campaign/cases/. Not run by `npm test`: a campaign is a benchmark.
// Run: npm run campaign -- --seed S --sequences N --steps K   (--help lists the options)
import * as fs from "node:fs";
import * as path from "node:path";
import * as hosts from "../simhost/hosts";
import { runWithHosts, type OwnedHosts } from "../simhost/owned-hosts";
import { REPO_ROOT } from "../lib/pulumi-env";
import { flag, integerBetween, option, parseCommandOrExit, positiveInteger, setUp } from "../lib/cli";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../lib/workspace";
import { allowedAfter, FAULTS, FaultKind, planSequence, Proven, secretForms, servingOf, Serving, shorter, StackName, Step, STACKS } from "./campaign/plan";

const { options } = parseCommandOrExit("npm run campaign --", {
  summary: [
    "The fault campaign: seeded sequences of operator steps with faults, on simulated hosts through the real engine,",
    "with the safety invariants checked after every step. Writes bench/results/campaign-<seed>.{json,md}.",
  ].join("\n"),
  options: {
    seed: option({ type: integerBetween(0, 2_147_483_647), placeholder: "S", description: "the seed: the same seed gives the same sequences", default: "1" }),
    sequences: option({ type: positiveInteger, placeholder: "N", description: "sequences to run, each on a fresh simulated host", default: "3" }),
    steps: option({ type: positiveInteger, placeholder: "K", description: "steps per sequence", default: "6" }),
    shrink: flag("shrink a sequence that breaks an invariant to a shorter one that still does, and save it to test/campaign/cases/"),
  },
});

const UNIT = "sglang-k26";
type Speculative = { budget?: number; draftWindowSize?: number | "none" };
const SETTLE_MS = 90_000;

interface StepRecord {
  step: Step;
  ok: boolean;
  /** For an up: whether its fault was armed (see Sequence.run). */
  armed?: boolean;
  seconds: number;
  cause?: string;
  violations: string[];
}

interface SequenceResult {
  index: number;
  steps: StepRecord[];
  violations: string[];
  seconds: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The fault specs of the simulator for a kind, scoped to the new configuration (its budget and
 * draft window: b8t4-w2048 and b8t4-wnone share a budget), so the previous one can come back.
 */
function simFault(kind: FaultKind, serving: Serving): Record<string, unknown> | undefined {
  const match = { match: { speculative_ddtree_budget: serving.budget, speculative_draft_window_size: serving.window } };
  switch (kind) {
    case "crash-oom":
      return { crashDuringLoad: "oom", ...match };
    case "crash-unbalanced":
      return { crashDuringLoad: "unbalanced", ...match };
    case "hang":
      return { hangDuringLoad: true, ...match };
    case "crash-after-ready":
      return { crashAfterReadySeconds: 0.5, ...match };
    case "corrupt-output":
      return { corruptOutput: true, ...match };
    case "gpu-late":
      return { gpuReleaseDelaySeconds: 14 };
    default:
      return undefined;
  }
}

class Sequence {
  private proven: Proven | null = null;
  private keys: Record<StackName, string | null> = { a: null, b: null };
  private configs: Record<StackName, string> = { a: "b8t4-w2048", b: "b4t4-w2048" };
  private secrets: string[] = [];
  private keyCount = 0;

  constructor(
    private readonly host: hosts.HostInfo,
    private readonly ws: SimWorkspace,
    private readonly tag: string,
  ) {}

  private async sh(cmd: string): Promise<{ code: number; stdout: string }> {
    const r = await hosts.ssh(this.host, cmd, { timeoutMs: 20_000 });
    return { code: r.code, stdout: r.stdout.trim() };
  }

  private async pid(): Promise<string> {
    return (await this.sh(`systemctl show -p MainPID --value ${UNIT}.service`)).stdout;
  }

  private newKey(): string {
    const key = `sk-campaign-${this.tag}-${++this.keyCount}`;
    this.secrets.push(key);
    return key;
  }

  /** What the host serves now: configuration, owning stack, and which key it takes. */
  private async observe(keys: (string | null)[]): Promise<{ serving: Serving; stack: string; open: boolean; takes: (key: string) => Promise<boolean> } | undefined> {
    const url = `http://${this.host.address}:${this.host.sglangPort}`;
    const stack = (await this.sh(`sed -n 's/^X-DFlash-Stack=//p' /etc/systemd/system/${UNIT}.service 2>/dev/null`)).stdout;
    const status = async (key: string) => (await this.sh(`curl -s -m 3 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ${key}' ${url}/v1/models`)).stdout === "200";
    // /server_info needs the key the server runs with: try each one it may have (-f: a 401
    // answer is JSON too, and is no server info).
    for (const key of [...new Set([null, ...keys])]) {
      const info = await this.sh(`curl -sf -m 3 ${key ? `-H 'Authorization: Bearer ${key}' ` : ""}${url}/server_info`);
      if (info.code !== 0 || !info.stdout.startsWith("{")) continue;
      const parsed = JSON.parse(info.stdout) as { speculative_ddtree_budget?: number; speculative_draft_window_size?: number | null };
      // Asked once the server answers: a server still starting (one that comes back by
      // itself) refuses every connection, which is not "it asks for a key".
      const open = (await this.sh(`curl -s -m 3 -o /dev/null -w '%{http_code}' ${url}/v1/models`)).stdout === "200";
      return { serving: { budget: parsed.speculative_ddtree_budget ?? null, window: parsed.speculative_draft_window_size ?? null }, stack, open, takes: status };
    }
    return undefined;
  }

  /** The invariants after a step, waiting up to SETTLE_MS for what comes back by itself. */
  private async check(allowed: Proven[], output: string, pidBefore?: string): Promise<string[]> {
    const violations: string[] = [];
    if (allowed.length > 0) {
      const deadline = Date.now() + SETTLE_MS;
      let last = "nothing serves";
      let match: Proven | undefined;
      for (;;) {
        const now = await this.observe(allowed.map((p) => p.key)).catch(() => undefined);
        match = now && allowed.find((p) => p.stack === now.stack && p.serving.budget === now.serving.budget && p.serving.window === now.serving.window);
        if (now) last = `stack ${now.stack || "(none)"} serving budget ${now.serving.budget}, window ${now.serving.window}`;
        if (match && now) {
          // The key: the proven configuration's own, and no other.
          if (match.key) {
            if (!(await now.takes(match.key))) violations.push(`serves ${last} but refuses its own API key`);
            if (now.open) violations.push(`serves ${last} without asking for its API key`);
          } else if (!now.open) {
            violations.push(`serves ${last}, which should need no API key, but refuses a request without one`);
          }
          this.proven = match;
          break;
        }
        if (Date.now() > deadline) {
          violations.push(`after ${SETTLE_MS / 1000} s the host serves ${last}; allowed: ${allowed.map((p) => `stack ${p.stack} budget ${p.serving.budget} window ${p.serving.window}`).join(" or ")}`);
          break;
        }
        await sleep(1000);
      }
    }
    if (pidBefore !== undefined && (await this.pid()) !== pidBefore) violations.push("a read-only step (preview or refresh) restarted the server");
    const places: Record<string, string> = { "Pulumi state": allFiles(path.join(this.ws.dir, "state")), "stack files": allFiles(path.join(this.ws.dir, "stacks")), "the step's output": output };
    for (const secret of this.secrets) {
      for (const [where, text] of Object.entries(places)) {
        const forms = secretForms(text, secret);
        if (forms.length) violations.push(`API key ${secret} in ${where} (${forms.join(", ")})`);
      }
    }
    return violations;
  }

  async baseline(): Promise<string[]> {
    const stack = await this.ws.stack("a");
    await stack.up();
    const attempted: Proven = { stack: "a", serving: servingOf(readRepoStackConfig(this.configs.a)["dflash-sglang:speculative"] as Speculative), key: null };
    return this.check([attempted], "");
  }

  async run(step: Step): Promise<StepRecord> {
    const started = Date.now();
    const stack = await this.ws.stack(step.stack);
    let output = "";
    const onOutput = (s: string) => (output += s);
    if (step.op === "preview" || step.op === "refresh") {
      const pid = await this.pid();
      const r = await (step.op === "preview" ? stack.preview({ onOutput }) : stack.refresh({ onOutput })).then(
        () => ({ ok: true, cause: undefined }),
        (e: Error) => ({ ok: false, cause: e.message.split("\n").find((l) => /error:/.test(l)) ?? e.message.slice(0, 200) }),
      );
      const violations = await this.check(this.proven ? [this.proven] : [], output, pid);
      return { step, ok: r.ok, cause: r.cause, seconds: (Date.now() - started) / 1000, violations };
    }
    // up: the change, the fault, then the model.
    this.configs[step.stack] = step.config;
    this.ws.setStackConfig(step.stack, "speculative", readRepoStackConfig(step.config)["dflash-sglang:speculative"]);
    if (step.key === "set" || step.key === "rotate") {
      this.keys[step.stack] = this.newKey();
      await stack.setConfig("dflash-sglang:apiKey", { value: this.keys[step.stack]!, secret: true });
    } else if (step.key === "remove" && this.keys[step.stack] !== null) {
      this.keys[step.stack] = null;
      await stack.removeConfig("dflash-sglang:apiKey");
    }
    const speculative = readRepoStackConfig(step.config)["dflash-sglang:speculative"] as Speculative;
    const attempted: Proven = { stack: step.stack, serving: servingOf(speculative), key: this.keys[step.stack] };
    // A fault scoped to a configuration would hit the previous one too when both serve the
    // same settings (the other stack's unit, say): then it is not armed, and counted so.
    const same = this.proven !== null && this.proven.serving.budget === attempted.serving.budget && this.proven.serving.window === attempted.serving.window;
    const armed = step.fault !== "none" && !(same && step.fault !== "gpu-late" && step.fault !== "ssh-outage-loading");
    const sim = armed ? simFault(step.fault === "sessions-dropped-rollback" ? "crash-oom" : step.fault, attempted.serving) : undefined;
    if (sim) hosts.fault(this.host.name, JSON.stringify(sim));
    let during: Promise<unknown> | undefined;
    const watch = (s: string) => {
      onOutput(s);
      if (during || !armed) return;
      if (step.fault === "ssh-outage-loading" && /loading weights/.test(output)) during = hosts.sshOutage(this.host, 5).catch(() => undefined);
      // A session cut during a rollback needs one: the new configuration crashes (above).
      if (step.fault === "sessions-dropped-rollback" && /rolling back/.test(output)) during = hosts.dropSessions(this.host).catch(() => undefined);
    };
    const r = await stack.up({ onOutput: watch }).then(
      () => ({ ok: true, message: "" }),
      (e: Error) => ({ ok: false, message: e.message }),
    );
    await during;
    hosts.fault(this.host.name, "{}");
    const violations = await this.check(allowedAfter(this.proven, attempted, r.ok, r.message), output);
    const cause = r.ok ? undefined : (r.message.split("\n").find((l) => /(FAILED|error: (?!update failed))/.test(l)) ?? r.message.slice(0, 200)).trim().slice(0, 240);
    return { step, ok: r.ok, armed, cause, seconds: (Date.now() - started) / 1000, violations };
  }
}

function allFiles(dir: string): string {
  if (!fs.existsSync(dir)) return "";
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .map((e) => (e.isDirectory() ? allFiles(path.join(dir, e.name)) : fs.readFileSync(path.join(dir, e.name), "utf8")))
    .join("\n");
}

/** One sequence on a fresh host; stops at its first violated step. */
async function runSequence(owned: OwnedHosts, seed: number, index: number, steps: Step[], say: (l: string) => void): Promise<SequenceResult> {
  const started = Date.now();
  const name = `campaign-${process.pid}-${index}`;
  const host = await owned.start(name, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  const base = (config: string) => ({
    ...readRepoStackConfig(config),
    ...simHostConfig(host, UNIT),
    "dflash-sglang:safety": { stableSeconds: 1, lockWaitSeconds: 60 },
    "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 8 },
    "dflash-sglang:benchmark": { enabled: false },
  });
  const ws = simWorkspace(Object.fromEntries(STACKS.map((s) => [s, base(s === "a" ? "b8t4-w2048" : "b4t4-w2048")])));
  const result: SequenceResult = { index, steps: [], violations: [], seconds: 0 };
  try {
    const seq = new Sequence(host, ws, `${seed}-${index}`);
    result.violations.push(...(await seq.baseline()).map((v) => `baseline: ${v}`));
    for (const [i, step] of steps.entries()) {
      if (result.violations.length) break;
      const rec = await seq.run(step);
      result.steps.push(rec);
      say(`  [${index}.${i + 1}] ${describe(step)}: ${rec.ok ? "ok" : `failed (${rec.cause})`} in ${rec.seconds.toFixed(1)} s${rec.violations.length ? `; VIOLATED: ${rec.violations.join("; ")}` : ""}`);
      result.violations.push(...rec.violations.map((v) => `step ${i + 1} (${describe(step)}): ${v}`));
    }
  } finally {
    ws.cleanup();
    await hosts.stop(name);
  }
  result.seconds = (Date.now() - started) / 1000;
  return result;
}

function describe(s: Step): string {
  return s.op === "up" ? `up ${s.stack} -> ${s.config}, key ${s.key}, fault ${s.fault}` : `${s.op} ${s.stack}`;
}

function renderMarkdown(seed: number, results: SequenceResult[], plans: Step[][], command: string): string {
  const steps = results.flatMap((r) => r.steps);
  const count = <T extends string>(xs: T[]) => Object.entries(xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {})).sort();
  const ups = steps.filter((s) => s.step.op === "up" && s.armed).map((s) => s.step as Extract<Step, { op: "up" }>);
  const lines = [
    `# Fault campaign, seed ${seed}`,
    "",
    `Command: \`${command}\` (${new Date().toISOString()}, this machine).`,
    "",
    `| sequences | steps run (planned) | invariant violations | wall time |`,
    `|---|---|---|---|`,
    `| ${results.length} | ${steps.length} (${plans.flat().length}) | ${results.reduce((n, r) => n + r.violations.length, 0)} | ${(results.reduce((n, r) => n + r.seconds, 0) / 60).toFixed(1)} min |`,
    "",
    `Steps by kind: ${count(steps.map((s) => s.step.op)).map(([k, n]) => `${k} ${n}`).join(", ")}.`,
    `Faults armed for an up: ${count(ups.map((u) => u.fault)).map(([k, n]) => `${k} ${n}`).join(", ")} (of ${FAULTS.length} kinds).`,
    `Key changes: ${count(ups.map((u) => u.key)).map(([k, n]) => `${k} ${n}`).join(", ")}.`,
    `Outcomes of up: ${steps.filter((s) => s.step.op === "up" && s.ok).length} succeeded, ${steps.filter((s) => s.step.op === "up" && !s.ok).length} failed as designed (the fault), each then checked.`,
    "",
    "## Violations",
    "",
    ...(results.some((r) => r.violations.length) ? results.flatMap((r) => r.violations.map((v) => `- sequence ${r.index}: ${v}`)) : ["None."]),
    "",
  ];
  return lines.join("\n");
}

async function main(owned: OwnedHosts): Promise<number> {
  setUp({ hosts: true });
  const { seed, sequences, steps } = options;
  const say = (l: string) => process.stdout.write(`${l}\n`);
  const plans = Array.from({ length: sequences }, (_, i) => planSequence(seed, i, steps));
  const results: SequenceResult[] = [];
  for (const [i, plan] of plans.entries()) {
    say(`sequence ${i} (seed ${seed}): ${plan.map(describe).join(" | ")}`);
    let r = await runSequence(owned, seed, i, plan, say);
    results.push(r);
    if (r.violations.length && options.shrink) {
      let smallest = r.steps.map((s) => s.step);
      for (let shrinking = true; shrinking; ) {
        shrinking = false;
        for (const candidate of shorter(smallest)) {
          say(`  shrinking: trying ${candidate.length} step(s)`);
          const again = await runSequence(owned, seed, i, candidate, say);
          if (again.violations.length) {
            smallest = candidate;
            r = again;
            shrinking = true;
            break;
          }
        }
      }
      const dir = path.join(REPO_ROOT, "test", "campaign", "cases");
      fs.mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `seed-${seed}-sequence-${i}.json`);
      fs.writeFileSync(file, `${JSON.stringify({ seed, sequence: i, steps: smallest, violations: r.violations }, null, 2)}\n`);
      say(`  shrunk to ${smallest.length} step(s): ${file}`);
    }
  }
  const command = `npm run campaign -- --seed ${seed} --sequences ${sequences} --steps ${steps}${options.shrink ? " --shrink" : ""}`;
  const md = renderMarkdown(seed, results, plans, command);
  const out = path.join(REPO_ROOT, "bench", "results");
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, `campaign-${seed}.md`), md);
  fs.writeFileSync(path.join(out, `campaign-${seed}.json`), `${JSON.stringify({ seed, sequences, steps, command, results }, null, 2)}\n`);
  say(`\n${md}\nwrote bench/results/campaign-${seed}.{md,json}`);
  return results.some((r) => r.violations.length) ? 1 : 0;
}

void runWithHosts(main, { name: "campaign" });
