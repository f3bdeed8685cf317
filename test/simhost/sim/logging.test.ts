// --log-level, held to sgl-project/sglang python/sglang/srt/utils/common.py configure_logger
// (Python's logging at the level given, upper-cased; uvicorn at the same level, http_server.py).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { freePort, launch, sandbox, status, until } from "../../support/localSim";
import { levelNumber, shown } from "../../../simhost/sim/sglang/logging";

test("a record shows when its level is at least --log-level's, in any case; prints always show", () => {
  assert.equal(shown("INFO", "info"), true);
  assert.equal(shown("INFO", "warning"), false);
  assert.equal(shown("WARNING", "WARNING"), true);
  assert.equal(shown("WARNING", "error"), false);
  assert.equal(shown("ERROR", "error"), true);
  assert.equal(shown("ERROR", "critical"), false);
  assert.equal(shown("DEBUG", "info"), false);
  assert.equal(shown("DEBUG", "debug"), true);
  assert.equal(shown("INFO", "warn"), false, "logging.WARN");
  for (const level of ["debug", "info", "warning", "error", "critical"]) assert.equal(shown("PRINT", level), true);
  assert.equal(levelNumber("Info"), 20);
  assert.equal(levelNumber("verbose"), undefined);
});

test("--log-level warning hides the start-up, ready, drain-count and uvicorn lines, shows SIGTERM's warning; an unknown level fails", async () => {
  const sb = sandbox({ schedulerExitSeconds: 0 });
  const port = await freePort();
  const server = launch(sb.env, ["--model-path", path.join(sb.dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--log-level", "warning"]);
  try {
    await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    server.child.kill("SIGTERM");
    const exit = await server.exited;
    assert.equal(exit.code, 0);
    const log = server.log();
    assert.match(log, /^\[[^\]]+\] SIGTERM received\. signum=None frame=None\. Draining requests and shutting down\.\.\.$/m);
    for (const hidden of [/Gracefully exiting/, /fired up and ready to roll/, /Load weight begin/, /KV Cache is allocated/, /server_args=/, /Uvicorn running on/, /Started server process/, /Finished server process/]) assert.doesNotMatch(log, hidden);
  } finally {
    server.child.kill("SIGKILL");
    sb.cleanup();
  }
  const sb2 = sandbox({});
  try {
    const r = await launch(sb2.env, ["--model-path", path.join(sb2.dir, "model"), "--log-level", "verbose"]).exited;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^AttributeError: module 'logging' has no attribute 'VERBOSE'$/m);
  } finally {
    sb2.cleanup();
  }
});

test("--log-level error hides SIGTERM's warning; a crash's ERROR lines still show", async () => {
  const sb = sandbox({ schedulerExitSeconds: 0 });
  const port = await freePort();
  const server = launch(sb.env, ["--model-path", path.join(sb.dir, "model"), "--tp-size", "8", "--port", String(port), "--host", "127.0.0.1", "--log-level", "error"]);
  try {
    await until("ready", async () => ((await status(port, "/health")) === 200 ? true : undefined));
    server.child.kill("SIGTERM");
    assert.equal((await server.exited).code, 0);
    assert.equal(server.log(), "", "nothing at ERROR in a clean start and stop");
  } finally {
    server.child.kill("SIGKILL");
    sb.cleanup();
  }
  const crashing = sandbox({}, { crashDuringLoad: "not-enough-memory" });
  try {
    const r = await launch(crashing.env, ["--model-path", path.join(crashing.dir, "model"), "--tp-size", "8", "--port", String(await freePort()), "--log-level", "ERROR"]).exited;
    assert.equal(r.signal, "SIGKILL");
    assert.equal((r.stderr.match(/Scheduler hit an exception/g) ?? []).length, 8);
    assert.match(r.stderr, /SIGQUIT received\./);
  } finally {
    crashing.cleanup();
  }
});
