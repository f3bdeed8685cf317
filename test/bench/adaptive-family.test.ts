// The generated family of surfaces (bench/adaptive/family.ts), pure: a surface is a function
// of its seed; OOM regions are monotone in memory need; every feature is drawn across a
// family, with labels that hold on the finished surface; the noise options are honoured.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { gridPoints, needsAtLeast } from "../../components/sweep/adaptive/space";
import { gridNeighbours } from "../../components/sweep/adaptive/strategy";
import { GRID } from "../../bench/adaptive/grid";
import { describeFamily, drawFamily, familySeedOf, FEATURES, GeneratedSurface, generateSurface, locationOf, renderFamilyMarkdown, toReplayTable } from "../../bench/adaptive/family";

const points = gridPoints(GRID);
const family = drawFamily(points, 20261203, 200);
const rates = (s: GeneratedSurface) => new Map(Object.entries(s.truth).flatMap(([n, t]) => (t.kind === "ok" ? [[n, t.short] as const] : [])));

test("a surface is a function of its seed and options; other seeds give other surfaces", () => {
  assert.deepEqual(generateSurface(points, 7), generateSurface(points, 7));
  assert.notDeepEqual(generateSurface(points, 7).truth, generateSurface(points, 8).truth);
  assert.deepEqual(drawFamily(points, 3, 5), drawFamily(points, 3, 5));
  assert.notDeepEqual(drawFamily(points, 3, 5).map((s) => s.truth), drawFamily(points, 4, 5).map((s) => s.truth));
  // Surface i is its own sub-seed's surface, so one surface of a result can be drawn again alone.
  const third = drawFamily(points, 3, 5)[2];
  assert.deepEqual(generateSurface(points, third.seed), third);
  assert.equal(new Set(family.map((s) => s.seed)).size, family.length);
  assert.deepEqual(Object.keys(family[0].truth), points.map((p) => p.name));
});

test("the family's seed is the commit's first eight hex digits; anything else is refused", () => {
  assert.equal(familySeedOf("64e86ab81a9dccdfcd726cb33a82ddcf57ed0d67"), 0x64e86ab8);
  assert.equal(familySeedOf("64E86AB8"), 0x64e86ab8);
  assert.throws(() => familySeedOf("HEAD"), /expected a git commit hash \(8 to 40 hex digits\), got "HEAD"/);
  assert.throws(() => familySeedOf("64e86ab"), /8 to 40 hex digits/);
});

test("out of memory is monotone: whatever needs at least an OOM configuration's memory runs out too; at most half the grid, sometimes none", () => {
  const shares: number[] = [];
  for (const s of family) {
    for (const q of points) {
      if (s.truth[q.name].kind !== "oom") continue;
      for (const p of points) if (needsAtLeast(p, q)) assert.equal(s.truth[p.name].kind, "oom", `seed ${s.seed}: ${q.name} is OOM, ${p.name} needs at least its memory`);
    }
    const oom = points.filter((p) => s.truth[p.name].kind === "oom").length;
    assert.ok(oom <= points.length / 2, `seed ${s.seed}: ${oom} OOM`);
    assert.equal(s.features.includes("oom"), oom > 0);
    shares.push(oom / points.length);
  }
  assert.ok(shares.filter((x) => x === 0).length >= 40, "some surfaces have no OOM region");
  assert.ok(shares.filter((x) => x >= 0.3).length >= 20, "some OOM regions are large");
  // Random shapes: many different OOM sets, not one threshold moved along one axis.
  const sets = new Set(family.map((s) => points.filter((p) => s.truth[p.name].kind === "oom").map((p) => p.name).join(",")));
  assert.ok(sets.size >= 60, `${sets.size} distinct OOM sets`);
});

test("every feature is drawn across 200 surfaces, and the labels hold on the finished surface", () => {
  const d = describeFamily(family);
  for (const f of FEATURES) assert.ok(d.features[f] >= 5, `${f}: ${d.features[f]} of 200`);
  for (const s of family) {
    const r = rates(s);
    const sorted = [...r.values()].sort((a, b) => b - a);
    assert.equal(r.get(s.optimum.point), sorted[0]);
    assert.ok(s.features.includes("peak") !== s.features.includes("ridge"), `seed ${s.seed}: one main shape`);
    if (s.features.includes("ridge-window")) assert.ok(s.features.includes("ridge"));
    if (s.features.includes("plateau")) assert.ok(sorted.filter((v) => v >= sorted[0] * 0.995).length >= 3, `seed ${s.seed}: plateau`);
    if (s.features.includes("needle")) assert.ok(s.features.includes("isolated-peak"));
    if (s.features.includes("isolated-peak")) assert.ok(sorted[1] < sorted[0] * 0.99, `seed ${s.seed}: an isolated peak that matters stands more than 1 % above the rest`);
    if (s.features.includes("multi-peak")) {
      const byName = new Map(points.map((p) => [p.name, p]));
      const maxima = [...r].filter(([n, v]) => v >= sorted[0] * 0.97 && gridNeighbours(points, byName.get(n)!).every((q) => !(r.get(q.name)! >= v)));
      assert.ok(maxima.length >= 2, `seed ${s.seed}: several peaks`);
    }
  }
});

test("an isolated peak, needle or wider, stands more than the tolerance above each of its grid neighbours", () => {
  const needles = family.filter((s) => s.features.includes("needle"));
  const wide = family.filter((s) => s.features.includes("isolated-peak") && !s.features.includes("needle"));
  assert.ok(needles.length >= 3 && wide.length >= 3, `${needles.length} needles, ${wide.length} wider isolated peaks`);
  // The neighbours' best relative to the peak: a needle stands above all of them by more than the tolerance.
  const lead = (s: GeneratedSurface) => {
    const r = rates(s);
    const best = points.find((p) => p.name === s.optimum.point)!;
    return r.get(best.name)! / Math.max(...gridNeighbours(points, best).map((q) => r.get(q.name) ?? 0));
  };
  for (const s of needles) assert.ok(lead(s) > 1.01, `seed ${s.seed}: needle ${lead(s)}`);
});

test("optima lie anywhere: interior, edges and corners of the budget/topk plane, each at a real rate", () => {
  assert.equal(locationOf(points, "b4t2-w2048"), "corner");
  assert.equal(locationOf(points, "b8t8-wnone"), "corner");
  assert.equal(locationOf(points, "b6t4-w2048"), "edge");
  assert.equal(locationOf(points, "b32t4-wnone"), "edge");
  assert.equal(locationOf(points, "b12t4-w2048"), "interior");
  const d = describeFamily(family);
  assert.equal(d.optimum.interior + d.optimum.edge + d.optimum.corner, 200);
  assert.ok(d.optimum.edge + d.optimum.corner >= 80, JSON.stringify(d.optimum));
  for (const where of ["interior", "edge", "corner"] as const) assert.ok(d.optimum[where] >= 20, JSON.stringify(d.optimum));
});

test("levels and spreads are realistic: the best at 110-250 tok/s, mostly 10-40 % above the median, long context slower", () => {
  const d = describeFamily(family);
  assert.ok(d.best.min >= 110 && d.best.max <= 250, JSON.stringify(d.best));
  assert.ok(d.bestOverMedian.p10 >= 0.08 && d.bestOverMedian.p90 <= 0.45, JSON.stringify(d.bestOverMedian));
  for (const s of family) for (const t of Object.values(s.truth)) if (t.kind === "ok") assert.ok(t.long < t.short && t.short > 0);
});

test("noise options are honoured; without them each surface draws its own, 1-6 % per request and 0-2 % per launch", () => {
  const fixed = drawFamily(points, 5, 20, { requestSd: 0.042, launchSd: 0.015 });
  for (const s of fixed) assert.deepEqual([s.requestSd, s.launchSd], [0.042, 0.015]);
  const table = toReplayTable(fixed[0], 420);
  for (const e of Object.values(table)) if (!e.failure) assert.deepEqual([e.short.sd, e.long!.sd], [0.042, 0.042]);
  assert.ok(family.every((s) => s.requestSd >= 0.01 && s.requestSd <= 0.06 && s.launchSd >= 0 && s.launchSd <= 0.02));
  assert.ok(Math.min(...family.map((s) => s.requestSd)) < 0.02 && Math.max(...family.map((s) => s.requestSd)) > 0.05);
  assert.ok(Math.max(...family.map((s) => s.launchSd)) > 0.015);
  // The options change only the noise, not the surface.
  assert.deepEqual(drawFamily(points, 5, 20).map((s) => [s.truth, s.features]), fixed.map((s) => [s.truth, s.features]));
  assert.throws(() => generateSurface(points, 1, { requestSd: -0.01 }), /requestSd must be a relative standard deviation in \[0, 1\), got -0.01/);
  assert.throws(() => generateSurface(points, 1, { launchSd: 2 }), /launchSd must be/);
});

test("the replay table: each configuration's truth, OOM launches failing at half a load's cost", () => {
  const s = family.find((x) => x.features.includes("oom"))!;
  const table = toReplayTable(s, 420);
  assert.deepEqual(Object.keys(table), points.map((p) => p.name));
  for (const [name, t] of Object.entries(s.truth)) {
    const e = table[name];
    if (t.kind === "oom") {
      assert.deepEqual([e.failure?.outOfMemory, e.launchSeconds], [true, 210]);
    } else {
      assert.deepEqual([e.failure, e.short.mean, e.long?.mean, e.launchSeconds, e.codingPassed], [undefined, t.short, t.long, 420, true]);
    }
  }
  assert.throws(() => toReplayTable(s, 0), /launchSeconds must be positive, got 0/);
});

test("the description counts every surface once and renders as Markdown", () => {
  const d = describeFamily(family);
  assert.equal(d.gapBuckets.reduce((s, b) => s + b.surfaces, 0), 200);
  assert.equal(d.withinToleranceBuckets.reduce((s, b) => s + b.surfaces, 0), 200);
  assert.ok(d.withinTolerance.min >= 1);
  const md = renderFamilyMarkdown(d);
  assert.match(md, /^200 surfaces\. Features: peak \d+ /);
  assert.match(md, /\| best \/ second best - 1 \| /);
  assert.throws(() => describeFamily([]), /no surfaces/);
});
