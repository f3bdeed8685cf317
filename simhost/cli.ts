// npm run simhost -- <command> [options]: start, stop, reboot, status, reclaim, fault, stack-config, configure.
// Thin wiring over simhost/hosts.ts: reads the command line (simhost/command-line.ts) before
// anything else, prints JSON lines on stdout, progress and errors on stderr.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { argument, closest, command, flag, json, oneOf, option, parseProgramOrExit, positiveInteger, positiveNumber, UsageError, type ValueType } from "./command-line";
import { parseFaults } from "./sim/faults";
import { checkSimSettings, settingsHelp } from "./sim/sglang/settings";
import * as YAML from "yaml";
import { simHostConfigLines, withSimHostOverlay } from "../lib/workspace";
import { OVERLAY_FILE, parseOverlay } from "../components/sglang-service/overlay";
import { sudoersFor } from "../components/sglang-service/become";
import { configure, fault, hostInfo, LOCALES, projectBuildProfile, reboot, reclaimOrphans, start, START_DEFAULTS, status, stop, stopAll, validateHostName, type ModelSpec } from "./hosts";

const hostName: ValueType<string> = {
  expects: "a host name: 1-63 lower-case letters, digits and '-', starting with a letter or digit",
  parse(name) {
    try {
      return validateHostName(name);
    } catch (e) {
      throw new Error((e as Error).message.includes("reserved") ? "that name is reserved" : "");
    }
  },
};

/** The SGLang simulator's settings (simhost/sim/sglang/settings.ts): an unknown key is refused with the nearest one and the valid ones. */
function simSettings(example: string): ValueType<Record<string, unknown>> {
  return json(`a JSON object, e.g. ${example}`, (value) => checkSimSettings(value, closest));
}

/** The settings as `start --help` and `configure --help` list them. */
const SETTINGS_NOTES = `The SGLang simulator's settings (--sglang, configure; simhost/sim/sglang/settings.ts), any other key refused:\n${settingsHelp()}`;

const models = json('a JSON array of {"path": "/models/...", "sizeGiB": N}', (value) => {
  if (!Array.isArray(value)) throw new Error("not an array");
  return value.map((m: { path?: unknown; sizeGiB?: unknown } | null, i): ModelSpec => {
    if (typeof m?.path !== "string" || !m.path.startsWith("/")) throw new Error(`entry ${i + 1}: "path" must be an absolute path`);
    if (typeof m.sizeGiB !== "number" || !(m.sizeGiB > 0)) throw new Error(`entry ${i + 1}: "sizeGiB" must be a positive number`);
    return { path: m.path, sizeGiB: m.sizeGiB };
  });
});

const faults = json('a JSON object of faults, e.g. {"gpuReleaseDelaySeconds": 5}', (value) => {
  parseFaults(value);
  return value as Record<string, unknown>;
});

const stackName: ValueType<string> = {
  expects: "a stack name: letters, digits, '-', '_' and '.'",
  parse(name) {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) throw new Error("");
    return name;
  },
};

/** `start --sudo`: what the user deploy may do through sudo on a host where root may not log in. */
const SUDO_RIGHTS = {
  all: "deploy ALL=(root) NOPASSWD: ALL\n",
  listed: sudoersFor("deploy"),
  password: "deploy ALL=(ALL) ALL\n",
} as const;

const INVOCATION = "npm run simhost --";
const PROGRAM = {
  summary: "Simulated GPU hosts on this machine: Debian containers with systemd and sshd on 127.0.0.N, simulated SGLang and GPUs.",
  notes: SETTINGS_NOTES,
  commands: {
    start: {
      summary: "boot a host that stays until you stop it; prints its HostInfo (address, ssh key, host key, ...) as one JSON line",
      args: { NAME: argument(hostName, "the host's name") },
      options: {
        gpus: option({ type: positiveInteger, placeholder: "N", description: "GPUs the simulated nvidia-smi reports", default: String(START_DEFAULTS.gpus) }),
        "gpu-memory-mib": option({ type: positiveInteger, placeholder: "N", description: "memory per GPU in MiB", default: String(START_DEFAULTS.gpuMemoryMiB) }),
        sglang: option({ type: simSettings('{"profile":"ddtree-fork"}'), placeholder: "JSON", description: "settings of the SGLang simulator, listed below", default: "{}" }),
        models: option({ type: models, placeholder: "JSON", description: "fake model trees; without it, the Kimi-K2.6 target and its DFlash drafter" }),
        "boot-timeout": option({ type: positiveNumber, placeholder: "SECONDS", description: "how long the boot may take", default: String(START_DEFAULTS.bootTimeoutMs / 1000) }),
        sudo: option({
          type: oneOf(["all", "listed", "password"] as const),
          placeholder: "RIGHTS",
          description: "root may not log in over SSH: deploy logs in and runs the host steps through sudo, which allows it all, the README's sudoers lines (listed), or all with a password",
        }),
        locale: option({ type: oneOf(LOCALES), placeholder: "LOCALE", description: "the host's own locale (its services' and its SSH sessions'), instead of C" }),
      },
      notes: SETTINGS_NOTES,
    },
    stop: command({
      summary: "stop a host and remove all it left (idempotent); --all: every host on this machine",
      args: { NAME: argument(hostName, "the host to stop", { optional: true }) },
      options: { all: flag("stop every host on this machine") },
      check({ options, args }) {
        if (options.all === (args.NAME !== undefined)) throw new UsageError("stop takes either NAME or --all");
      },
    }),
    reboot: {
      summary: "reboot a running host on its own address, keys and disk (/run starts empty, the GPUs free, enabled units start again); prints its HostInfo as one JSON line once systemd runs and sshd answers",
      args: { NAME: argument(hostName, "the host (running: see status)") },
      options: {
        "power-cut": flag("cut the power: every process of the host SIGKILLed at once (no unit stops, no EXIT hook runs) instead of the host's own orderly shutdown"),
        "boot-timeout": option({ type: positiveNumber, placeholder: "SECONDS", description: "how long the boot may take", default: String(START_DEFAULTS.bootTimeoutMs / 1000) }),
      },
    },
    status: {
      summary: 'one JSON line per host: name, address, pid, alive, owner ({pid, command, running} or "kept")',
      options: {},
    },
    reclaim: {
      summary: "stop every host whose owning program is gone (killed before it could stop it); kept hosts stay",
      options: {},
    },
    fault: {
      summary: "replace the host's faults (see simhost/sim/faults.ts), e.g. '{\"gpuReleaseDelaySeconds\":5}'",
      args: { NAME: argument(hostName, "the host"), JSON: argument(faults, "the faults, replacing the host's") },
      options: {},
    },
    "stack-config": {
      summary: "point STACK at the running host NAME: with --write, in this checkout's git-ignored dflash.local.yaml (merged over the stack's configuration; nothing tracked changes); without, print the `npx pulumi config set` lines that write it into the stack file instead (the whole host and service sections, since a stack's section replaces Pulumi.yaml's)",
      args: { NAME: argument(hostName, "the host (running: see status)"), STACK: argument(stackName, "the stack, e.g. b16t4-w2048") },
      options: { write: flag("write the host's settings for STACK into dflash.local.yaml (other entries kept) instead of printing config set lines") },
    },
    configure: {
      summary: "merge keys into the host's /etc/dflash-sim/sglang.json (the SGLang simulator's settings); prints the result",
      args: { NAME: argument(hostName, "the host"), JSON: argument(simSettings('{"removedEndpoints":["/get_server_info"]}'), "the settings to merge") },
      options: {},
      notes: SETTINGS_NOTES,
    },
  },
};

/** The host image and compiled simulators a start needs (simhost/prepare.sh; cached). */
function prepare(): void {
  const script = path.join(__dirname, "prepare.sh");
  const run = spawnSync("bash", [script], { stdio: ["ignore", "inherit", "inherit"] });
  if (run.status !== 0) throw new Error(`preparing the host image failed (bash ${script} ended with ${run.status ?? run.signal ?? run.error?.message}); see its output above`);
}

async function main(): Promise<void> {
  const parsed = parseProgramOrExit(INVOCATION, PROGRAM);
  switch (parsed.command) {
    case "start": {
      const { options, args } = parsed;
      await reclaimOrphans();
      prepare();
      // The SGLang build the project's stacks are written for, unless --sglang names one.
      const profile = projectBuildProfile(fs.readFileSync(path.join(__dirname, "..", "Pulumi.yaml"), "utf8"));
      if (profile && !("profile" in options.sglang)) console.error(`simhost: SGLang build ${profile}, as Pulumi.yaml's sglangBuild says (--sglang '{"profile":"upstream"}' or '{"profile":"ddtree-fork"}' to choose; \`configure ${args.NAME} '{"profile":...}'\` changes it later)`);
      const host = await start(args.NAME, {
        keep: true,
        gpus: options.gpus,
        gpuMemoryMiB: options["gpu-memory-mib"],
        sglang: { ...(profile ? { profile } : {}), ...options.sglang },
        models: options.models,
        bootTimeoutMs: options["boot-timeout"] * 1000,
        ...(options.sudo ? { sudoers: SUDO_RIGHTS[options.sudo] } : {}),
        ...(options.locale ? { locale: options.locale } : {}),
        onProgress: (message) => console.error(`simhost: ${message}`),
      });
      console.log(JSON.stringify(host));
      return;
    }
    case "stop":
      if (parsed.options.all) {
        const stopped = await stopAll();
        console.error(`simhost: stopped ${stopped.length} host(s)${stopped.length ? `: ${stopped.join(", ")}` : ""}`);
      } else {
        await stop(parsed.args.NAME!);
      }
      return;
    case "reboot": {
      const { options, args } = parsed;
      const host = await reboot(args.NAME, {
        kind: options["power-cut"] ? "power-cut" : "clean",
        bootTimeoutMs: options["boot-timeout"] * 1000,
        onProgress: (message) => console.error(`simhost: ${message}`),
      });
      console.log(JSON.stringify(host));
      return;
    }
    case "status":
      for (const host of status()) console.log(JSON.stringify(host));
      return;
    case "reclaim": {
      const { reclaimed, failed } = await reclaimOrphans();
      console.error(reclaimed.length ? `simhost: reclaimed ${reclaimed.length} host(s): ${reclaimed.map((h) => h.name).join(", ")}` : "simhost: no host to reclaim");
      if (failed.length) process.exitCode = 1;
      return;
    }
    case "fault":
      fault(parsed.args.NAME, JSON.stringify(parsed.args.JSON));
      return;
    case "stack-config": {
      const host = hostInfo(parsed.args.NAME);
      if (parsed.options.write) {
        const root = path.join(__dirname, "..");
        const file = path.join(root, OVERLAY_FILE);
        const next = withSimHostOverlay(fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined, host, parsed.args.STACK);
        const known = fs.readdirSync(path.join(root, "stacks")).flatMap((f) => f.match(/^Pulumi\.(.+)\.yaml$/)?.[1] ?? []);
        // The stack must have a file in stacks/ (the overlay refuses any other name): checked before writing.
        parseOverlay(next, known);
        fs.writeFileSync(file, next);
        console.error(`simhost: ${OVERLAY_FILE} (git-ignored): stack ${parsed.args.STACK} runs on ${parsed.args.NAME} (${host.address}); \`npx pulumi preview --stack ${parsed.args.STACK}\` says so`);
        return;
      }
      const project = YAML.parse(fs.readFileSync(path.join(__dirname, "..", "Pulumi.yaml"), "utf8")) as { config?: Record<string, unknown> };
      for (const line of simHostConfigLines(host, parsed.args.STACK, project.config ?? {})) console.log(line);
      return;
    }
    case "configure":
      console.log(JSON.stringify(configure(parsed.args.NAME, JSON.stringify(parsed.args.JSON))));
      return;
  }
}

main().catch((e: unknown) => {
  console.error(`simhost: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
