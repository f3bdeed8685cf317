// What the dynamic providers do, as plain async functions of plain data. Loaded by
// ../provider.ts inside the provider process (never serialized).
import { Connection, withSsh } from "./ssh";
import { preflight, ReadinessResult, removeUnit, rollout, RolloutResult, stage, Target, waitReady } from "./steps";
import { sha256 } from "../render";

export interface StagedUnitInputs {
  connection: Connection;
  label: string;
  urn: string;
  unitName: string;
  unitText: string;
  helpers: Record<string, string>;
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
    const { stagedPath } = await stage(ssh, { unitName: i.unitName, unitText: i.unitText, helpers: i.helpers });
    return { ...i, unitHash: sha256(i.unitText), stagedPath, ...facts };
  });
}

export interface RolloutInputs {
  connection: Connection;
  target: Target;
  unitHash: string;
  stagedPath: string;
  providerVersion: string;
}

export type RolloutOutputs = RolloutInputs & RolloutResult;

export async function applyRollout(i: RolloutInputs): Promise<RolloutOutputs> {
  return withSsh(i.connection, async (ssh) => ({ ...i, ...(await rollout(ssh, i.target, { stagedPath: i.stagedPath, unitHash: i.unitHash })) }));
}

export async function deleteRollout(o: RolloutOutputs): Promise<string> {
  return withSsh(o.connection, (ssh) => removeUnit(ssh, o.target.unitName, o.unitHash));
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

export async function waitReadiness(i: ReadinessInputs): Promise<ReadinessOutputs> {
  return withSsh(i.connection, async (ssh) => ({ ...i, ...(await waitReady(ssh, { ...i.target, expectedArgs: i.expectedArgs, modelName: i.modelName })) }));
}

/** Fields whose change means the host must change; everything else updates state only. */
export function changedKeys(olds: Record<string, unknown>, news: Record<string, unknown>, keys: string[]): string[] {
  return keys.filter((k) => JSON.stringify(pick(olds, k)) !== JSON.stringify(pick(news, k)));
}

function pick(o: Record<string, unknown>, dotted: string): unknown {
  return dotted.split(".").reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);
}
