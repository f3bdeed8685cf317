// What the dynamic providers do, as plain async functions of plain data. Loaded by
// ../provider.ts inside the provider process (never serialized).
import { Connection, withSsh } from "./ssh";
import { installedHash, preflight, ReadinessResult, recordKnownGood, removeUnit, rollback, rollout, RolloutResult, stage, Target, waitReady } from "./steps";
import { holdHostLock, releaseHostLock } from "./lock";
import { progress } from "./progress";
import { sha256 } from "../render";

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
    const facts = await preflight(ssh, { python: i.python, flags: i.flags, paths: i.paths, tpSize: i.tpSize, label: i.label });
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
  providerVersion: string;
}

export type RolloutOutputs = RolloutInputs & RolloutResult;

function lockWaiter(t: Target) {
  return (holder: string, waited: number) => void progress(t.urn, `${t.label}: waiting for ${holder} to finish with this host (${waited} s of at most ${t.safety.lockWaitSeconds} s)`);
}

/** Takes the host's lock (held until readiness is done), then rolls out. */
export async function applyRollout(i: RolloutInputs): Promise<RolloutOutputs> {
  await holdHostLock(i.connection, { stack: i.target.stack, unit: i.target.unitName }, i.target.safety.lockWaitSeconds, lockWaiter(i.target));
  try {
    return await withSsh(i.connection, async (ssh) => ({ ...i, ...(await rollout(ssh, i.target, { stagedPath: i.stagedPath, unitHash: i.unitHash })) }));
  } catch (e) {
    await releaseHostLock(i.connection);
    throw e;
  }
}

/** What the host really runs: a unit edited by hand shows up as a changed unitHash (drift). */
export async function readRollout(o: RolloutOutputs): Promise<RolloutOutputs> {
  const live = await withSsh(o.connection, (ssh) => installedHash(ssh, o.target.unitName));
  return { ...o, unitHash: live ?? "not-installed" };
}

export async function deleteRollout(o: RolloutOutputs): Promise<void> {
  const message = await withSsh(o.connection, (ssh) => removeUnit(ssh, o.target.unitName, o.unitHash));
  await progress(o.target.urn, message, false);
}

export interface ReadinessInputs {
  connection: Connection;
  target: Target;
  unitHash: string;
  expectedArgs: Record<string, string | number | boolean | null>;
  modelName: string;
  providerVersion: string;
}

export type ReadinessOutputs = ReadinessInputs & ReadinessResult;

/**
 * Waits until the new configuration serves and records it as known-good; if it does
 * not, rolls back to the last known-good one and fails with both stories. Releases the
 * host's lock either way.
 */
export async function waitReadiness(i: ReadinessInputs): Promise<ReadinessOutputs> {
  await holdHostLock(i.connection, { stack: i.target.stack, unit: i.target.unitName }, i.target.safety.lockWaitSeconds, lockWaiter(i.target));
  try {
    return await withSsh(i.connection, async (ssh) => {
      let result: ReadinessResult;
      try {
        result = await waitReady(ssh, { ...i.target, expectedArgs: i.expectedArgs, modelName: i.modelName });
      } catch (e) {
        throw new Error(`${(e as Error).message}\n${await rollback(ssh, i.target, i.unitHash)}`);
      }
      await recordKnownGood(ssh, i.target.unitName, { stack: i.target.stack, unitHash: i.unitHash, expectedArgs: i.expectedArgs, modelName: i.modelName, recordedAt: new Date().toISOString() });
      return { ...i, ...result };
    });
  } finally {
    await releaseHostLock(i.connection);
  }
}

/** Fields whose change means the host must change; everything else updates state only. */
export function changedKeys(olds: Record<string, unknown>, news: Record<string, unknown>, keys: string[]): string[] {
  return keys.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
}

function pick(o: Record<string, unknown>, dotted: string): unknown {
  return dotted.split(".").reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);
}
