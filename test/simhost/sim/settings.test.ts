// Issue 63: `npm run simhost -- start --sglang '{"loadSecs":60}'` ignored the key it did not
// know. The SGLang simulator's settings are one list (simhost/sim/sglang/settings.ts): the CLI
// refuses any other key naming the nearest and the valid ones, the simulator refuses it in its
// file, and the help lists the same keys.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { checkSimSettings, parseSimConfig, settingsHelp, SIM_SETTING_KEYS } from "../../../simhost/sim/sglang/settings";
import { DEFAULT_SURFACE } from "../../../simhost/sim/sglang/surface";
import { closest } from "../../../simhost/command-line";

const VALID = "valid: profile, line, loadSeconds, loadSecondsPerGiB, warmupSeconds, schedulerExitSeconds, speedScale, version, rendezvousSeconds, removedEndpoints, surface";

test("an unknown setting is refused with the nearest one and every valid one", () => {
  assert.throws(() => checkSimSettings({ loadSecs: 60 }, closest), (e: Error) => e.message === `unknown setting loadSecs; did you mean loadSeconds? ${VALID}`);
  assert.throws(() => checkSimSettings({ speedscale: 2 }, closest), /^Error: unknown setting speedscale; did you mean speedScale\? valid: /);
  assert.throws(() => checkSimSettings({ gpus: 4 }, closest), (e: Error) => e.message === `unknown setting gpus; ${VALID}`);
  // The simulator, which has no "did you mean", refuses it too (in its file: the launch fails naming it).
  assert.throws(() => parseSimConfig({ profile: "ddtree-fork", loadSecs: 60 }), (e: Error) => e.message === `unknown setting loadSecs; ${VALID}`);
});

test("a value of the wrong kind is refused naming the setting and what it takes", () => {
  assert.throws(() => checkSimSettings({ loadSeconds: "6" }), /^Error: setting loadSeconds must be a number of seconds, 0 or more; got "6"$/);
  assert.throws(() => checkSimSettings({ profile: "fork" }), /^Error: setting profile must be one of "upstream", "ddtree-fork"; got "fork"$/);
  assert.throws(() => checkSimSettings({ line: "nightly" }), /^Error: setting line must be one of "release", "main", "v0\.5\.19"; got "nightly"$/);
  assert.equal(parseSimConfig({ line: "v0.5.19" }).line, "v0.5.19", "the older release users still run");
  assert.throws(() => checkSimSettings({ speedScale: 0 }), /^Error: setting speedScale must be a positive number; got 0$/);
  assert.throws(() => checkSimSettings({ removedEndpoints: "/get_server_info" }), /^Error: setting removedEndpoints must be a list of paths/);
  assert.throws(() => checkSimSettings({ surface: { nodecost: 1 } }), /^Error: setting surface must be surface: surface has unknown key\(s\) nodecost/);
  assert.throws(() => checkSimSettings([1]), /^Error: the simulator's settings must be a JSON object/);
});

test("every setting the project's code passes is valid, and the defaults fill the rest", () => {
  const given = { profile: "ddtree-fork", line: "release", loadSeconds: 6, loadSecondsPerGiB: 0.01, warmupSeconds: 0.5, schedulerExitSeconds: 30, speedScale: 20, version: "0.5.19", rendezvousSeconds: 5, removedEndpoints: ["/get_server_info"], surface: { nodeCost: 0.1 } };
  assert.deepEqual(Object.keys(given), SIM_SETTING_KEYS);
  assert.equal(checkSimSettings(given), given);
  const defaults = parseSimConfig(undefined);
  assert.deepEqual({ ...defaults, surface: undefined }, { profile: "upstream", line: "main", loadSecondsPerGiB: 0.005, warmupSeconds: 0.5, schedulerExitSeconds: 0.5, speedScale: 1, rendezvousSeconds: 120, removedEndpoints: [], surface: undefined });
  assert.deepEqual(defaults.surface, DEFAULT_SURFACE);
  assert.equal(parseSimConfig({ loadSeconds: 2 }).loadSeconds, 2);
});

test("the help lists every setting, from the same list, one a line", () => {
  const lines = settingsHelp().split("\n");
  assert.deepEqual(lines.map((l) => l.trim().split(" ")[0]), SIM_SETTING_KEYS);
  assert.match(lines[2], /^ {2}loadSeconds +seconds the weights take to load \(default: from the model's size, at loadSecondsPerGiB\)$/);
});
