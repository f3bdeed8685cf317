// Every bound a stack file (and so a pull request) can set has a ceiling in the schema, named
// in its message: a duration, a count or a size from which a wait, a loop or a resource use
// derives. The numbers and lists are walked from the schemas themselves, so a setting added
// later without a ceiling fails here. Then the waits derived from several settings at once,
// each at its ceiling, are pinned: bounded, and far below what Node's timers can count.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { z } from "zod";
import { ConfigError, deploymentSchema, MAX_FLEET_REPLICAS, MAX_FURTHER_NODES, parseDeployment, type Deployment } from "../../../components/sglang-service/schema";
import { verdictSchema } from "../../../components/verdict/schema";
import { MAX_CONTEXT_TOKENS } from "../../../components/sglang-service/values";
import { groupFinishSeconds, groupPrepareSeconds, transactionBoundSeconds, transactionInput } from "../../../components/sglang-service/script";
import { startTimeoutSeconds, stopTimeoutSeconds } from "../../../components/sglang-service/render";
import { stepBounds } from "../../../components/fleet/fleet";
import { replicasOf } from "../../../components/fleet/render";
import { projectConfig, withTestAddress } from "./stackConfig";

type Raw = Record<string, any>;

const DDTREE = { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048, compactCache: true };

/** Lists whose length bounds no wait, loop or size worth a ceiling, and why. */
const UNCOUNTED_LISTS: Record<string, string> = {
  "model.extraArgs": "command-line words of the unit, checked once each against --help",
  "sglangBuild.flags.algorithms": "names the build accepts, compared once",
};

interface Bounded {
  /** The path in the configuration ("timeouts.drainSeconds", "nodes.0.port"). */
  path: string[];
  kind: "number" | "list";
  /** The ceiling (a value, or a list's most entries), undefined where there is none. */
  max: number | undefined;
  /** Whether the ceiling itself is valid (`.max`), or only values below it (`.lt`). */
  inclusive: boolean;
  schema: z.ZodType;
}

function checksOf(schema: z.ZodType): { check: string; value?: number; maximum?: number; inclusive?: boolean }[] {
  return ((schema.def as { checks?: { _zod: { def: unknown } }[] }).checks ?? []).map((c) => c._zod.def as { check: string });
}

/** Every number and every list under `schema`, with its ceiling. */
function bounded(schema: z.ZodType, path: string[]): Bounded[] {
  const def = schema.def as unknown as { type: string; innerType: z.ZodType; element: z.ZodType; valueType: z.ZodType; options: z.ZodType[]; shape: Record<string, z.ZodType> };
  switch (def.type) {
    case "default":
    case "optional":
    case "nullable":
      return bounded(def.innerType, path);
    case "object":
      return Object.entries(def.shape).flatMap(([key, child]) => bounded(child, [...path, key]));
    case "union":
      return def.options.flatMap((o) => bounded(o, path));
    case "record":
      return bounded(def.valueType, [...path, "SOME_NAME"]);
    case "array": {
      const max = checksOf(schema).find((c) => c.check === "max_length")?.maximum;
      return [{ path, kind: "list", max, inclusive: true, schema }, ...bounded(def.element, [...path, "0"])];
    }
    case "number": {
      const lt = checksOf(schema).find((c) => c.check === "less_than");
      return [{ path, kind: "number", max: lt?.value, inclusive: lt?.inclusive ?? false, schema }];
    }
    default:
      return [];
  }
}

const DEPLOYMENT = bounded(deploymentSchema, []);
const VERDICT = bounded(verdictSchema, ["verdict"]);
const key = (b: Bounded) => b.path.join(".");

test("every number of the configuration has a ceiling, and every list that counts something a most entries", () => {
  const all = [...DEPLOYMENT, ...VERDICT];
  assert.ok(all.filter((b) => b.kind === "number").length >= 40, `the walk found only ${all.length} numbers and lists`);
  const unbounded = all.filter((b) => b.max === undefined && !(b.kind === "list" && key(b) in UNCOUNTED_LISTS)).map(key);
  assert.deepEqual(unbounded, [], "settings without a ceiling: give each one in the schema (values.ts wholeNumber, seconds, listOf's max), named in its message");
  // Finite, and a duration's ceiling at most a day: no setting alone may hold a runner for weeks.
  for (const b of all) {
    if (b.max === undefined) continue;
    assert.ok(Number.isFinite(b.max), key(b));
    if (/Seconds$/.test(b.path.at(-1)!)) assert.ok(b.max <= 86400, `${key(b)}: ${b.max} s is more than a day`);
  }
});

/** The project's config with a usable host and nodes, and (for a fleet key) a valid fleet. */
function validRaw(path: string[]): Raw {
  const raw: Raw = withTestAddress({ ...projectConfig(), speculative: DDTREE });
  if (path[0] === "nodes") raw.nodes = [{ ...structuredClone(raw.host), address: "127.0.0.11" }];
  if (path[0] === "fleet") {
    const at = (address: string) => ({ address, hostKey: raw.host.hostKey });
    raw.fleet = { replicas: [at("127.0.0.12")], loadBalancer: { host: at("127.0.0.13") } };
  }
  if (path[0] === "sglangBuild") raw.sglangBuild = { flags: {} };
  return raw;
}

/** `raw` with `value` at `path` (the containers on the way made). */
function withValueAt(raw: Raw, path: string[], value: unknown): Raw {
  let at: Raw = raw;
  for (const [i, k] of path.slice(0, -1).entries()) {
    at[k] ??= path[i + 1] === "0" ? [] : {};
    at = at[k];
  }
  at[path[path.length - 1]] = value;
  return raw;
}

/** The problem lines of parseDeployment ("  - dflash-sglang:<key>: <message>"), [] where it parses. */
function problems(raw: Raw): string[] {
  try {
    parseDeployment(raw, "ceilings");
    return [];
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.message.split("\n").filter((l) => l.startsWith("  - "));
  }
}

/** The messages of the issues at `path` when `schema` parses `raw`. */
function messagesAt(schema: z.ZodType, raw: unknown, path: string[]): string[] {
  const r = schema.safeParse(raw);
  return r.success ? [] : r.error.issues.filter((i) => i.path.join(".") === path.join(".")).map((i) => i.message);
}

/** A value just past the ceiling: one more, or a little more for a fraction's. */
const past = (b: Bounded) => b.max! + (b.max! >= 2 ? 1 : 0.5);
/** A list of `n` entries valid for `b`'s element (a valid default's first, repeated, or fresh hosts). */
function entries(b: Bounded, n: number): unknown[] {
  if (key(b) === "nodes" || key(b) === "fleet.replicas") return Array.from({ length: n }, (_, k) => ({ address: `10.1.${k >> 8}.${k & 255}`, hostKey: (validRaw([]).host as Raw).hostKey }));
  return Array.from({ length: n }, () => (key(b) === "benchmark.concurrency" ? 4 : key(b) === "benchmark.longContextTokens" ? 8192 : "x"));
}

test("each ceiling is accepted, and a value past it (or 1e9) is refused naming the key and the ceiling", () => {
  for (const b of DEPLOYMENT.filter((x) => x.max !== undefined)) {
    const where = key(b);
    const named = b.path.filter((p) => p !== "0").at(-1)!;
    // Accepted: the key's own schema takes its ceiling (or a value just under an exclusive one).
    const top = b.kind === "list" ? entries(b, b.max!) : b.inclusive ? b.max! : b.max! * 0.999;
    assert.ok(b.schema.safeParse(top).success, `${where}: its ceiling ${b.max} is refused`);
    const tooMuch = b.kind === "list" ? [entries(b, b.max! + 1)] : [past(b), 1e9];
    for (const value of tooMuch) {
      const lines = problems(withValueAt(validRaw(b.path), b.path, value)).filter((l) => l.startsWith(`  - dflash-sglang:${where}: `));
      const what = `${where} = ${b.kind === "list" ? `${b.max! + 1} entries` : value}`;
      assert.ok(lines.length > 0, `${what}: refused at the key`);
      const message = lines[0].slice(lines[0].indexOf(": ") + 2);
      assert.ok(message.includes(named), `${what}: the message names ${named}: ${message}`);
      assert.ok(message.includes(String(b.max)), `${what}: the message names the ceiling ${b.max}: ${message}`);
    }
  }
  for (const b of VERDICT) {
    const setting = b.path.at(-1)!;
    assert.ok(b.schema.safeParse(b.inclusive ? b.max! : b.max! * 0.999).success, `${key(b)}: its ceiling is refused`);
    for (const value of [past(b), 1e9]) {
      const [message] = messagesAt(verdictSchema, { [setting]: value }, [setting]);
      assert.ok(message?.includes(key(b)) && message.includes(String(b.max)), `${key(b)} = ${value}: ${message}`);
    }
  }
});

test("the ceilings' messages, word for word; the issue's commandSeconds: 1000000 beside a balancer host is refused", () => {
  const line = (path: string, value: unknown) => problems(withValueAt(validRaw(path.split(".")), path.split("."), value));
  const fleetRaw = withValueAt(validRaw(["fleet"]), ["timeouts"], { commandSeconds: 1_000_000 });
  assert.deepEqual(problems(fleetRaw), ["  - dflash-sglang:timeouts.commandSeconds: timeouts.commandSeconds must be a positive number of seconds, at most 120 (2 min)"]);
  assert.deepEqual(line("timeouts.drainSeconds", 3601), ["  - dflash-sglang:timeouts.drainSeconds: timeouts.drainSeconds must be a positive number of seconds, at most 3600 (1 h)"]);
  assert.deepEqual(line("timeouts.readySeconds", 1e9), ["  - dflash-sglang:timeouts.readySeconds: timeouts.readySeconds must be a positive number of seconds, at most 7200 (2 h)"]);
  assert.deepEqual(line("safety.lockWaitSeconds", 14401), ["  - dflash-sglang:safety.lockWaitSeconds: safety.lockWaitSeconds must be a positive number of seconds, at most 14400 (4 h)"]);
  assert.deepEqual(line("safety.stableSeconds", 3601), ["  - dflash-sglang:safety.stableSeconds: safety.stableSeconds must be a number of seconds from 0 to 3600 (1 h)"]);
  assert.deepEqual(line("timeouts.gpuFreeMiB", 524289), ["  - dflash-sglang:timeouts.gpuFreeMiB: timeouts.gpuFreeMiB must be a whole number from 0 to 524288 (512 GiB)"]);
  assert.deepEqual(line("benchmark.timeoutSeconds", 14401), ["  - dflash-sglang:benchmark.timeoutSeconds: benchmark.timeoutSeconds must be a positive number of seconds, at most 14400 (4 h)"]);
  assert.deepEqual(line("fleet.loadBalancer.joinSeconds", 1801), ["  - dflash-sglang:fleet.loadBalancer.joinSeconds: fleet.loadBalancer.joinSeconds must be a positive number of seconds, at most 1800 (30 min)"]);
  assert.deepEqual(line("benchmark.concurrency", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]), [
    "  - dflash-sglang:benchmark.concurrency: benchmark.concurrency must be a list of whole numbers from 1 to 1024, e.g. [1, 4, 16], at most 16 of them",
  ]);
  assert.deepEqual(line("model.contextLength", MAX_CONTEXT_TOKENS + 1), ["  - dflash-sglang:model.contextLength: model.contextLength must be a whole number from 1 to 10000000"]);
  assert.deepEqual(messagesAt(verdictSchema, { maxAgeDays: 366 }, ["maxAgeDays"]), ["verdict.maxAgeDays must be a positive number of days, at most 365"]);
  assert.equal(MAX_FURTHER_NODES, 63);
  assert.equal(MAX_FLEET_REPLICAS, 64);
});

/** Every default wrapper under `schema`, with its path and the schema it wraps. */
function defaults(schema: z.ZodType, path: string[]): { path: string; inner: z.ZodType; value: unknown }[] {
  const def = schema.def as unknown as { type: string; innerType: z.ZodType; element: z.ZodType; options: z.ZodType[]; shape: Record<string, z.ZodType>; defaultValue: unknown };
  switch (def.type) {
    case "default":
      return [{ path: path.join("."), inner: def.innerType, value: def.defaultValue }, ...defaults(def.innerType, path)];
    case "optional":
    case "nullable":
      return defaults(def.innerType, path);
    case "object":
      return Object.entries(def.shape).flatMap(([k, child]) => defaults(child, [...path, k]));
    case "array":
      return defaults(def.element, [...path, "0"]);
    case "union":
      return def.options.flatMap((o) => defaults(o, path));
    default:
      return [];
  }
}

test("every default is within its ceiling (zod does not check a default itself)", () => {
  const all = [...defaults(deploymentSchema, []), ...defaults(verdictSchema, ["verdict"])];
  assert.ok(all.length > 40, `only ${all.length} defaults found`);
  for (const d of all) assert.ok(d.inner.safeParse(d.value).success, `${d.path}: its default ${JSON.stringify(d.value)} is refused by its own schema`);
});

/** A deployment with every duration, and the fleet, at its ceiling. */
function atCeilings(): Deployment {
  const raw = validRaw(["fleet"]);
  const ceiling = (path: string) => DEPLOYMENT.find((b) => key(b) === path)!.max!;
  const timeouts = ["drainSeconds", "stopSeconds", "gpuReleaseSeconds", "readySeconds", "commandSeconds", "helpSeconds", "rebootSeconds"];
  raw.timeouts = Object.fromEntries(timeouts.map((k) => [k, ceiling(`timeouts.${k}`)]));
  raw.safety = { lockWaitSeconds: ceiling("safety.lockWaitSeconds"), stableSeconds: ceiling("safety.stableSeconds") };
  raw.benchmark = { timeoutSeconds: ceiling("benchmark.timeoutSeconds") };
  raw.fleet.replicas = entries(DEPLOYMENT.find((b) => key(b) === "fleet.replicas")!, MAX_FLEET_REPLICAS - 1);
  raw.fleet.loadBalancer.joinSeconds = ceiling("fleet.loadBalancer.joinSeconds");
  return parseDeployment(raw, "ceilings");
}

test("the waits derived from several settings, each at its ceiling: bounded (the worst restart is 11.9 h)", () => {
  const d = atCeilings();
  const x = transactionInput(d, "ceilings", "ceilings", 0, d.host.address, { apiKey: false, hfToken: false });
  const group = { ...d, nodes: [d.host] };
  const derived = {
    // systemd's TimeoutStartSec and TimeoutStopSec of the unit
    start: startTimeoutSeconds(d.timeouts),
    stop: stopTimeoutSeconds(d.timeouts),
    // a restart's host step (lock, two drains and stops, GPU waits, a rollback's start, 60 commands)
    transaction: transactionBoundSeconds(x),
    prove: x.proveSeconds,
    groupHandover: transactionInput(group, "ceilings", "ceilings", 0, d.host.address, { apiKey: false, hfToken: false }).handoverSeconds,
    groupPrepare: groupPrepareSeconds(d.safety.lockWaitSeconds),
    groupFinish: groupFinishSeconds(d.timeouts),
    // the fleet's balancer steps with 64 replicas; `show` runs in preview, on the review's runner
    ...Object.fromEntries(Object.entries(stepBounds(d, replicasOf(d).length)).map(([k, v]) => [`balancer ${k}`, v])),
    // the benchmark's hold on the host's lock
    benchmarkHold: d.safety.lockWaitSeconds + d.benchmark.timeoutSeconds + 120,
  };
  assert.deepEqual(derived, {
    start: 9090,
    stop: 3615,
    transaction: 42720,
    prove: 12720,
    groupHandover: 20535,
    groupPrepare: 14460,
    groupFinish: 10290,
    "balancer show": 1006,
    "balancer leave": 12292,
    "balancer rejoin": 2562,
    // Its own (and, taking over from an earlier version's HAProxy, that one's gentle stop, timeouts.drainSeconds).
    "balancer configure": 5582,
    "balancer remove": 4362,
    benchmarkHold: 28920,
  });
  // Node's timers fire at once past 2^31-1 ms (24.8 days): every bound stays far below.
  for (const [k, v] of Object.entries(derived)) assert.ok(v * 1000 < 2 ** 31 - 1 && v <= 12 * 3600, `${k}: ${v} s`);
});
