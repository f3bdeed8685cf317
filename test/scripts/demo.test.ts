// What `npm run demo` says of its no-op `up` (issue 63: it printed `no-op up: {"same":9}`):
// Pulumi's resource changes in words. The demo itself runs the real engine on a simulated
// host; importing it runs nothing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { changesInWords } from "../../scripts/demo";

test("a no-op up in words: every resource unchanged, nothing restarted", () => {
  assert.equal(changesInWords({ same: 9 }), "9 resources unchanged, nothing restarted");
  assert.equal(changesInWords({ same: 1 }), "1 resource unchanged, nothing restarted");
  assert.equal(changesInWords({}), "0 resources unchanged, nothing restarted");
});

test("an up that changed something names each change, what changed first", () => {
  assert.equal(changesInWords({ same: 8, update: 1 }), "1 updated, 8 unchanged");
  assert.equal(changesInWords({ update: 4, same: 5, create: 1, replace: 0 }), "1 created, 4 updated, 5 unchanged");
  assert.equal(changesInWords({ same: 7, replace: 1, "create-replacement": 1 }), "1 replaced, 1 created as replacements, 7 unchanged");
});
