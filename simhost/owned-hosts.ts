// A program that boots simulated hosts (the demo, a sweep, a benchmark) runs through
// runWithHosts, which stops every host it started when the program ends, however it ends:
// returning, failing, or on SIGINT, SIGTERM or SIGHUP, hosts still booting included. After a
// signal it exits 128 + the signal's number, as a shell reports a command a signal ended.
// SIGKILL leaves no chance to stop anything: the hosts then outlive their owner until the
// next program that starts here (or `npm run simhost -- start`, or `npm test`) reclaims them
// (reclaimOrphans in hosts.ts).
import * as os from "node:os";
import * as hostsModule from "./hosts";
import type { HostInfo, ReclaimOutcome, StartOptions } from "./hosts";

export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

/**
 * One Ctrl-C or one `timeout` reaches a script under `npm run` twice: once as a member of
 * the terminal's (or `timeout`'s) process group, once forwarded by npm, which passes SIGINT
 * and SIGTERM on to the script it runs. Deliveries of one signal this close after the last
 * one that counted are that same delivery.
 */
export const ECHO_MS = 500;

export interface OwnedHosts {
  /** Starts a host that belongs to this program; refused once the program is being stopped. */
  start(name: string, opts?: StartOptions): Promise<HostInfo>;
}

export interface ProgramOptions {
  /** The program's name for its messages: "sweep" gives "sweep failed: ...". */
  name: string;
  /**
   * What a first SIGINT does instead of stopping the program, e.g. the sweep finishes the
   * configurations in progress and writes its report; the program then ends by itself (exit
   * code 130) and its hosts are stopped. A second SIGINT, or any SIGTERM or SIGHUP, stops the
   * hosts at once and exits. Defaults to none: every signal stops the hosts and exits.
   */
  onInterrupt?: () => void;
  /** Called as an abort begins, before the hosts are stopped: cancel work in other processes. */
  onAbort?: () => void;
}

/** What runWithHosts touches outside itself; tests give it fakes. */
export interface ProgramEnvironment {
  onSignal(signal: StopSignal, handler: () => void): void;
  offSignal(signal: StopSignal, handler: () => void): void;
  hosts: {
    start(name: string, opts?: StartOptions): Promise<HostInfo>;
    stop(name: string): Promise<void>;
    reclaimOrphans(): Promise<ReclaimOutcome>;
  };
  /** Ends the process (a fake records the code). */
  exit(code: number): void;
  /** A line for the user, on stderr. */
  say(line: string): void;
  now(): number;
}

/** The real process: its signals, its exit, stderr, and the hosts of hosts.ts. */
export function processEnvironment(): ProgramEnvironment {
  // After SIGHUP the terminal is gone and writes to it fail; that must not end the process
  // before its hosts are stopped.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
  return {
    onSignal: (signal, handler) => process.on(signal, handler),
    offSignal: (signal, handler) => process.off(signal, handler),
    hosts: hostsModule,
    exit: (code) => process.exit(code),
    say: (line) => process.stderr.write(`${line}\n`),
    now: () => Date.now(),
  };
}

/**
 * Runs `program` with hosts it owns, first reclaiming hosts whose owner is gone, and ends
 * the process: with the code the program returns (0 if none), 1 if it throws (the message
 * said as "<name> failed: ..."), or 128 + the signal's number after a signal. Every host the
 * program started, or was starting, is stopped before the process ends.
 */
export async function runWithHosts(
  program: (hosts: OwnedHosts) => Promise<number | void>,
  opts: ProgramOptions,
  env: ProgramEnvironment = processEnvironment(),
): Promise<void> {
  const names = new Set<string>();
  let interrupted: StopSignal | undefined;
  let aborting: StopSignal | undefined;
  let stopped: Promise<void> | undefined;
  const counted = new Map<StopSignal, number>();
  let toldStillStopping = false;

  const stopAll = (): Promise<void> =>
    (stopped ??= Promise.all(
      [...names].map((name) =>
        env.hosts.stop(name).catch((e: unknown) => env.say(`${opts.name}: could not stop simulated host ${name}: ${(e as Error).message}; stop it with npm run simhost -- stop ${name}`)),
      ),
    ).then(() => undefined));

  const finish = (code: number) => {
    for (const signal of STOP_SIGNALS) env.offSignal(signal, handlers[signal]);
    env.exit(code);
  };

  const abort = (signal: StopSignal) => {
    aborting = interrupted = signal;
    opts.onAbort?.();
    const list = [...names];
    env.say(`\n${opts.name}: ${signal}: ${list.length ? `stopping simulated host(s) ${list.join(", ")}` : "no simulated host to stop"}, then exiting`);
    void stopAll().then(() => finish(128 + os.constants.signals[signal]));
  };

  const onSignal = (signal: StopSignal) => {
    const now = env.now();
    const last = counted.get(signal);
    if (last !== undefined && now - last < ECHO_MS) return;
    counted.set(signal, now);
    if (aborting) {
      if (!toldStillStopping) env.say(`${opts.name}: still stopping the simulated hosts; they would be left running if this process were killed now`);
      toldStillStopping = true;
      return;
    }
    if (signal === "SIGINT" && opts.onInterrupt && !interrupted) {
      interrupted = signal;
      opts.onInterrupt();
      return;
    }
    abort(signal);
  };
  const handlers = Object.fromEntries(STOP_SIGNALS.map((signal) => [signal, () => onSignal(signal)])) as Record<StopSignal, () => void>;
  for (const signal of STOP_SIGNALS) env.onSignal(signal, handlers[signal]);

  const owned: OwnedHosts = {
    async start(name, startOpts) {
      if (aborting) throw new Error(`not starting simulated host ${name}: ${opts.name} is stopping (${aborting})`);
      // Named before it boots: a signal during the boot stops it too.
      names.add(name);
      return env.hosts.start(name, startOpts);
    },
  };

  let code: number;
  try {
    await env.hosts.reclaimOrphans();
    code = (await program(owned)) ?? 0;
  } catch (e) {
    // After a signal, a failure is that signal's doing (a host stopped under a running step).
    if (!aborting) env.say(`${opts.name} failed: ${e instanceof Error ? e.message : String(e)}`);
    code = 1;
  }
  await stopAll();
  // A signal that came meanwhile ends the process itself, with its own code.
  if (aborting) return;
  finish(interrupted ? 128 + os.constants.signals[interrupted] : code);
}
