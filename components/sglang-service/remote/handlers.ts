// What the dynamic providers do, as plain async functions of plain data. Loaded by
// ../provider.ts inside the provider process (never serialized).
import { Connection, withSsh } from "./ssh";
import { NodeStep, installedHash, preflight, ReadinessResult, recordKnownGood, removeUnit, rollback, rollout, RolloutResult, stage, Target, waitReadyGroup } from "./steps";
import { Ssh } from "./ssh";
import { holdHostLock, releaseHostLock } from "./lock";
import { progress } from "./progress";
import { sha256 } from "../render";
import { exitWithEngine } from "./engine-watch";

exitWithEngine();

export interface StagedUnitInputs {
  connection: Connection;
  label: string;
  urn: string;
  unitName: string;
  unitText: string;
  helpers: Record<string, string>;
  secretFiles: Record<string, string>;
  python: string;
  flags: string[];
  paths: { what: string; path: string }[];
  tpSize: number;
  providerVersion: string;
}

export interface StagedUnitOutputs extends StagedUnitInputs {
  unitHash: string;
  stagedPath: string;
  gpuCount: number;
  gpuMemoryMiB: number;
}

export async function applyStagedUnit(i: StagedUnitInputs): Promise<StagedUnitOutputs> {
  return withSsh(i.connection, async (ssh) => {
    const { notes, ...facts } = await preflight(ssh, { python: i.python, flags: i.flags, paths: i.paths, tpSize: i.tpSize, label: i.label });
    for (const note of notes) await progress(i.urn, `${i.label}: note: ${note}`, false);
    const { stagedPath } = await stage(ssh, { unitName: i.unitName, unitText: i.unitText, helpers: i.helpers, secretFiles: i.secretFiles });
    return { ...i, unitHash: sha256(i.unitText), stagedPath, ...facts };
  });
}

export interface RolloutInputs {
  connection: Connection;
  target: Target;
  unitHash: string;
  stagedPath: string;
  /** Changes when a secret file changes, so a rotated key restarts the server. */
  secretsDigest: string;
  /** What the server must report once it serves this configuration. */
  expectedArgs: Record<string, string | number | boolean | null>;
  modelName: string;
  /** Further nodes of a model over several hosts (node ranks 1..), each with its staged unit. */
  workers: { connection: Connection; unitHash: string; stagedPath: string }[];
  providerVersion: string;
}

export type RolloutOutputs = RolloutInputs & RolloutResult & ReadinessResult;

/**
 * The whole reconfiguration as one transaction, under the host's lock: drain, stop, wait
 * for the old process and its GPU memory, install, start, wait until the new
 * configuration serves and stays up, record it as known-good. If the new configuration
 * does not come up, the last known-good one is restored and the update fails with both
 * stories; the resource's state then still describes the old configuration, so the next
 * `up` tries again.
 */
export async function applyRollout(i: RolloutInputs): Promise<RolloutOutputs> {
  const t = i.target;
  const members = [{ connection: i.connection, unitHash: i.unitHash, stagedPath: i.stagedPath }, ...(i.workers ?? [])];
  // Locks in a fixed order, so two groups sharing hosts cannot deadlock.
  const byKey = [...members].sort((a, b) => `${a.connection.host}:${a.connection.port}`.localeCompare(`${b.connection.host}:${b.connection.port}`));
  const sshs: Ssh[] = [];
  try {
    for (const m of byKey) {
      await holdHostLock(m.connection, { stack: t.stack, unit: t.unitName }, t.safety.lockWaitSeconds, (holder, waited) =>
        void progress(t.urn, `${t.label}: waiting for ${holder} to finish with ${m.connection.host} (${waited} s of at most ${t.safety.lockWaitSeconds} s)`),
      );
    }
    for (const m of members) sshs.push(await Ssh.open(m.connection));
    const nodes: NodeStep[] = members.map((m, rank) => ({
      ssh: sshs[rank],
      t: rank === 0 ? t : { ...t, label: `${t.label} node ${rank} (${m.connection.host})` },
      staged: { stagedPath: m.stagedPath, unitHash: m.unitHash },
    }));
    const restart = await rollout(nodes);
    if (restart.applied && t.curlAuth) {
      // What SGLang breaks and we cannot mend: say it once per restart, plainly.
      await progress(t.urn, `${t.label}: note: SGLang logs its start-up arguments, API key included, so the journal of ${t.unitName} on ${members.map((m) => m.connection.host).join(", ")} holds the key in clear (sgl-project/sglang issue #37457); whoever can read that journal (root, groups systemd-journal and adm) can read the key. See README, "Secrets".`, false);
    }
    let ready: ReadinessResult;
    try {
      ready = await waitReadyGroup(nodes, { expectedArgs: i.expectedArgs, modelName: i.modelName });
    } catch (e) {
      // Say it now: restoring the previous configuration takes a full restart.
      await progress(t.urn, `${t.label}: FAILED: ${(e as Error).message.split("\n")[0]}${t.safety.rollback ? "; rolling back" : ""}`, false);
      throw new Error(`${(e as Error).message}\n${await rollback(nodes)}`);
    }
    for (const n of nodes) {
      await recordKnownGood(n.ssh, t.unitName, { stack: t.stack, unitHash: n.staged.unitHash, expectedArgs: i.expectedArgs, modelName: i.modelName, recordedAt: new Date().toISOString() });
    }
    return { ...i, ...restart, ...ready };
  } finally {
    for (const ssh of sshs) ssh.close();
    for (const m of byKey) await releaseHostLock(m.connection);
  }
}

/** What the host really runs: a unit edited by hand shows up as a changed unitHash (drift). */
export async function readRollout(o: RolloutOutputs): Promise<RolloutOutputs> {
  const live = await withSsh(o.connection, (ssh) => installedHash(ssh, o.target.unitName));
  return { ...o, unitHash: live ?? "not-installed" };
}

export async function deleteRollout(o: RolloutOutputs): Promise<void> {
  for (const m of [{ connection: o.connection, unitHash: o.unitHash }, ...(o.workers ?? [])]) {
    const message = await withSsh(m.connection, (ssh) => removeUnit(ssh, o.target.unitName, m.unitHash));
    await progress(o.target.urn, message, false);
  }
}

/** Fields whose change means the host must change; everything else updates state only. */
export function changedKeys(olds: Record<string, unknown>, news: Record<string, unknown>, keys: string[]): string[] {
  return keys.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
}

function pick(o: Record<string, unknown>, dotted: string): unknown {
  return dotted.split(".").reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);
}
