// A node's state is read, not guessed (handlers.ts parseNodeState): a read that did not
// complete is unobserved, never "the unit is not installed" (which would restart a healthy
// group, or report drift to `refresh` that is not there).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseNodeState } from "../../../../components/sglang-service/remote/handlers";

const HASH = "a".repeat(64);

test("a node's state needs the whole read; without its end it is unobserved", () => {
  assert.deepEqual(parseNodeState(`@@hash ${HASH}\n@@state active\n@@note b8t4 sglang-k26.service\n@@end\n`, "sglang-k26"), { hash: HASH, state: "active", proving: "b8t4" });
  assert.deepEqual(parseNodeState("@@hash \n@@state inactive\n@@note \n@@end\n", "sglang-k26"), { hash: null, state: "inactive", proving: null }, "not installed is an observation");
  assert.equal(parseNodeState("", "sglang-k26"), undefined, "ssh exit 255 prints nothing");
  assert.equal(parseNodeState(`@@hash ${HASH}\n@@state active\n`, "sglang-k26"), undefined, "cut before its end");
  assert.equal(parseNodeState("@@hash \n@@state \n@@note \n@@end\n", "sglang-k26"), undefined, "systemctl gave no answer");
});
