// host/drain-count.awk: SGLang's drain counts, across every tokenizer worker. With
// --tokenizer-worker-num > 1 each worker (its own TokenizerManager, srt/managers/
// multi_tokenizer_mixin.py) logs its own count, and its request ids start with its pid: the last
// line alone (the earlier reading) is one worker's count, and a worker that is done says 0 while
// another still drains.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { HOST_DIR } from "../../../../components/sglang-service/hostScript";

const PROGRAM = fs.readFileSync(path.join(HOST_DIR, "drain-count.awk"), "utf8");

/** The awk program over `lines` (each given a short-unix time, 1.0, 2.0, ...). */
function read(what: "count" | "drained", workers: number, lines: string[]): string {
  const text = lines.map((l, i) => `${i + 1}.0 host sglang[1]: [2026-12-06 10:00:0${i}] ${l}`).join("\n") + "\n";
  return execFileSync("awk", ["-v", `workers=${workers}`, "-v", `what=${what}`, PROGRAM], { input: text, encoding: "utf8", env: { PATH: process.env.PATH, LC_ALL: "C" } }).trim();
}
const count = (n: number, rids: string[]) => `Gracefully exiting... Remaining number of requests ${n}. Remaining requests remaining_rids=[${rids.map((r) => `'${r}'`).join(", ")}].`;

test("one worker: its last count; drained at its first 0", () => {
  const lines = [count(3, ["a", "b", "c"]), count(1, ["a"]), count(0, [])];
  assert.equal(read("count", 1, lines.slice(0, 2)), "1");
  assert.equal(read("count", 1, lines), "0");
  assert.equal(read("drained", 1, lines), "3.0");
  assert.equal(read("count", 1, ["SIGTERM received. signum=None frame=None. Draining requests and shutting down..."]), "");
});

test("two workers: the requests of both, though the last line is a worker that is done", () => {
  const lines = [count(3, ["101_a", "101_b", "101_c"]), count(2, ["102_a", "102_b"]), count(2, ["101_a", "101_b"]), count(0, [])];
  // The 0 is worker 102's (not heard from the longest): worker 101 still has 2 in flight.
  assert.equal(read("count", 2, lines), "2");
  assert.equal(read("drained", 2, lines), "");
  const done = [...lines, count(0, [])];
  assert.equal(read("count", 2, done), "0");
  assert.equal(read("drained", 2, done), "5.0");
});

test("two workers: one that never had a request says 0 first; nothing is known until both have spoken", () => {
  assert.equal(read("count", 2, [count(0, [])]), "");
  assert.equal(read("count", 2, [count(0, []), count(4, ["7_a", "7_b", "7_c", "7_d"])]), "4");
  assert.equal(read("count", 2, [count(0, []), count(4, ["7_a", "7_b", "7_c", "7_d"]), count(0, [])]), "0");
});

// Issue 60: the transaction reads the drain's end on the kernel's clock since boot (`journalctl -o
// short-monotonic`, "[ 1234.567890]", padded), its own clock (/proc/uptime), never the wall clock.
test("drained: the time of `-o short-monotonic` lines, padded or not", () => {
  const text = (stamps: string[]) => stamps.map((t, i) => `${t} host sglang[1]: ${count(i === stamps.length - 1 ? 0 : 2, i === stamps.length - 1 ? [] : ["a", "b"])}`).join("\n") + "\n";
  const drained = (input: string) => execFileSync("awk", ["-v", "workers=1", "-v", "what=drained", PROGRAM], { input, encoding: "utf8", env: { PATH: process.env.PATH, LC_ALL: "C" } }).trim();
  assert.equal(drained(text(["[    7.250000]", "[   12.500000]"])), "12.500000");
  assert.equal(drained(text(["[14165.763633]", "[14170.763633]"])), "14170.763633");
});
