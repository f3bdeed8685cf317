// What the benchmark's dynamic provider does (loaded in the provider process, never
// serialized): forward a local port to the server over SSH, run the benchmark, keep the
// raw per-request records as JSONL, return the summary.
import * as fs from "node:fs";
import * as path from "node:path";
import { Connection, withSsh } from "../sglang-service/remote/ssh";
import { progress } from "../sglang-service/remote/progress";
import { exitWithEngine } from "../sglang-service/remote/engine-watch";
import { BenchmarkResult, RawRecord, runBenchmark } from "./run";
import type { BenchmarkSettings } from "./schema";
import { backendName, keepResult } from "./history";

exitWithEngine();

export interface BenchmarkInputs {
  connection: Connection;
  urn: string;
  label: string;
  /** Address and port the server listens on, as seen from the host. */
  listenAddress: string;
  port: number;
  model: string;
  apiKey: string;
  settings: BenchmarkSettings;
  /** What was measured: the unit the host runs (a new one re-runs the benchmark). */
  unitHash: string;
  /** What the configuration was, for the report. */
  configuration: Record<string, unknown>;
  /** Where the raw per-request records go (JSONL, one file per stack), relative to the project folder (the provider's working folder). */
  resultsPath: string;
  providerVersion: string;
}

export interface BenchmarkOutputs extends BenchmarkInputs {
  result: BenchmarkResult | null;
  takenAt: string;
}

export async function measure(i: BenchmarkInputs): Promise<BenchmarkOutputs> {
  const takenAt = new Date().toISOString();
  if (!i.settings.enabled) return { ...i, result: null, takenAt };
  const remoteHost = i.listenAddress === "0.0.0.0" ? "127.0.0.1" : i.listenAddress === "::" ? "::1" : i.listenAddress;
  return withSsh(i.connection, async (ssh) => {
    const tunnel = await ssh.forward(remoteHost, i.port);
    const records: string[] = [];
    try {
      // The timeout stops the benchmark itself: every request in flight is aborted, and
      // nothing is sent to the server after it.
      const stop = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          stop.abort();
          reject(new Error(`benchmark of ${i.label} did not finish within ${i.settings.timeoutSeconds} s (benchmark.timeoutSeconds); stopped it`));
        }, i.settings.timeoutSeconds * 1000);
        timer.unref();
      });
      const result = await Promise.race([
        runBenchmark(
          { baseUrl: `http://127.0.0.1:${tunnel.localPort}`, model: i.model, apiKey: i.apiKey || undefined, signal: stop.signal },
          i.settings,
          (m) => void progress(i.urn, `${i.label} benchmark: ${m}`),
          (r: RawRecord) => records.push(JSON.stringify({ taken_at: takenAt, unit_hash: i.unitHash, ...r })),
        ),
        deadline,
      ]).finally(() => clearTimeout(timer));
      const file = path.resolve(i.resultsPath);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, records.join("\n") + "\n");
      // Kept beside the outputs, which a destroy empties (history.ts).
      keepResult(process.cwd(), { format: 1, stack: String(i.configuration.stack ?? ""), backend: backendName(process.env.PULUMI_BACKEND_URL), takenAt, unitHash: i.unitHash, host: i.connection.host, configuration: i.configuration, result });
      await progress(i.urn, `${i.label} benchmark: ${result.short.output_throughput} tok/s short context, accept length ${result.accept_length ?? "n/a"}, coding ${result.coding ? `${result.coding.passed}/${result.coding.tasks}` : "off"}`, false);
      return { ...i, result, takenAt };
    } finally {
      tunnel.close();
    }
  });
}
