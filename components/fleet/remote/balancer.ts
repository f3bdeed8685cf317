// The fleet's steps on its balancer and its replicas, as the dynamic providers run them
// (components/fleet/provider.ts; the readiness step's rejoin, sglang-service/remote/handlers.ts).
// A replica leaves the balancer (minHealthy checked there, then drained until HAProxy holds no
// request for it), restarts through its own staged transaction, and rejoins once proven; a
// failure rejoins it on what it serves then (its rollback's known-good configuration) before
// `up` fails, so that no replica is left out of the balancer by a failed step.
import { Connection, RunResult, Ssh, Unreachable, withSsh } from "../../sglang-service/remote/ssh";
import { progress } from "../../sglang-service/remote/progress";
import { sha256, shellQuote } from "../../sglang-service/render";
import { readLiveUnit } from "../../sglang-service/remote/observe";
import { parseServers, standing } from "../render";
import { bashCommand } from "../../sglang-service/hostScript";

/** The balancer as a replica's steps need it: where it is, and the rendered step scripts. */
export interface BalancerSteps {
  connection: Connection;
  /** HAProxy's name for this replica. */
  server: string;
  /** host/balancer-step.sh rendered for `leave` and `join` of this replica (components/fleet/render.ts). */
  leave: string;
  join: string;
  /** The rejoin after a failed step: the same, but its mark does not claim the new configuration. */
  joinBack?: string;
  /** The longest each may take, seconds (its own wait plus the host commands' bounds). */
  leaveSeconds: number;
  joinSeconds: number;
  /** host/balancer-step.sh rendered for `show` (reads only), and the longest it may take. */
  show: string;
  showSeconds: number;
  /** Every replica of the fleet, in replica order (host first), with what it should run: for the account a failure gives. */
  peers: { server: string; connection: Connection; unitName: string; unitHash: string }[];
}

/**
 * What each replica runs now and how it stands in the balancer, a line each: read after a
 * failure, so that `up` says which replicas run the new configuration, which one rolled back,
 * and which were not touched. A replica that cannot be read says so; this never throws.
 */
export async function fleetAccount(b: BalancerSteps): Promise<string> {
  const shown = await step(b, b.show, b.showSeconds).catch(() => undefined);
  const servers = shown ? parseServers(shown.stdout) : undefined;
  const lines = await Promise.all(
    b.peers.map(async (p) => {
      const where = `${p.server} (${p.connection.host})`;
      const inLb = servers === undefined ? "its place in the balancer unknown" : `${standing(servers?.find((s) => s.server === p.server))} in the balancer`;
      try {
        const v = await readLiveUnit(p.connection, p.unitName);
        const gen = v.generation !== undefined ? `generation ${v.generation}` : "a configuration of an earlier version";
        const runs = v.live === null ? "no unit installed" : sha256(v.live) === p.unitHash ? `the new configuration (${gen})` : `its previous configuration (${gen}; known-good ${v.knownGood ?? "none"})`;
        return `  - ${where}: ${runs}, ${v.state ?? "state unknown"}, ${inLb}`;
      } catch (e) {
        return `  - ${where}: cannot be read (${(e as Error).message.split("\n")[0]}), ${inLb}`;
      }
    }),
  );
  return `The fleet now:\n${lines.join("\n")}`;
}

const failureLines = (r: RunResult) =>
  `${r.stdout}${r.stderr}`
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("@@"))
    .join("\n");

/** Runs one step script on the balancer, bounded; its result. */
async function step(b: BalancerSteps, script: string, seconds: number): Promise<RunResult> {
  return Ssh.once(b.connection, script, Math.ceil(seconds * 1000));
}

/**
 * The replicas this provider process took out of the balancer and has not put back (one
 * process serves every dynamic resource of an \`up\`): readiness, which follows a replica's
 * restart in the same \`up\`, finds it still out and does not leave again (an SSH login, the
 * lock and a reading saved per replica). Kept on globalThis: the restart's provider and the
 * readiness handlers load this module each on their own.
 */
const outOfBalancer = ((globalThis as { __dflashOutOfBalancer?: Set<string> }).__dflashOutOfBalancer ??= new Set<string>());
const outKey = (b: BalancerSteps) => `${b.connection.host}:${b.connection.port}/${b.server}`;

/** Takes the replica out of the balancer unless this \`up\` already did (its restart) and has not put it back since; the line to report. */
export async function leaveUnlessOut(b: BalancerSteps, label: string, urn?: string): Promise<string> {
  if (!outOfBalancer.has(outKey(b))) return leaveBalancer(b, label, urn);
  const line = `${b.server} is still out of the balancer since its restart`;
  await progress(urn, `${label}: ${line}`, false);
  return line;
}

/** Takes the replica out of the balancer and drains it there (host/balancer-step.sh leave, as fleet.drainPolicy says); throws (nothing changed) where minHealthy forbids it. */
export async function leaveBalancer(b: BalancerSteps, label: string, urn?: string): Promise<string> {
  await progress(urn, `${label}: taking ${b.server} out of the balancer (HAProxy on ${b.connection.host}), and draining it there`);
  const r = await step(b, b.leave, b.leaveSeconds);
  const halted = /^@@halted (\S+) (\d+) open=(\S+)$/m.exec(r.stdout);
  if (r.code === 9 && halted) {
    throw new Error(
      `${label}: the rollout halted at ${b.server}: ${halted[3]} request(s) through HAProxy were still open after ${halted[2]} s (timeouts.drainSeconds), and fleet.drainPolicy is "halt": ${b.server} is back in the balancer as it was, nothing was restarted there or after it, and nothing was cut.\n` +
        `${await fleetAccount(b)}\nRun \`pulumi up\` again when those requests have ended (it resumes from the replicas that do not run the new configuration), raise timeouts.drainSeconds, or set fleet.drainPolicy to "cut" to move on and cut them.`,
    );
  }
  if (r.code !== 0) throw new Error(`${label}: ${failureLines(r) || `the balancer step ended with exit ${r.code}`}`);
  const held = /^@@held (\S+) (\S+)/m.exec(r.stdout);
  const left = /^@@left (\S+) (\d+)(?: open=(\S+)| draining=(\d+))?$/m.exec(r.stdout);
  if (!held) outOfBalancer.add(outKey(b));
  // fleet.drainPolicy "cut": what HAProxy still had open when it queued nothing more for the replica ends in the server's own drain.
  const draining = left?.[4] !== undefined && left[4] !== "0" ? `${left[4]} request(s) through HAProxy still run there and end in its server's own drain (up to timeouts.drainSeconds, then the restart cuts them, counted in its timings.requestsCut)` : undefined;
  const line = held
    ? `${b.server} is held out of the balancer by an operator (${held[2]}): left as it is (fleet.loadBalancer.operatorStates "keep"); ${left?.[3] ? `${left[3]} request(s) through HAProxy were still open after ${left[2]} s` : (draining ?? "HAProxy holds no request for it")}`
    : left?.[3]
    ? `${b.server} left the balancer; ${left[3]} request(s) through HAProxy were still open after ${left[2]} s (timeouts.drainSeconds): moving on (fleet.drainPolicy "cut"); the server's own drain gives them up to timeouts.drainSeconds more, then the restart cuts them (counted in its timings.requestsCut)`
    : draining
    ? `${b.server} left the balancer: HAProxy sends it no new request (${left?.[2] ?? "?"} s); ${draining}`
    : `${b.server} left the balancer; HAProxy holds no request for it (${left?.[2] ?? "?"} s)`;
  await progress(urn, `${label}: ${line}`, false);
  return line;
}

/** Puts the replica back and waits until its health check passes; the line to report, or throws with what HAProxy sees. */
export async function joinBalancer(b: BalancerSteps, label: string, urn?: string, afterFailure = false): Promise<string> {
  await progress(urn, `${label}: putting ${b.server} back into the balancer, waiting for its health check (a generation) to pass`);
  outOfBalancer.delete(outKey(b));
  const r = await step(b, afterFailure ? (b.joinBack ?? b.join) : b.join, b.joinSeconds);
  if (r.code !== 0) throw new Error(`${label}: ${failureLines(r) || `the balancer step ended with exit ${r.code}`}`);
  const joined = /^@@joined (\S+) (\d+)$/m.exec(r.stdout);
  const held = /^@@held (\S+) (\S+)/m.exec(r.stdout);
  const line = held
    ? `${b.server} stays out of the balancer: an operator holds it (${held[2]}; fleet.loadBalancer.operatorStates "keep")`
    : `${b.server} is back in the balancer and serving (its health check passed after ${joined?.[2] ?? "?"} s)`;
  await progress(urn, `${label}: ${line}`, false);
  return line;
}

/**
 * Runs `work` (the replica's restart, or its readiness proof); whether it succeeds or fails,
 * the replica is put back into the balancer afterwards, and a failure to rejoin is part of
 * what `up` says. `rejoinOnSuccess` false: only a failure rejoins (the restart's success is
 * followed by readiness, which rejoins).
 */
export async function rejoinAfter<T>(b: BalancerSteps, label: string, urn: string | undefined, work: () => Promise<T>, rejoinOnSuccess = true): Promise<T> {
  let result: T;
  try {
    result = await work();
  } catch (e) {
    const why = (e as Error).message;
    const back = await joinBalancer(b, label, urn, true).then(
      (line) => `${line}, on what it runs after the failure above (its known-good configuration where it rolled back)`,
      (j: Error) => `${b.server} could not rejoin: ${j.message}`,
    );
    throw new Error(`${why}\n${label}: ${back}. The rollout stopped here: no replica after it in the order leaves the balancer.\n${await fleetAccount(b)}\nFix the configuration and run \`pulumi up\` again: it resumes from the replicas that do not run it.`);
  }
  if (rejoinOnSuccess) await joinBalancer(b, label, urn);
  return result;
}

/** Inputs of a replica's restart in a fleet (provider.ts ReplicaRestart). */
export interface ReplicaRestartInputs {
  connection: Connection;
  unitHash: string;
  /** The staged transaction script on the replica. */
  transaction: string;
  /** The restart's stdin (the secret files, script.ts secretFileOrder). */
  secretStdin: string;
  balancer: BalancerSteps;
  /** How the replica stood in the balancer when the program read it (render.ts standing). */
  standing: string;
  /** Whether `up` must take it out and put it back whatever else changed (render.ts mustRejoin). */
  rejoin: boolean;
  /** Longest the transaction may take, seconds (script.ts groupFinishSeconds). */
  finishSeconds: number;
  label: string;
  urn?: string;
  providerVersion: string;
}

export type ReplicaRestartOutputs = ReplicaRestartInputs & { stdout: string };

/**
 * Leaves the balancer, then runs the replica's transaction (`restart UNITHASH`, the secrets on
 * its stdin) as the single-host restart command does. Its stdout is what readiness reads; it
 * starts with a line naming this leave, so that readiness runs (and rejoins) after every leave,
 * even when the transaction had nothing to restart.
 */
export async function applyReplicaRestart(i: ReplicaRestartInputs): Promise<ReplicaRestartOutputs> {
  const left = await leaveBalancer(i.balancer, i.label, i.urn);
  const r = await rejoinAfter(
    i.balancer,
    i.label,
    i.urn,
    async () => {
      await progress(i.urn, `${i.label}: restarting (drain, stop, GPU release, start) out of the balancer`);
      const run = await withSsh(i.connection, (ssh) => ssh.run(`bash ${shellQuote(i.transaction)} restart ${shellQuote(i.unitHash)}`, { input: i.secretStdin, timeoutMs: Math.ceil(i.finishSeconds * 1000) }));
      if (run.code !== 0) throw new Error(`${i.label}: the restart failed (exit ${run.code}):\n${`${run.stdout}${run.stderr}`.trim()}`);
      return run;
    },
    false,
  );
  return { ...i, stdout: `@@balancer ${new Date().toISOString()} ${left}\n${r.stdout}` };
}

/** Inputs of this stack's HAProxy on the balancer host (provider.ts BalancerConfig). */
export interface BalancerConfigInputs {
  connection: Connection;
  /** host/balancer.sh rendered (render.ts renderBalancerScript), and the longest it may take. */
  script: string;
  scriptSeconds: number;
  /** host/balancer-remove.sh rendered (render.ts renderBalancerRemoval), run on delete. */
  removal: string;
  removalSeconds: number;
  /** "in place", or how the host differs from what this stack last applied (fleet.ts). */
  observed: string;
  label: string;
  urn?: string;
  providerVersion: string;
}

export type BalancerConfigOutputs = BalancerConfigInputs & { result: string };

/** Configures, starts or reloads this stack's HAProxy, checked (host/balancer.sh); throws with what the host said. */
export async function applyBalancerConfig(i: BalancerConfigInputs): Promise<BalancerConfigOutputs> {
  await progress(i.urn, `${i.label}: ${i.observed === "in place" ? "configuring" : `repairing (${i.observed})`} this stack's HAProxy on ${i.connection.host}`);
  const r = await Ssh.once(i.connection, bashCommand(i.script), Math.ceil(i.scriptSeconds * 1000));
  if (r.code !== 0) throw new Error(`${i.label}: the balancer host ${i.connection.host}: ${failureLines(r) || `its configuration step ended with exit ${r.code}`}`);
  const result = /^@@balancer (.*)$/m.exec(r.stdout)?.[1] ?? "?";
  const migrated = /^@@migrated (\S+) (\d+)( cut)?$/m.exec(r.stdout);
  if (migrated) await progress(i.urn, `${i.label}: took over from ${migrated[1]}, which ran the configuration an earlier version wrote: stopped it after its requests ended (${migrated[2]} s${migrated[3] ? ", some cut at timeouts.drainSeconds" : ""}) and disabled it`, false);
  await progress(i.urn, `${i.label}: HAProxy ${result}, running this configuration and listening`, false);
  return { ...i, observed: "in place", result };
}

/** Removes this stack's HAProxy from the balancer host, and nothing else (host/balancer-remove.sh). */
export async function removeBalancerConfig(i: BalancerConfigInputs): Promise<void> {
  await progress(i.urn, `${i.label}: removing this stack's HAProxy from ${i.connection.host} (its requests finish first)`);
  const r = await Ssh.once(i.connection, bashCommand(i.removal), Math.ceil(i.removalSeconds * 1000));
  if (r.code !== 0) throw new Error(`${i.label}: removing this stack's HAProxy from ${i.connection.host}: ${failureLines(r) || `exit ${r.code}`}`);
}

/** Inputs of HAProxy's agent check on one replica (provider.ts ReplicaAgent). */
export interface ReplicaAgentInputs {
  connection: Connection;
  /** host/agent-install.sh rendered for this replica, and host/agent-remove.sh (render.ts). */
  install: string;
  removal: string;
  label: string;
  urn?: string;
  providerVersion: string;
}

export type ReplicaAgentOutputs = ReplicaAgentInputs & { answer: string };

/** Installs or updates the agent check on the replica (host/agent-install.sh); its first answer. */
export async function applyReplicaAgent(i: ReplicaAgentInputs): Promise<ReplicaAgentOutputs> {
  await progress(i.urn, `${i.label}: installing HAProxy's agent check (a generation judged every check) on ${i.connection.host}`);
  const r = await Ssh.once(i.connection, bashCommand(i.install), 120_000);
  if (r.code !== 0) throw new Error(`${i.label}: HAProxy's agent check on ${i.connection.host}: ${failureLines(r) || `its installation ended with exit ${r.code}`}`);
  const answer = /^@@agent (.*)$/m.exec(r.stdout)?.[1] ?? "?";
  await progress(i.urn, `${i.label}: the agent check on ${i.connection.host} answers "${answer}"`, false);
  return { ...i, answer };
}

/** Removes the agent check from the replica; a replica that cannot be reached at all (down) is named, not waited for. */
export async function removeReplicaAgent(i: ReplicaAgentInputs): Promise<void> {
  const r = await Ssh.once(i.connection, bashCommand(i.removal), 120_000).catch((e: Error) => (e instanceof Unreachable ? e : Promise.reject(e)));
  if (r instanceof Unreachable) {
    await progress(i.urn, `${i.label}: HAProxy's agent check on ${i.connection.host} was not removed (${r.message}); it answers nobody once the replica is out of the balancer. When the host is back: \`systemctl disable --now\` the dflash-agent socket of this stack there.`, false);
    return;
  }
  if (r.code !== 0) throw new Error(`${i.label}: removing HAProxy's agent check from ${i.connection.host}: ${failureLines(r) || `exit ${r.code}`}`);
}
