// The launch ordinal of a simulated server start (simhost/sim/sglang/launches.ts) and the
// launch-to-launch offset the simulator draws from it (surface.ts launchOffset): two starts of
// one configuration on a host draw two offsets; a fresh host replays the same ones.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { freePort, launch, sandbox, until } from "../../support/localSim";
import { takeLaunchOrdinal } from "../../../simhost/sim/sglang/launches";
import { specSettings } from "../../../simhost/sim/sglang/perf";
import { launchOffset, parseSurface } from "../../../simhost/sim/sglang/surface";

test("ordinals count the starts on a host; one a racing start took is skipped, never shared", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "launches-"));
  try {
    const ordinals = [takeLaunchOrdinal(dir, 101), takeLaunchOrdinal(dir, 102)];
    // A start that raced ahead took 3 while this one counted 3 files: it moves on to 4.
    fs.writeFileSync(path.join(dir, "3"), "999\n");
    ordinals.push(takeLaunchOrdinal(dir, 103), takeLaunchOrdinal(dir, 104));
    assert.deepEqual(ordinals, [0, 1, 4, 5]);
    assert.equal(fs.readFileSync(path.join(dir, String(ordinals[3])), "utf8"), "104\n", "the file names the PID that took it");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const SURFACE = { noise: { sd: 0.02, launchSd: 0.05, seed: 3 } };
const ARGS = (dir: string, port: number) => ["--model-path", path.join(dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1",
  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", path.join(dir, "drafter"), "--speculative-draft-window-size", "2048"];

/** Starts the simulator in `sb`, reads the launch line of its journal, stops it. */
async function launchLine(sb: ReturnType<typeof sandbox>): Promise<{ launch: number; factor: number }> {
  const server = launch(sb.env, ARGS(sb.dir, await freePort()));
  try {
    const m = await until("the launch line", async () => /\[simulator\] launch (\d+) on this host: every step of this server takes x([\d.]+) \(surface noise\.launchSd 0\.05\)/.exec(server.log()) ?? undefined);
    return { launch: Number(m[1]), factor: Number(m[2]) };
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
  }
}

test("two starts of one configuration draw two offsets, those the surface's seed gives; a fresh host replays them", async () => {
  const spec = specSettings({ speculative_algorithm: "DFLASH", speculative_draft_window_size: 2048 }, {});
  const expected = (l: number) => Number(launchOffset(parseSurface(SURFACE), spec, l).toFixed(4));
  const runs: { launch: number; factor: number }[][] = [];
  for (let host = 0; host < 2; host++) {
    const sb = sandbox({ surface: SURFACE });
    try {
      runs.push([await launchLine(sb), await launchLine(sb)]);
    } finally {
      sb.cleanup();
    }
  }
  assert.deepEqual(runs[0], [{ launch: 0, factor: expected(0) }, { launch: 1, factor: expected(1) }]);
  assert.notEqual(runs[0][0].factor, runs[0][1].factor, "another launch, another offset");
  assert.deepEqual(runs[1], runs[0], "a fresh host: the same launches, the same offsets");
});

test("without a noise section a start draws no offset and says nothing of one", async () => {
  const sb = sandbox({});
  const server = launch(sb.env, ARGS(sb.dir, await freePort()));
  try {
    await until("the launch's ordinal", async () => (fs.existsSync(path.join(sb.dir, "launches", "0")) ? true : undefined));
    await until("loaded", async () => (/Load weight end/.test(server.log()) ? true : undefined));
    assert.doesNotMatch(server.log(), /\[simulator\] launch/);
  } finally {
    server.child.kill("SIGKILL");
    await server.exited;
    sb.cleanup();
  }
});
