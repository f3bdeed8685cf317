// A sweep: `up` for each selected stack through the Automation API, strictly one at a
// time per host (each host has its own worker; the host lock guards it anyway), hosts
// in parallel, each configuration to the next free host. A failure is recorded with its
// cause; with keepGoing the sweep goes on. With resume, stacks whose outputs already hold
// a benchmark of their current configuration (the same deployment, benchmark settings and
// benchmark code: configurationOf's hashes) are skipped.
import { mergedConfig, SimWorkspace } from "../../lib/workspace";
import { parseDeployment } from "../sglang-service/schema";
import { configurationOf } from "../benchmark/benchmark";
import { storedResultOfOutputs } from "../benchmark/compare";

const NS = "dflash-sglang";

export interface SweepHost {
  name: string;
  /** Config keys that point a stack at this host (e.g. dflash-sglang:host, :service). */
  config: Record<string, unknown>;
}

export type SweepStatus = "succeeded" | "failed" | "skipped: already measured" | "not run";

export interface SweepOutcome {
  stack: string;
  host?: string;
  status: SweepStatus;
  cause?: string;
  seconds?: number;
  /** Single-stream decode tokens/s with the short prompt (median), as measured. */
  decodeTokensPerS?: number;
}

export interface SweepOptions {
  ws: SimWorkspace;
  /** Stack name -> its stack-file config (without host settings). */
  stacks: Record<string, Record<string, unknown>>;
  hosts: SweepHost[];
  resume: boolean;
  keepGoing: boolean;
  progress: (host: string, line: string) => void;
  /** Checked before each new configuration (Ctrl-C: finish the current ones, start no more). */
  shouldStop: () => boolean;
  /** Cancels the updates in progress (Pulumi's own cancel: the running step ends first). */
  signal?: AbortSignal;
  /**
   * The hosts were booted for this sweep (simulated): a stack whose state is for any other
   * host is for a simulated host of an earlier run, gone for good, and is started afresh
   * (removed from state first), so that its `up` does not try to reach, or tear down on, a
   * host that no longer exists. Never on real hosts: there a stack that moves tears down on
   * its old host.
   */
  hostsAreFresh?: boolean;
}

/**
 * The backend a sweep keeps its stacks in: on real hosts, the one PULUMI_BACKEND_URL names
 * (a team's), so that --resume sees what colleagues already measured; on simulated hosts,
 * always the sweep's own (undefined), because stacks of the same names in a team's backend
 * deploy to real hosts, and a sweep must never point them at simulated ones.
 */
export function sweepBackend(onRealHosts: boolean, backendUrl: string | undefined): string | undefined {
  return onRealHosts && backendUrl ? backendUrl : undefined;
}

/** What the stack would deploy now on `host`, as its benchmark output would describe it. */
export function currentConfiguration(stack: string, stackConfig: Record<string, unknown>, host: SweepHost): Record<string, unknown> {
  return configurationOf(parseDeployment(mergedConfig({ ...stackConfig, ...host.config }), stack), stack);
}

/**
 * Pure: the host a stack's configuration points at (dflash-sglang:host), when it is none of
 * `hosts` (same address, port and host key); undefined when it is one of them, or names none.
 */
export function recordedElsewhere(recorded: Record<string, unknown>, hosts: SweepHost[]): { address: string; port: number } | undefined {
  const where = (config: Record<string, unknown>) => {
    const h = config[`${NS}:host`] as { address?: string; port?: number; hostKey?: string } | undefined;
    return h?.address ? { address: h.address, port: h.port ?? 22, hostKey: h.hostKey ?? "" } : undefined;
  };
  const old = where(recorded);
  if (!old) return undefined;
  const same = hosts.some((host) => JSON.stringify(where(host.config)) === JSON.stringify(old));
  return same ? undefined : { address: old.address, port: old.port };
}

/** Deep equality that ignores key order (state outputs come back with sorted keys). */
function sameValue(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(canon) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().filter((k) => (v as Record<string, unknown>)[k] !== undefined).map((k) => [k, canon((v as Record<string, unknown>)[k])])) : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

/**
 * Pure: whether a stack's outputs hold a benchmark of the configuration it would deploy now on
 * one of the hosts (`current`, one per host: the service block is the host's own): the same
 * deployment, benchmark settings and benchmark code, whose fingerprints the configuration
 * output carries. An output from before those fingerprints never matches.
 */
export function alreadyMeasured(outputs: Record<string, { value: unknown } | undefined>, current: Record<string, unknown>[]): boolean {
  return storedResultOfOutputs(outputs) !== null && current.some((c) => sameValue(outputs.configuration?.value, c));
}

/** Pure: the short-context decode rate of a benchmark output: format 2's decode_tokens_per_s, else format 1's output_throughput (then a decode rate). */
export function shortDecodeRate(benchmark: unknown): number | undefined {
  const short = (benchmark as { short?: { decode_tokens_per_s?: number; output_throughput?: number } } | null | undefined)?.short;
  return short?.decode_tokens_per_s ?? short?.output_throughput;
}

/** The line of a failed `up` that says what went wrong (our errors come first). */
export function failureCause(message: string): string {
  const lines = message.split("\n").map((l) => l.trim());
  // Ours: the readiness provider's errors, and the host-side scripts' own lines inside a
  // command's "Process exited with status N" error.
  const ours = lines.find((l) => /^(error: )?(sglang |Preflight failed|Invalid configuration|SSH to |cannot reach|FAILED: |.* is being reconfigured by )/.test(l));
  const any = ours ?? lines.find((l) => l.startsWith("error: ") && l !== "error: update failed");
  return (any ?? lines.find(Boolean) ?? "unknown error").replace(/^error: /, "").replace(/^FAILED: /, "");
}

export async function runSweep(o: SweepOptions): Promise<SweepOutcome[]> {
  const queue = Object.keys(o.stacks).sort();
  const outcomes = new Map<string, SweepOutcome>(queue.map((s) => [s, { stack: s, status: "not run" as SweepStatus }]));
  let failed = false;

  if (o.resume) {
    for (const stack of [...queue]) {
      const st = await o.ws.stack(stack);
      const out = await st.outputs().catch(() => ({}) as Record<string, { value: unknown }>);
      if (alreadyMeasured(out, o.hosts.map((h) => currentConfiguration(stack, o.stacks[stack], h)))) {
        outcomes.set(stack, { stack, status: "skipped: already measured", decodeTokensPerS: shortDecodeRate(storedResultOfOutputs(out)) });
        queue.splice(queue.indexOf(stack), 1);
        o.progress("-", `${stack}: already measured with its current configuration; skipped (--resume)`);
      }
    }
  }

  const worker = async (host: SweepHost) => {
    for (;;) {
      if (o.shouldStop() || (failed && !o.keepGoing)) return;
      const stack = queue.shift();
      if (stack === undefined) return;
      const started = Date.now();
      try {
        const gone = o.hostsAreFresh ? recordedElsewhere(o.ws.stackConfig(stack), o.hosts) : undefined;
        if (gone) {
          o.progress(host.name, `${stack}: its state is for a simulated host of an earlier run (${gone.address}:${gone.port}), which is gone; starting it afresh`);
          await o.ws.removeStack(stack);
        }
        for (const [key, value] of Object.entries({ ...o.stacks[stack], ...host.config })) o.ws.setStackConfig(stack, key.replace(`${NS}:`, ""), value);
        o.progress(host.name, `${stack}: up`);
        const up = await (await o.ws.stack(stack)).up({ signal: o.signal });
        const tps = shortDecodeRate(storedResultOfOutputs(up.outputs));
        const seconds = Math.round((Date.now() - started) / 100) / 10;
        outcomes.set(stack, { stack, host: host.name, status: "succeeded", seconds, decodeTokensPerS: tps });
        o.progress(host.name, `${stack}: done in ${seconds} s${tps !== undefined ? `, ${tps} tok/s decode (short prompt)` : ""}`);
      } catch (e) {
        failed = true;
        const cause = failureCause((e as Error).message);
        const seconds = Math.round((Date.now() - started) / 100) / 10;
        outcomes.set(stack, { stack, host: host.name, status: "failed", cause, seconds });
        o.progress(host.name, `${stack}: FAILED after ${seconds} s: ${cause}`);
      }
    }
  };
  await Promise.all(o.hosts.map(worker));
  return [...outcomes.values()];
}

export function renderOutcomes(outcomes: SweepOutcome[]): string {
  const lines = ["| stack | host | status | seconds | decode tok/s short | cause |", "|---|---|---|---:|---:|---|"];
  for (const r of outcomes) lines.push(`| ${r.stack} | ${r.host ?? "-"} | ${r.status} | ${r.seconds ?? "-"} | ${r.decodeTokensPerS ?? "-"} | ${(r.cause ?? "").replace(/\|/g, "\\|")} |`);
  return lines.join("\n") + "\n";
}
