// npm run simhost -- start NAME [options] | stop NAME | stop --all | status | fault NAME JSON | configure NAME JSON
// Thin wiring over simhost/hosts.ts: parses arguments, prints JSON lines on stdout,
// progress and errors on stderr.
import { parseArgs } from "node:util";
import { configure, fault, start, status, stop, stopAll, type ModelSpec } from "./hosts";

const USAGE = `usage: npm run simhost -- <command>
  start NAME [--gpus N] [--gpu-memory-mib N] [--sglang JSON] [--models JSON] [--boot-timeout SECONDS]
                           boot a host; prints its HostInfo as one JSON line
  stop NAME                stop a host and remove all it left (idempotent)
  stop --all               stop every host on this machine
  status                   one JSON line per host: name, address, pid, alive
  fault NAME JSON          replace the host's faults, e.g. '{"gpuReleaseDelaySeconds":5}'
  configure NAME JSON      merge keys into the host's /etc/dflash-sim/sglang.json`;

function positiveNumber(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${flag} must be a positive number, got ${JSON.stringify(text)}`);
  return value;
}

function json(flag: string, text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${flag} is not valid JSON (${(e as Error).message}): ${text}`);
  }
}

function exactly(args: string[], count: number, command: string): string[] {
  if (args.length !== count) throw new Error(`${command} takes ${count} argument(s), got ${args.length}\n${USAGE}`);
  return args;
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      all: { type: "boolean" },
      gpus: { type: "string" },
      "gpu-memory-mib": { type: "string" },
      sglang: { type: "string" },
      models: { type: "string" },
      "boot-timeout": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, ...args] = positionals;
  if (values.help || command === undefined) {
    console.log(USAGE);
    return;
  }
  switch (command) {
    case "start": {
      const [name] = exactly(args, 1, "start");
      const sglang = json("--sglang", values.sglang);
      if (sglang !== undefined && (typeof sglang !== "object" || sglang === null || Array.isArray(sglang))) {
        throw new Error("--sglang must be a JSON object");
      }
      const models = json("--models", values.models);
      if (models !== undefined && !Array.isArray(models)) throw new Error('--models must be a JSON array of {"path","sizeGiB"}');
      const bootTimeout = positiveNumber("--boot-timeout", values["boot-timeout"]);
      const host = await start(name, {
        gpus: positiveNumber("--gpus", values.gpus),
        gpuMemoryMiB: positiveNumber("--gpu-memory-mib", values["gpu-memory-mib"]),
        sglang: sglang as Record<string, unknown> | undefined,
        models: models as ModelSpec[] | undefined,
        bootTimeoutMs: bootTimeout === undefined ? undefined : bootTimeout * 1000,
        onProgress: (message) => console.error(`simhost: ${message}`),
      });
      console.log(JSON.stringify(host));
      return;
    }
    case "stop":
      if (values.all) {
        exactly(args, 0, "stop --all");
        const stopped = await stopAll();
        console.error(`simhost: stopped ${stopped.length} host(s)${stopped.length ? `: ${stopped.join(", ")}` : ""}`);
      } else {
        await stop(exactly(args, 1, "stop")[0]);
      }
      return;
    case "status":
      exactly(args, 0, "status");
      for (const host of status()) console.log(JSON.stringify(host));
      return;
    case "fault": {
      const [name, spec] = exactly(args, 2, "fault");
      fault(name, spec);
      return;
    }
    case "configure": {
      const [name, patch] = exactly(args, 2, "configure");
      console.log(JSON.stringify(configure(name, patch)));
      return;
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(command)}\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error(`simhost: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
