// The fault campaign's plan (bench/campaign/plan.ts), pure: same seed, same sequence; every
// step kind and fault kind is drawn; the model allows what a failed `up` may leave.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { allowedAfter, CLOCK_STEPS, DRAWN_LOCALES, FAULTS, FOREIGN_LOCK_HOLDERS, READ_ONLY_DIRS, fillWeights, formatWeights, mix, onlyWeights, parseWeights, planCampaignSequence, planSequence, REBOOT_FAULTS, REBOOT_PHASES, shorter, TIMED_FAULTS } from "../../bench/campaign/plan";
import { describe as describeStep, outcomeCounts, phaseOf } from "../../bench/campaign/runner";

test("a plan is a function of its seed and index; other seeds give other plans", () => {
  assert.deepEqual(planSequence(7, 3, 12), planSequence(7, 3, 12));
  assert.notDeepEqual(planSequence(7, 3, 12), planSequence(8, 3, 12));
  assert.notDeepEqual(planSequence(7, 3, 12), planSequence(7, 4, 12));
  assert.equal(planSequence(7, 3, 12).length, 12);
});

test("over many sequences every operation, key change and fault kind is drawn", () => {
  const steps = Array.from({ length: 50 }, (_, i) => planSequence(1, i, 10)).flat();
  assert.deepEqual(new Set(steps.map((s) => s.op)), new Set(["up", "preview", "refresh", "destroy"]));
  const ups = steps.filter((s) => s.op === "up");
  assert.deepEqual(new Set(ups.map((s) => s.fault)), new Set(FAULTS));
  assert.deepEqual(new Set(ups.map((s) => s.key)), new Set(["keep", "set", "rotate", "remove"]));
  assert.deepEqual(new Set(ups.map((s) => s.op === "up" && s.token).filter(Boolean)), new Set(["set", "rotate", "remove"]));
  for (const change of ["rename", "badFlag", "badTp", "otherPort", "servicePort", "proceed", "previewFirst"] as const) assert.ok(ups.some((u) => u.op === "up" && u[change]), change);
  const destroys = steps.filter((s) => s.op === "destroy");
  assert.deepEqual(new Set(destroys.map((s) => s.fault ?? "none")), new Set(["none", ...TIMED_FAULTS]));
  // A timed fault has its moment, within the first 30 s; a reboot its phase; no other step has either.
  for (const s of [...ups, ...destroys]) {
    const timed = (TIMED_FAULTS as readonly string[]).includes(s.fault ?? "none");
    assert.equal("atSeconds" in s, timed, JSON.stringify(s));
    if (timed) assert.ok(s.atSeconds! >= 0 && s.atSeconds! <= 30, JSON.stringify(s));
    assert.equal("rebootAt" in s, (REBOOT_FAULTS as readonly string[]).includes(s.fault ?? "none"), JSON.stringify(s));
    assert.equal("lockHolder" in s, s.fault === "foreign-lock", JSON.stringify(s));
  }
  const more = Array.from({ length: 200 }, (_, i) => planSequence(1, i, 10)).flat();
  assert.deepEqual(new Set(more.filter((u) => u.op === "up" && u.fault === "foreign-lock").map((u) => u.op === "up" && u.lockHolder)), new Set(FOREIGN_LOCK_HOLDERS), "both holders of a foreign lock");
  for (const kind of REBOOT_FAULTS) {
    assert.deepEqual(new Set(more.filter((u) => u.op === "up" && u.fault === kind).map((u) => u.op === "up" && u.rebootAt)), new Set(REBOOT_PHASES), `${kind} lands in every phase`);
  }
});

test("requests are reported by outcome", () => {
  assert.equal(outcomeCounts(["completed", "cut", "completed", "refused"]), "2 completed, 1 refused, 1 cut");
  assert.equal(outcomeCounts([]), "");
});

test("a reboot fault says the phase it lands in, a foreign lock its holder", () => {
  const up = { op: "up" as const, stack: "a" as const, config: "b8t4-w2048" as const, key: "keep" as const };
  assert.equal(describeStep({ ...up, fault: "power-cut", rebootAt: "drain" }), "up a -> b8t4-w2048, key keep, fault power-cut in drain");
  assert.equal(describeStep({ ...up, fault: "foreign-lock", lockHolder: "nobody" }), "up a -> b8t4-w2048, key keep, fault foreign-lock by nobody");
  assert.equal(describeStep({ ...up, fault: "reboot-clean", rebootAt: "loading", atOutput: "x" }), "up a -> b8t4-w2048, key keep, fault reboot-clean at /x/", "a regression case's own line");
});

test("hosts and operators as teams have them (issue 60): each kind carries what it draws, and every value of it is drawn", () => {
  const ups = Array.from({ length: 200 }, (_, i) => planSequence(9, i, 4, onlyWeights("read-only-path,locale,clock-step,killed-rollback,racing-operators"), true))
    .flat()
    .flatMap((s) => (s.op === "up" ? [s] : []));
  const of = (kind: string) => ups.filter((u) => u.fault === kind);
  assert.deepEqual(new Set(of("read-only-path").map((u) => u.readOnly)), new Set(READ_ONLY_DIRS));
  assert.deepEqual(new Set(of("locale").map((u) => u.locale)), new Set(DRAWN_LOCALES));
  assert.deepEqual(new Set(of("clock-step").map((u) => u.clockStep)), new Set(CLOCK_STEPS));
  for (const kind of ["clock-step", "racing-operators"]) assert.deepEqual(new Set(of(kind).map((u) => u.phaseAt)), new Set(REBOOT_PHASES), kind);
  for (const u of ups) {
    assert.equal("readOnly" in u, u.fault === "read-only-path", JSON.stringify(u));
    assert.equal("locale" in u, u.fault === "locale", JSON.stringify(u));
    assert.equal("phaseAt" in u, u.fault === "clock-step" || u.fault === "racing-operators", JSON.stringify(u));
    assert.equal("rebootAt" in u, false, JSON.stringify(u));
  }
  assert.ok(of("killed-rollback").length > 0);
  const up = { op: "up" as const, stack: "a" as const, config: "b8t4-w2048" as const, key: "keep" as const };
  assert.equal(describeStep({ ...up, fault: "clock-step", clockStep: "+2h", phaseAt: "drain" }), "up a -> b8t4-w2048, key keep, fault clock-step +2h in drain");
  assert.equal(describeStep({ ...up, fault: "read-only-path", readOnly: "/usr/local/lib" }), "up a -> b8t4-w2048, key keep, fault read-only-path on /usr/local/lib");
});

test("one sequence in four runs on a two-node group, one in two through sudo (groups too, on every other seed); neighbouring seeds draw unrelated first steps", () => {
  assert.deepEqual([0, 1, 2, 3, 7].map((i) => planCampaignSequence(1, i, 2).group), [false, false, false, true, true]);
  assert.deepEqual([0, 1, 2, 3].map((i) => planCampaignSequence(1, i, 2).sudo), [true, false, true, false]);
  assert.deepEqual([0, 1, 2, 3].map((i) => planCampaignSequence(2, i, 2).sudo), [false, true, false, true]);
  const firstOps = Array.from({ length: 40 }, (_, s) => planSequence(s, 0, 1)[0].op);
  // mulberry32 seeded with nearby numbers draws nearby first values: mix() spreads them.
  assert.ok(firstOps.filter((o) => o === "up").length >= 20, firstOps.join(" "));
  assert.notEqual(mix(1, 0), mix(0, 1));
});

test("after a step: a successful up proves its configuration; a failed one leaves the previous one, or its own where nothing was rolled back", () => {
  const old = { stack: "a" as const, unit: "u", serving: { budget: 8, window: 2048 }, key: null };
  const attempted = { stack: "a" as const, unit: "u", serving: { budget: 16, window: 2048 }, key: "k" };
  assert.deepEqual(allowedAfter(old, attempted, true, ""), [attempted]);
  assert.deepEqual(allowedAfter(old, attempted, false, "... Rolled back: the previous configuration ..."), [old]);
  assert.deepEqual(allowedAfter(old, attempted, false, "command on 127.0.0.10 did not finish"), [old, attempted]);
  assert.deepEqual(allowedAfter(old, null, true, ""), [old], "a preview or refresh changes nothing");
  // What served was started by a step whose engine died before readiness proved it: a
  // rollback goes to the host's known-good, the last configuration an up proved.
  const unproven = { ...attempted, serving: { budget: 12, window: 2048 } };
  assert.deepEqual(allowedAfter(unproven, attempted, false, "... Rolled back ...", old), [unproven, old]);
  assert.deepEqual(allowedAfter(unproven, attempted, false, "killed", old), [unproven, old, attempted]);
});

test("shrinking tries the sequence with each step left out", () => {
  const steps = planSequence(2, 0, 4);
  assert.deepEqual(shorter(steps).map((s) => s.length), [3, 3, 3, 3]);
  assert.deepEqual(shorter(steps)[1], [steps[0], steps[2], steps[3]]);
});

test("a timed fault's phase is the last progress line before it", () => {
  // Lines as a non-interactive `pulumi up` prints them.
  const lines = [
    " ~  command:remote:Command sglang-unit updating (0s) [diff: ~stdin]",
    " ~  command:remote:Command sglang-restart updating (0s) [diff: ~create]; sglang-k26 (stack a): holding 127.0.0.12's lock",
    " ~  command:remote:Command sglang-restart updating (1s) [diff: ~create]; sglang-k26 (stack a): stopping: SGLang is draining (SIGTERM sent; it checks every 5 s)",
    " ~  command:remote:Command sglang-restart updating (6s) [diff: ~create]; sglang-k26 (stack a): waiting for GPU memory to be released: 2 GPUs busy",
    " ~  command:remote:Command sglang-restart updating (6s) [diff: ~create]; sglang-k26 (stack a): old server (pid 249) drained in 1.9 s and gone 0.8 s later, GPUs free in 0.2 s; started the new unit",
    " ~  pulumi-nodejs:dynamic:Resource sglang-ready updating (0s) [diff: ~expectedArgs]",
  ];
  assert.equal(phaseOf("Updating (a):"), "engine start and reads");
  assert.deepEqual(lines.map((_, i) => phaseOf(lines.slice(0, i + 1).join("\n"))), ["staging", "restart", "drain", "GPU release", "load and readiness", "load and readiness"]);
  assert.equal(phaseOf(`${lines.join("\n")}\nsglang-k26: FAILED; rolling back`), "rollback");
  assert.equal(phaseOf(" -  command:remote:Command sglang-restart deleting (0s)"), "remove");
})

test("a change preflight refuses arms no fault, and a stack moves to settings other than its last ones", () => {
  const plans = Array.from({ length: 60 }, (_, i) => planSequence(5, i, 8));
  const ups = plans.flat().filter((s) => s.op === "up");
  for (const u of ups) if (u.op === "up" && (u.badFlag || u.badTp)) assert.equal(u.fault, "none", JSON.stringify(u));
  for (const steps of plans) {
    const last = { a: "b8t4-w2048", b: "b4t4-w2048" };
    for (const s of steps) {
      if (s.op !== "up") continue;
      assert.notEqual(s.config, last[s.stack], JSON.stringify(steps));
      last[s.stack] = s.config;
    }
  }
});

test("the tables count a fault only where it acted, and a fault-free up only of a change the host accepts", async () => {
  const { faultOf, operatorSteps } = await import("../../bench/campaign/report");
  const up = { op: "up" as const, stack: "a" as const, config: "b8t4-w2048" as const, key: "keep" as const };
  const rec = (step: object, extra: object = {}) => ({ step, ok: false, armed: true, requests: [], violations: [], seconds: 1, ...extra }) as never;
  assert.equal(faultOf(rec({ ...up, fault: "hang" })), "hang");
  assert.equal(faultOf(rec({ ...up, fault: "hang" }, { armed: false })), undefined);
  assert.equal(faultOf(rec({ ...up, fault: "hang", badTp: true })), undefined);
  assert.equal(faultOf(rec({ ...up, fault: "pulumi-killed", atSeconds: 3 }, { fired: false })), undefined);
  assert.equal(faultOf(rec({ op: "destroy", stack: "a", fault: "pulumi-killed", atSeconds: 3 }, { fired: true })), "pulumi-killed (destroy)");
  // A hung command or a held lock acts in preflight: counted where the up was refused there; a server fault is not.
  const refused = { cause: "error: # preflight on 127.0.0.10: nothing was stopped" };
  assert.equal(faultOf(rec({ ...up, fault: "hang-nvidia-smi" }, refused)), "hang-nvidia-smi");
  assert.equal(faultOf(rec({ ...up, fault: "hang" }, refused)), undefined);
  assert.equal(faultOf(rec({ ...up, fault: "power-cut", rebootAt: "drain" }, { fired: false })), undefined, "a reboot whose phase never came");
  assert.equal(faultOf(rec({ ...up, fault: "stalled-node0" }, { armed: false })), undefined, "a stalled node 0 outside a group");
  assert.ok(operatorSteps({ ...up, fault: "none" }).includes("fault-free up"));
  assert.ok(!operatorSteps({ ...up, fault: "none", badFlag: true }).includes("fault-free up"));
});

test("fault weights: none or all equal draw the even plan; --fill's favour the kinds used fewer times; --weights round-trips and refuses what it does not know", () => {
  const even = Object.fromEntries(FAULTS.slice(1).map((k) => [k, 3]));
  for (let i = 0; i < 20; i++) assert.deepEqual(planSequence(11, i, 6, even), planSequence(11, i, 6));
  const used = Object.fromEntries(FAULTS.slice(1).map((k) => [k, 25]));
  used["ssh-outage-loading"] = 1;
  const w = fillWeights(used, 20);
  assert.equal(w["ssh-outage-loading"], 19);
  assert.equal(w["crash-oom"], 1);
  const drawn = Array.from({ length: 200 }, (_, i) => planSequence(5, i, 6, w)).flat().filter((s) => s.op === "up" && s.fault !== "none").map((s) => (s as { fault: string }).fault);
  const share = drawn.filter((f) => f === "ssh-outage-loading").length / drawn.length;
  // 19 of 40 by weight: nearly half, against one in twenty-two evenly.
  assert.ok(share > 0.38 && share < 0.58, `share ${share}`);
  assert.deepEqual(parseWeights(formatWeights(w)), w);
  assert.throws(() => parseWeights("crash-oomm=2"), /unknown fault kind "crash-oomm"; valid: crash-oom,/);
  assert.throws(() => parseWeights("hang=-1"), /hang=-1 is not a number of 0 or more/);
  assert.throws(() => parseWeights("hang="), /is not a number/);
  // Every new kind of issue 41 is a kind --weights knows; --only forces one.
  assert.deepEqual(parseWeights("hang-nvidia-smi=1,hang-help=1,reboot-clean=1,power-cut=1,stalled-node0=1,foreign-lock=1"), { "hang-nvidia-smi": 1, "hang-help": 1, "reboot-clean": 1, "power-cut": 1, "stalled-node0": 1, "foreign-lock": 1 });
  for (const kind of ["hang-nvidia-smi", "hang-help", "reboot-clean", "power-cut", "stalled-node0", "foreign-lock"]) {
    const forced = Array.from({ length: 10 }, (_, i) => planSequence(5, i, 4, onlyWeights(kind), true)).flat().filter((s) => s.op === "up");
    assert.ok(forced.length > 0 && forced.every((s) => s.op === "up" && s.fault === kind), kind);
  }
  assert.deepEqual(parseWeights(formatWeights(onlyWeights("power-cut"))), onlyWeights("power-cut"), "recorded as --weights, it replays");
  assert.throws(() => onlyWeights("power-cutt"), /--only: unknown fault kind "power-cutt"; valid: crash-oom,.*foreign-lock/);
  assert.throws(() => onlyWeights(""), /--only: name at least one fault kind/);
  // Dense: more ups, each with a fault that acts; the even plan is unchanged by the option's existence.
  const dense = Array.from({ length: 100 }, (_, i) => planSequence(5, i, 6, w, true)).flat();
  const denseUps = dense.filter((s) => s.op === "up");
  assert.ok(denseUps.length / dense.length > 0.8, `${denseUps.length} of ${dense.length}`);
  assert.ok(denseUps.every((s) => s.op === "up" && s.fault !== "none" && !s.badFlag && !s.badTp));
  assert.deepEqual(planSequence(5, 3, 6, w, false), planSequence(5, 3, 6, w));
});
