// What the benchmark's dynamic provider does (loaded in the provider process, never
// serialized): hold the host against other stacks' deployments, check that the server is
// this stack's (its arguments as the readiness step proved them), forward a local port to it
// over SSH, run the benchmark writing each raw per-request record as it comes (JSONL), check
// that the same server (main PID, arguments) is still the one answering, return the numbers
// and how they compare with the stack's previous run (summary.ts).
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import { Connection, Ssh, withSsh } from "../sglang-service/remote/ssh";
import { progress } from "../sglang-service/remote/progress";
import { exitWithEngine } from "../sglang-service/remote/engine-watch";
import { argMismatches } from "../sglang-service/remote/steps";
import { publicServerArgs } from "../sglang-service/parse";
import { unitPath } from "../sglang-service/render";
import { RUN_DIR } from "../sglang-service/script";
import { bashCommand, renderHostScript } from "../sglang-service/hostScript";
import { BenchmarkResult, RawRecord, runBenchmark, serverInfo } from "./run";
import type { BenchmarkSettings } from "./schema";
import { backendName, keepResult } from "./history";
import type { MeasuredOn } from "./compare";
import { promptNonce } from "./workload";
import { headline, versusPrevious, type VersusPrevious } from "./summary";

exitWithEngine();

export interface BenchmarkInputs {
  connection: Connection;
  /**
   * This resource's URN, for its progress lines. Not `urn`: the SDK sends no input of that name
   * to a provider (it is the resource's own), so lines logged against it went to the stack.
   */
  progressUrn: string;
  label: string;
  stack: string;
  /** The stack's systemd unit (without .service): its main PID is checked before and after. */
  unitName: string;
  /** Address and port the server listens on, as seen from the host. */
  listenAddress: string;
  port: number;
  model: string;
  apiKey: string;
  settings: BenchmarkSettings;
  /** What was measured: the unit the host runs (a new one re-runs the benchmark). */
  unitHash: string;
  /** The server's public arguments as this stack's readiness step proved them. */
  serverArgs: Record<string, unknown>;
  /** How long to wait for another stack's deployment to finish with the host (safety.lockWaitSeconds). */
  lockWaitSeconds: number;
  /** What the configuration was, for the report. */
  configuration: Record<string, unknown>;
  /** Where the raw per-request records go (JSONL, one file per stack), relative to the project folder (the provider's working folder). */
  resultsPath: string;
  providerVersion: string;
}

export interface BenchmarkOutputs extends BenchmarkInputs {
  /** The full numbers; null when nothing was measured (benchmark.enabled false). */
  result: (BenchmarkResult & { measured_on: MeasuredOn }) | null;
  /** When they were taken; null when nothing was measured. */
  takenAt: string | null;
  /** This run against the one before it (the state's), by the report's rule; null for a first run or none. */
  versusPrevious: VersusPrevious | null;
}

/** What answers on the port, and who runs it: compared before and after the benchmark. */
export interface Identity {
  mainPid: number;
  /** sha256 of the installed unit file: this stack's is `unitHash`. */
  unitFileHash: string;
  /** systemd has read the unit file as installed (NeedDaemonReload=no). */
  loaded: boolean;
  /** ActiveState/SubState: "active/running" while it serves; "deactivating/..." while it drains to stop. */
  state: string;
  /** /server_info answered (a server still loading does not). */
  answered: boolean;
  args: Record<string, unknown>;
  argsHash: string;
  version: string | null;
  gpu: string | null;
  gpuCount: number | null;
}

async function identify(ssh: Ssh, i: BenchmarkInputs, baseUrl: string): Promise<Identity> {
  const out = await ssh.run(
    bashCommand(renderHostScript({ about: [`dflash-sglang: which server of ${i.unitName} is measured.`], set: "-u", values: { service: `${i.unitName}.service`, unit_path: unitPath(i.unitName) }, files: ["identify.sh"] })),
    { timeoutMs: 60_000 },
  );
  const [pidLine = "", reloadLine = "", stateLine = "", hashLine = "", ...gpus] = out.stdout.split("\n").map((l) => l.trim());
  const names = gpus.filter(Boolean);
  const { info } = await serverInfo({ baseUrl, apiKey: i.apiKey || undefined });
  const raw = info as Record<string, unknown>;
  // Only public arguments are read (the body holds the API key in clear).
  const args = publicServerArgs(raw, Object.keys(i.serverArgs));
  return {
    mainPid: Number(pidLine) || 0,
    unitFileHash: hashLine,
    loaded: reloadLine === "no",
    state: stateLine,
    answered: Object.keys(raw).length > 0,
    args,
    argsHash: createHash("sha256").update(JSON.stringify(args)).digest("hex"),
    version: typeof raw.version === "string" ? raw.version : null,
    gpu: names[0] ?? null,
    gpuCount: names.length || null,
  };
}

/** Pure: why the server is not this stack's deployment, or undefined when it is. */
export function notOurs(i: Pick<BenchmarkInputs, "unitName" | "unitHash" | "serverArgs">, id: Pick<Identity, "mainPid" | "unitFileHash" | "loaded" | "state" | "answered" | "args">): string | undefined {
  if (id.mainPid === 0) return `${i.unitName}.service is not running`;
  if (id.state !== "active/running") return `${i.unitName}.service is ${id.state} (a server being stopped still answers while it drains)`;
  if (id.unitFileHash !== i.unitHash) return `the installed ${i.unitName}.service is not this stack's (sha256 ${id.unitFileHash.slice(0, 12) || "none"}, this stack's ${i.unitHash.slice(0, 12)}): another stack's deployment holds the host`;
  if (!id.loaded) return `systemd has not loaded the installed ${i.unitName}.service yet (NeedDaemonReload=yes): the process running is from an earlier unit`;
  if (!id.answered) return "the server does not answer /server_info (still loading, or stopped)";
  const moved = argMismatches(i.serverArgs, id.args);
  return moved.length > 0 ? `it runs other arguments: ${moved.join(", ")}` : undefined;
}

/** Pure: how the server after the benchmark differs from the one before, or undefined when it is the same, still serving. */
export function changed(before: Pick<Identity, "mainPid" | "argsHash" | "state">, after: Pick<Identity, "mainPid" | "argsHash" | "state">): string | undefined {
  const what: string[] = [];
  if (after.mainPid !== before.mainPid || after.argsHash !== before.argsHash || after.state !== "active/running") what.push(`main PID ${before.mainPid} -> ${after.mainPid}`);
  if (after.argsHash !== before.argsHash) what.push("arguments changed");
  if (after.state !== "active/running") what.push(`the unit is ${after.state || "gone"}`);
  return what.length > 0 ? what.join(", ") : undefined;
}

/** The hold's own limit on the host: the benchmark's deadline and a margin, so that a lost session cannot keep the lock for hours. */
const HOLD_MARGIN_SECONDS = 120;

/**
 * Holds the host's deployment lock (the one every stack's restart takes, script.ts) for as
 * long as the benchmark runs, so that no other stack restarts the server under it. Resolves
 * once held, with `lost` (resolves if the hold ends before `release`); rejects, naming the
 * holder, after lockWaitSeconds. On the host the hold ends by itself after the benchmark's
 * deadline and a margin, or when this process's connection closes.
 */
async function holdHost(ssh: Ssh, i: BenchmarkInputs): Promise<{ release: () => void; lost: Promise<void> }> {
  const script = renderHostScript({
    about: [`dflash-sglang: hold the deployment lock of ${i.connection.host} while stack ${i.stack} is measured.`],
    set: "-u",
    values: {
      run: RUN_DIR,
      note: `benchmark of stack ${i.stack}`,
      wait_s: Math.max(1, Math.ceil(i.lockWaitSeconds)),
      hold_s: Math.ceil(i.settings.timeoutSeconds) + HOLD_MARGIN_SECONDS,
    },
    files: ["lock.sh", "hold.sh"],
  });
  let said = "";
  let released = false;
  let resolveHeld!: () => void;
  const held = new Promise<void>((r) => (resolveHeld = r));
  const h = ssh.hold(bashCommand(script), (text) => {
    said += text;
    if (/^HELD$/m.test(said)) resolveHeld();
  });
  const outcome = await Promise.race([held.then(() => "held" as const), h.ended.then((code) => code)]);
  if (outcome !== "held") {
    const busy = /^BUSY (.*)$/m.exec(said)?.[1];
    throw new Error(`benchmark of ${i.label}: ${busy ? `${i.connection.host} is being reconfigured by ${busy}; waited ${i.lockWaitSeconds} s (safety.lockWaitSeconds)` : `could not take the host's deployment lock on ${i.connection.host} (exit ${outcome})`}. Nothing was measured; run \`pulumi up\` again when it is done.`);
  }
  return {
    release: () => {
      released = true;
      h.stop();
    },
    lost: h.ended.then(() => (released ? new Promise<void>(() => undefined) : undefined)),
  };
}

/**
 * Measures (unless benchmark.enabled is false: then nothing ran, and its outputs say so with
 * nulls); `previous`: what the resource held before (an update's old outputs), the run this
 * one is compared with.
 */
export async function measure(i: BenchmarkInputs, previous?: Partial<BenchmarkOutputs>): Promise<BenchmarkOutputs> {
  if (!i.settings.enabled) return { ...i, result: null, takenAt: null, versusPrevious: null };
  const takenAt = new Date().toISOString();
  const remoteHost = i.listenAddress === "0.0.0.0" ? "127.0.0.1" : i.listenAddress === "::" ? "::1" : i.listenAddress;
  return withSsh(i.connection, async (ssh) => {
    const hold = await holdHost(ssh, i);
    const tunnel = await ssh.forward(remoteHost, i.port).catch((e) => {
      hold.release();
      throw e;
    });
    const baseUrl = `http://127.0.0.1:${tunnel.localPort}`;
    // Raw records are written as they come, to a file of this run; it replaces the stack's
    // records only once the run succeeded (a failed run's stay beside, named in the error).
    // The file is this run's alone (its time and process): another program measuring a stack
    // of the same name into the same folder (another backend, a test beside) neither clobbers
    // nor moves it.
    const file = path.resolve(i.resultsPath);
    const partial = `${i.resultsPath}.${takenAt.replace(/[:.]/g, "-")}-${process.pid}.partial`;
    try {
      const before = await identify(ssh, i, baseUrl);
      const why = notOurs(i, before);
      if (why) throw new Error(`benchmark of ${i.label}: the server on ${i.connection.host} is not the one this stack deployed (${why}). Nothing was measured; run \`pulumi up\` for this stack to deploy it again, then measure.`);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(path.resolve(partial), "");
      // The timeout stops the benchmark itself: every request in flight is aborted, and
      // nothing is sent to the server after it. So does losing the hold on the host.
      const stop = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          stop.abort();
          reject(new Error(`benchmark of ${i.label} did not finish within ${i.settings.timeoutSeconds} s (benchmark.timeoutSeconds); stopped it (raw records so far: ${partial})`));
        }, i.settings.timeoutSeconds * 1000);
        timer.unref();
      });
      const lost = hold.lost.then(() => {
        stop.abort();
        throw new Error(`benchmark of ${i.label}: the hold on ${i.connection.host}'s deployment lock ended (SSH session lost); stopped measuring, numbers not stored (raw records so far: ${partial})`);
      });
      // Prompts no earlier run of this stack sent (recorded in the result and every raw record).
      const nonce = promptNonce(i.stack, i.settings.runId, takenAt);
      let result: BenchmarkResult;
      try {
        result = await Promise.race([
          runBenchmark(
            { baseUrl, model: i.model, apiKey: i.apiKey || undefined, signal: stop.signal },
            i.settings,
            (m) => void progress(i.progressUrn, `${i.label} benchmark: ${m}`),
            (r: RawRecord) => fs.appendFileSync(path.resolve(partial), JSON.stringify({ taken_at: takenAt, unit_hash: i.unitHash, prompt_nonce: nonce, ...r }) + "\n"),
            nonce,
          ),
          deadline,
          lost,
        ]);
      } catch (e) {
        // Whatever failed, say whether the server changed under it: that is the cause to fix.
        const after = await identify(ssh, i, baseUrl).catch(() => undefined);
        const moved = after && changed(before, after);
        if (moved) throw new Error(`benchmark of ${i.label}: the server changed while it was measured (${moved}), and the run failed: ${(e as Error).message}. Raw records: ${partial}.`);
        throw e;
      } finally {
        clearTimeout(timer);
      }
      const moved = changed(before, await identify(ssh, i, baseUrl));
      if (moved) {
        throw new Error(
          `benchmark of ${i.label}: the server changed while it was measured (${moved}); its numbers are not stored. Raw records: ${partial}. Run \`pulumi up\` again (change benchmark.runId to measure without a restart).`,
        );
      }
      fs.renameSync(path.resolve(partial), file);
      const measured = { ...result, measured_on: { host: i.connection.host, gpu: before.gpu, gpuCount: before.gpuCount, sglangVersion: before.version, mainPid: before.mainPid } };
      // Kept beside the outputs, which a destroy empties (history.ts).
      keepResult(process.cwd(), { format: 1, stack: String(i.configuration.stack ?? ""), backend: backendName(process.env.PULUMI_BACKEND_URL), takenAt, unitHash: i.unitHash, host: i.connection.host, configuration: i.configuration, result: measured });
      const earlier = previous?.result && previous.takenAt ? { result: previous.result, takenAt: previous.takenAt, unitHash: previous.unitHash ?? "", configuration: previous.configuration ?? {} } : undefined;
      const versus = versusPrevious({ result: measured, takenAt, unitHash: i.unitHash, configuration: i.configuration }, earlier);
      // Ephemeral: the step's last status, gone from a terminal when it ends (a log repeats it
      // once as the step ends). The terminal's summary is the stack output `benchmark`, shown
      // after the update; a lasting line would also show under Diagnostics (once more in a log),
      // above a failure's cause.
      await progress(i.progressUrn, `${i.label} benchmark: ${headline(measured, versus)}`);
      return { ...i, result: measured, takenAt, versusPrevious: versus };
    } finally {
      tunnel.close();
      hold.release();
    }
  });
}
