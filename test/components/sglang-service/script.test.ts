// The host-side scripts rendered from a deployment: the transaction is a committed
// snapshot a reviewer reads like the unit, both scripts parse as bash, and every value
// in them is quoted.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { helperScripts, launchFlags, renderUnit } from "../../../components/sglang-service/render";
import { renderStageScript, renderTransaction, stageDir, transactionInput } from "../../../components/sglang-service/script";
import { testStackConfig } from "./stackConfig";

const SNAPSHOT = path.join(__dirname, "__snapshots__", "b16t4-w2048.transaction.sh");
const UPDATE = process.env.UPDATE_SNAPSHOTS === "1";
if (UPDATE && process.env.CI) throw new Error("UPDATE_SNAPSHOTS=1 is refused under CI: snapshots are updated by a person who reads the diff");

const d = parseDeployment(testStackConfig("b16t4-w2048"), "b16t4-w2048");
const withKey = { apiKey: true, hfToken: false };
const transaction = renderTransaction(transactionInput(d, "b16t4-w2048", "sglang-k26 (stack b16t4-w2048)", 0, "127.0.0.10", withKey));

const bashParses = (text: string) => execFileSync("bash", ["-n"], { input: text });

test("the transaction matches __snapshots__/b16t4-w2048.transaction.sh and parses as bash", () => {
  bashParses(transaction);
  if (UPDATE) fs.writeFileSync(SNAPSHOT, transaction);
  assert.equal(transaction, fs.readFileSync(SNAPSHOT, "utf8"));
});

test("the transaction reads the secrets it has from stdin and removes those the stack no longer has", () => {
  assert.match(transaction, /read -r line && \(umask 077; printf '%s' "\$line" \| base64 -d > \/etc\/dflash-sglang\/sglang-k26\.secrets\.yaml\.dflash-new\)/);
  // A restart with the same unit and the same secrets is not a restart.
  assert.match(transaction, /cmp -s \/etc\/dflash-sglang\/sglang-k26\.curl-headers\.dflash-new \/etc\/dflash-sglang\/sglang-k26\.curl-headers \|\| return 0/);
  assert.match(transaction, /rm -f \/etc\/dflash-sglang\/sglang-k26\.env$/m);
  const none = renderTransaction(transactionInput(d, "b16t4-w2048", "x", 0, "127.0.0.10", { apiKey: false, hfToken: false }));
  assert.doesNotMatch(none, /read -r line &&/);
});

test("a further node waits for node 0's drain before it stops its own rank", () => {
  const peer = renderTransaction(transactionInput(d, "b16t4-w2048", "x node 1", 1, "127.0.0.11", withKey));
  bashParses(peer);
  assert.match(peer, /^rank=1$/m);
});

test("the staging script writes only to the stack's own folder (and the shared helpers) and parses as bash", () => {
  const unitText = renderUnit(d, { stack: "b16t4-w2048", secrets: withKey });
  const stage = renderStageScript({ label: "l", host: "127.0.0.10", stack: "b16t4-w2048", unitName: "sglang-k26", unitText, transaction, helpers: helperScripts(), python: d.service.python, flags: launchFlags(d, withKey), paths: [{ what: "model.path", path: "/models/it's here" }], tpSize: 8 });
  bashParses(stage);
  const written = [...stage.matchAll(/^cat > (\S+) <</gm)].map((m) => m[1]);
  const dir = stageDir("sglang-k26", "b16t4-w2048");
  assert.deepEqual(written.filter((p) => !p.startsWith(`${dir}/`) && !p.startsWith("/usr/local/lib/dflash-sglang/")), []);
  assert.ok(written.includes(`${dir}/unit.service.dflash-tmp`) && written.includes(`${dir}/transaction.sh.dflash-tmp`), written.join("\n"));
  assert.match(stage, /\[ -d '\/models\/it'\\''s here' \]/, "paths are shell-quoted");
});

test("a text holding the heredoc's end marker is refused, not staged broken", () => {
  assert.throws(
    () => renderStageScript({ label: "l", host: "h", stack: "s", unitName: "u", unitText: "a\nDFLASH_EOF\nb", transaction, helpers: {}, python: "/p", flags: [], paths: [], tpSize: 1 }),
    /contains the line DFLASH_EOF/,
  );
});
