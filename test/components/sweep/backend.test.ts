// Where a sweep keeps its stacks: a team's backend only when it deploys to real hosts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { sweepBackend } from "../../../components/sweep/sweep";

const TEAM = "postgres://pulumi@db.example/pulumi";

test("on real hosts (--hosts) with PULUMI_BACKEND_URL set, the sweep's stacks are the team's, so --resume sees colleagues' results", () => {
  assert.equal(sweepBackend(true, TEAM), TEAM);
});

test("on simulated hosts the sweep keeps its own state, even with PULUMI_BACKEND_URL set: the team's stacks deploy to real hosts", () => {
  assert.equal(sweepBackend(false, TEAM), undefined);
  assert.equal(sweepBackend(true, undefined), undefined);
  assert.equal(sweepBackend(true, ""), undefined);
});
