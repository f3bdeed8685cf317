// The host-side scripts rendered from a deployment: the transaction is a committed
// snapshot a reviewer reads like the unit, both scripts parse as bash, and every value
// in them is quoted.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { gpuIndices, launchFlags, renderUnit } from "../../../components/sglang-service/render";
import { helperScripts, renderPreflightScript, renderStageRemoval, renderStageScript, renderTransaction, stageDir, transactionInput } from "../../../components/sglang-service/script";
import { hostFile } from "../../../components/sglang-service/hostScript";
import { testStackConfig } from "./stackConfig";


const SNAPSHOT = path.join(__dirname, "__snapshots__", "b16t4-w2048.transaction.sh");
const UPDATE = process.env.UPDATE_SNAPSHOTS === "1";
if (UPDATE && process.env.CI) throw new Error("UPDATE_SNAPSHOTS=1 is refused under CI: snapshots are updated by a person who reads the diff");

const d = parseDeployment(testStackConfig("b16t4-w2048"), "b16t4-w2048");
/** The host commands' bounds as the schema's defaults give them. */
const BOUNDS = d.timeouts;
const withKey = { apiKey: true, hfToken: false };
const transaction = renderTransaction(transactionInput(d, "b16t4-w2048", "sglang-k26 (stack b16t4-w2048)", 0, "127.0.0.10", withKey));

const bashParses = (text: string) => execFileSync("bash", ["-n"], { input: text });

test("the transaction matches __snapshots__/b16t4-w2048.transaction.sh and parses as bash", () => {
  bashParses(transaction);
  if (UPDATE) fs.writeFileSync(SNAPSHOT, transaction);
  assert.equal(transaction, fs.readFileSync(SNAPSHOT, "utf8"));
});

test("the transaction reads the secrets it has from stdin and removes those the stack no longer has", () => {
  // Its values: the files stdin carries, in order, and those the stack does not have (host/transaction.sh reads, compares and installs them).
  assert.match(transaction, /^secret_files=\(\/etc\/dflash-sglang\/sglang-k26\.secrets\.yaml \/etc\/dflash-sglang\/sglang-k26\.curl-headers\)$/m);
  assert.match(transaction, /^absent_secrets=\(\/etc\/dflash-sglang\/sglang-k26\.env\)$/m);
  const none = renderTransaction(transactionInput(d, "b16t4-w2048", "x", 0, "127.0.0.10", { apiKey: false, hfToken: false }));
  assert.match(none, /^secret_files=\(\)$/m);
  assert.match(none, /^absent_secrets=\(\/etc\/dflash-sglang\/sglang-k26\.secrets\.yaml \/etc\/dflash-sglang\/sglang-k26\.curl-headers \/etc\/dflash-sglang\/sglang-k26\.env\)$/m);
  // Stdin holds one line per file it carries: none without secrets (read_secrets reads nothing).
  const r = inBash(none, `secrets_dir=$(mktemp -d); secret_files=(); read_secrets < /dev/null && echo read-nothing; ls "$secrets_dir" | wc -l`);
  assert.deepEqual(r.stdout.trim().split("\n"), ["read-nothing", "0"], r.stderr);
});

test("a further node waits for node 0's drain before it stops its own rank", () => {
  const peer = renderTransaction(transactionInput(d, "b16t4-w2048", "x node 1", 1, "127.0.0.11", withKey));
  bashParses(peer);
  assert.match(peer, /^rank=1$/m);
});

// Issue 12, scenario 2: staging happens outside the host's lock, so it may write only to
// this stack's own folder; the transaction installs helpers, secrets and unit under the lock.
// Its behaviour is tested in bash (host/stage.bats); here, what it is given and what it names.
test("the staging script writes only to the stack's own folder and parses as bash", () => {
  const unitText = renderUnit(d, { stack: "b16t4-w2048", secrets: withKey });
  const stage = renderStageScript({ label: "l", host: "127.0.0.10", stack: "b16t4-w2048", unitName: "sglang-k26", unitText, transaction, helpers: helperScripts(), python: d.service.python, flags: launchFlags(d, withKey), paths: [{ what: "model.path", path: "/models/it's here" }], gpus: gpuIndices(d), bounds: d.timeouts });
  bashParses(stage);
  assert.match(stage, new RegExp(`^stage=${stageDir("sglang-k26", "b16t4-w2048").replace(/[/.]/g, "\\$&")}$`, "m"));
  assert.match(stage, /^paths=\('\/models\/it'\\''s here'\)$/m, "paths are shell-quoted");
  // The staging body names no secret file, live unit or install path; the shared helpers only
  // in the copy of the unit systemd-analyze checks (the sed that points it at the staged ones).
  const body = hostFile("stage.sh").split("\n").filter((l) => !/^\s*#/.test(l));
  assert.deepEqual(body.filter((l) => /\$live|\$secrets_dir|\/etc\/|\/usr\//.test(l)), []);
  assert.deepEqual(body.filter((l) => l.includes("$helper_dir")).map((l) => l.trim().split(" ")[0]), ["sed"]);
  for (const l of body.filter((x) => /(^|\s)(write_file|mkdir|rm|mv|chmod)\s|>\s*"/.test(x) && !/^\s*(write_file\(\)|printf)/.test(x))) {
    assert.match(l, /"\$(stage|verify|1)[/"]/, `a write outside the stack's folder: ${l}`);
  }
});

test("the staged texts are whole in the staging script: a unit holding the end marker of a here-document gets another marker", () => {
  const unitText = "[Unit]\nDFLASH_EOF\nDescription=x\n";
  const stage = renderStageScript({ label: "l", host: "h", stack: "s", unitName: "u", unitText, transaction, helpers: {}, python: "/p", flags: [], paths: [], gpus: [0], bounds: BOUNDS });
  const values = stage.slice(0, stage.indexOf("# --- components/sglang-service/host/checks.sh ---"));
  const r = spawnSync("bash", ["-c", `${values}\nprintf '%s' "$unit_text"; printf '%s' "$transaction_text" | sha256sum`], { encoding: "utf8" });
  assert.equal(r.stdout, `${unitText}${createHash("sha256").update(transaction).digest("hex")}  -\n`, r.stderr);
});

// --- the transaction's functions, run in bash against fake host commands ----------------

/** A fake host command that prints `stdout` and exits with `code`. */
interface Fake {
  stdout: string;
  code?: number;
}

/** Sources the rendered transaction in bash with fake commands first on PATH, then runs `body` (stdin: `input`). */
function inBash(script: string, body: string, fakes: Record<string, Fake> = {}, input = ""): { code: number; stdout: string; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-script-"));
  try {
    fs.writeFileSync(path.join(dir, "transaction.sh"), script);
    for (const [name, fake] of Object.entries(fakes)) {
      fs.writeFileSync(path.join(dir, `${name}.out`), fake.stdout);
      fs.writeFileSync(path.join(dir, name), `#!/bin/bash\ncat "$(dirname "$0")/${name}.out"\nexit ${fake.code ?? 0}\n`, { mode: 0o755 });
    }
    const r = spawnSync("bash", ["-c", `source ${dir}/transaction.sh; ${body}`], { input, env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: "utf8", timeout: 20_000 });
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const waitGpus = (gpus: string, out: string, code = 0) => inBash(transaction, `gpus=${gpus} gpu_s=0 poll=0.01; wait_gpus`, { "nvidia-smi": { stdout: `${out}\n`, code } });

test("GPU wait: free when every GPU asked about lists at most gpuFreeMiB; the others do not count", () => {
  const rows = "0, 81004\n1, 3\n2,   0\n3, 79105";
  assert.equal(waitGpus("1,2", rows).code, 0);
  const busy = waitGpus("0,1,2,3", rows);
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, /FAILED: GPU memory on 127\.0\.0\.10 was not released within 0 s after the old server exited \(GPU 0: 81004 MiB used, GPU 3: 79105 MiB used; timeouts\.gpuReleaseSeconds\)/);
});

// An empty cell reads as 0 in awk arithmetic: a GPU whose use is unknown would count as free.
test("GPU wait: an unknown reading is busy, never free: [N/A], an empty cell, a GPU not listed, a failing nvidia-smi", () => {
  assert.match(waitGpus("1", "0, 0\n1, [N/A]").stderr, /GPU 1: \[N\/A\] MiB used/);
  assert.match(waitGpus("3", "3, ").stderr, /GPU 3:  MiB used/);
  assert.match(waitGpus("0,1", "0, 0").stderr, /GPU 1: not listed by nvidia-smi/);
  assert.match(waitGpus("0", "No devices were found").stderr, /GPU 0: not listed by nvidia-smi/);
  assert.equal(waitGpus("0", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9).code, 1);
});

// Issue 41, item 2: a node of a group stops nothing until the provider, having heard every node
// say it is prepared, sends `go`; an `abort`, the end of its session or no word in time ends it.
test("group barrier: a prepared node goes on only on `go`; an abort, a closed session or silence stops nothing and says why", () => {
  const group = renderTransaction({ ...transactionInput(d, "b16t4-w2048", "x node 1 (127.0.0.11)", 1, "127.0.0.11", withKey), groupSize: 2, barrierSeconds: 1 });
  const go = inBash(group, "await_go && echo went", {}, "go\n");
  assert.equal(go.code, 0);
  assert.deepEqual(go.stdout.trim().split("\n").filter((l) => !l.includes("waiting for every node")), ["@@prepared", "went"]);
  const abort = inBash(group, "await_go || echo stopped-nothing", {}, "abort\n");
  assert.match(abort.stderr, /^FAILED: the group's restart was called off before anything stopped .*; nothing was stopped on 127\.0\.0\.11\.$/m);
  assert.match(abort.stdout, /stopped-nothing/);
  assert.match(inBash(group, "await_go", {}, "").stderr, /FAILED: the session that drives the group's restart ended before its go .*nothing was stopped on 127\.0\.0\.11/);
  // An open stdin that says nothing: the bound (barrier_s, 1 s here) ends the wait.
  assert.match(inBash(group, "sleep 3 | await_go").stderr, /FAILED: x node 1 \(127\.0\.0\.11\) waited 1 s for the group's go and got none .*nothing was stopped on 127\.0\.0\.11/);
});

// Issue 41, item 2: node 0's old server ended mid-drain by another node's rank going away (its
// collectives aborted) cut what it still held: counted as a cut (requestsCut, drainPolicy fail).
test("group drain: a server ended by a peer's abort with requests in flight counts them as cut; without the abort it is not counted here", () => {
  const fakes = (journal: string[]) => `group_size=2 rank=0 poll=0.01 n=0
running() { n=$((n + 1)); [ "$n" -le 2 ]; }
show() { case "$1" in MainPID) echo 0 ;; InvocationID) echo inv ;; Result) echo exit-code ;; esac; }
systemctl() { :; }
journalctl() { printf '%s\\n' ${journal.map((l) => `"${l}"`).join(" ")}; }
stop_server drain; echo "killed=$killed cut=$cut"`;
  const draining = "Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=[a, b, c].";
  const aborted = inBash(transaction, fakes([draining, "RuntimeError: NCCL communicator was aborted on node 0: node 1 exited"]));
  assert.match(aborted.stdout, /ended by another node's abort during its drain .*cutting 3 requests still in flight/);
  assert.match(aborted.stdout, /^killed=1 cut=3$/m);
  assert.match(inBash(transaction, fakes([draining])).stdout, /^killed=0 cut=0$/m, "no abort: a server that ended by itself is not counted as cut here");
});

// srt/managers/tokenizer_manager.py sigterm_watchdog: a failed health check ends the drain with
// "Signal SIGTERM received while health check failed. Force exiting.", a line without a count.
test("a drain SGLang gives up (a failed health check, SGL_FORCE_SHUTDOWN) cuts what its last count held, an unknown number where it logged none", () => {
  const fakes = (journal: string[]) => `group_size=1 rank=0 poll=0.01 n=0
running() { n=$((n + 1)); [ "$n" -le 2 ]; }
show() { case "$1" in MainPID) echo 0 ;; InvocationID) echo inv ;; Result) echo signal ;; esac; }
systemctl() { :; }
journalctl() { printf '%s\\n' ${journal.map((l) => `"${l}"`).join(" ")}; }
stop_server drain; echo "killed=$killed cut=$cut"`;
  const draining = "Gracefully exiting... Remaining number of requests 2. Remaining requests remaining_rids=[a, b].";
  const forced = "Signal SIGTERM received while health check failed. Force exiting.";
  const out = inBash(transaction, fakes([draining, forced])).stdout;
  assert.match(out, /gave up its drain .*cutting 2 requests still in flight/);
  assert.match(out, /^killed=1 cut=2$/m);
  assert.match(inBash(transaction, fakes([draining.replace("2.", "0."), forced])).stdout, /^killed=0 cut=0$/m, "nothing held: nothing cut");
  assert.match(inBash(transaction, fakes([draining])).stdout, /^killed=0 cut=0$/m, "not forced: a server that ended by itself is not counted as cut here");
  // A health check that failed before the drain began: the forced line is the only one, no count
  // ever logged. What was in flight is unknown, so it counts as cut (drainPolicy "fail" holds).
  const alone = inBash(transaction, fakes([forced])).stdout;
  assert.match(alone, /gave up its drain \(its health check had failed: a stuck scheduler\) and exited, cutting what was still in flight \(SGLang logged no count\)/);
  assert.match(alone, /^killed=1 cut=null$/m);
  // SGL_FORCE_SHUTDOWN: the other forced line, named as what it is.
  const flag = inBash(transaction, fakes(["Signal SIGTERM received while force shutdown flag set. Force exiting."])).stdout;
  assert.match(flag, /skipped its drain \(SGL_FORCE_SHUTDOWN is set in its environment\)/);
  assert.match(flag, /^killed=1 cut=null$/m);
});

// srt/managers/tokenizer_manager.py sigterm_watchdog, as `journalctl -o cat` / `-o short-unix` /
// `-o short-monotonic` (the transaction's: seconds since boot, issue 60) print it.
test("drain progress from SGLang's own lines: the last remaining count, and when it first reached 0", () => {
  const journal = [
    "1764405001.250000 gpu python3[41]: [2026-11-29 08:30:01] Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=['a', 'b', 'c'].",
    "1764405006.250000 gpu python3[41]: [2026-11-29 08:30:06] Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].",
    "1764405011.250000 gpu python3[41]: [2026-11-29 08:30:11] Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].",
  ].join("\n");
  const run = (fn: string, text: string) => inBash(transaction, fn, {}, `${text}\n`).stdout.trim();
  assert.equal(run("drain_remaining 1", journal), "0");
  assert.equal(run("drain_remaining 1", journal.split("\n")[0]), "3");
  assert.equal(run("drain_remaining 1", "Gracefully exiting... remaining number of requests 2"), "2", "older wording");
  assert.equal(run("drain_remaining 1", "nothing about a drain"), "");
  assert.equal(run("drained_time 1", journal), "1764405006.250000");
  assert.equal(run("drained_time 1", journal.split("\n")[0]), "");
  assert.equal(run("drained_time 1", journal.replace(/^1764405006\.250000/m, "[ 1006.250000]")), "1006.250000", "short-monotonic");
  assert.equal(run("drained_time 1", "1.0 h p[1]: Gracefully exiting... Remaining number of requests 10. x"), "", "10 is not 0");
});

test("requests in flight are counted in words", () => {
  const say = (n: string) => inBash(transaction, `in_flight ${n}`).stdout.trim();
  assert.equal(say("1"), "1 request still in flight");
  assert.equal(say("0"), "0 requests still in flight");
  assert.equal(say("null"), "what was still in flight (SGLang logged no count)");
});

// srt/server_args.py registers --speculative-dflash-draft-window-size with help=argparse.SUPPRESS.
test("preflight: a hidden deprecated alias passes with a note when its flag is listed; unknown flags and missing paths are named; nothing is written", () => {
  const stack = `preflight-${process.pid}`;
  const help = "usage: sglang serve [-h] [--speculative-draft-window-size SPECULATIVE_DRAFT_WINDOW_SIZE] [--tp-size TP_SIZE]";
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-preflight-"));
  try {
    fs.writeFileSync(path.join(dir, "python"), `#!/bin/bash\n[ "$*" = "-m sglang.launch_server --help" ] && echo ${JSON.stringify(help)}\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(dir, "nvidia-smi"), "#!/bin/bash\nprintf '0, 0, 81559\\n1, 0, 81559\\n'\n", { mode: 0o755 });
    const checked = { label: "u (stack s)", host: "127.0.0.10", stack, unitName: "u", python: path.join(dir, "python"), flags: ["--tp-size", "--speculative-dflash-draft-window-size", "--speculative-ddtree-budget"], paths: [{ what: "model.path", path: path.join(dir, "no-such-model") }], gpus: [0, 1], bounds: BOUNDS };
    // The staging script's first part, and the stand-alone preflight run before a move's teardown: the same checks.
    for (const script of [renderStageScript({ ...checked, unitText: "[Unit]\n", transaction, helpers: {} }), renderPreflightScript(checked)]) {
      const r = spawnSync("bash", ["-s"], { input: script, encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stdout, /note: --speculative-dflash-draft-window-size is a deprecated spelling of --speculative-draft-window-size that SGLang accepts but hides from --help/);
      assert.match(r.stderr, /^Preflight failed for u \(stack s\) on 127\.0\.0\.10; nothing was stopped or changed, the current server is untouched:$/m);
      // A build without DDTree: the advice is to install one, not to name another build.
      assert.match(r.stderr, /^ {2}- the installed SGLang has no DDTree: its --help lists no DDTree flag, and this configuration needs --speculative-ddtree-budget\. Install the DDTree build of SGLang on the host, or deploy a configuration without DDTree; no sglangBuild setting makes up for a missing algorithm\.$/m);
      assert.doesNotMatch(r.stderr, /Set sglangBuild|simulated host/, "not a simulated host");
      assert.match(r.stderr, /^ {2}- model\.path \/.*\/no-such-model does not exist on the host\.$/m);
      assert.doesNotMatch(r.stderr, /--tp-size|GPUs/);
      assert.equal(fs.existsSync(stageDir("u", stack)), false, "nothing staged");
    }
    // A flag of a build that has DDTree: a flag map can name the host's spelling.
    const ddtreeHelp = `${help} [--speculative-ddtree-budget N]`;
    fs.writeFileSync(path.join(dir, "python"), `#!/bin/bash\n[ "$*" = "-m sglang.launch_server --help" ] && echo ${JSON.stringify(ddtreeHelp)}\n`, { mode: 0o755 });
    const mapped = spawnSync("bash", ["-s"], { input: renderPreflightScript({ ...checked, flags: ["--speculative-ddtree-topk"], paths: [] }), encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
    assert.match(mapped.stderr, /^ {2}- the installed SGLang does not accept --speculative-ddtree-topk \(checked against its --help\)\. Set sglangBuild to the build installed on the host/m);
    fs.writeFileSync(path.join(dir, "python"), `#!/bin/bash\n[ "$*" = "-m sglang.launch_server --help" ] && echo ${JSON.stringify(help)}\n`, { mode: 0o755 });
    const passing = spawnSync("bash", ["-s"], { input: renderPreflightScript({ ...checked, flags: ["--tp-size"], paths: [] }), encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
    assert.equal(passing.status, 0, passing.stderr);
    assert.equal(passing.stdout, "preflight passed for u (stack s) on 127.0.0.10\n");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("removing a stack's staging leaves other stacks' folders and the shared helpers while any stack remains or any unit names them", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-removal-"));
  try {
    const removal = renderStageRemoval("u", "a");
    assert.match(removal, /^stage=\/var\/lib\/dflash-sglang\/u\/stacks\/a$/m);
    // Run it against a copy of the layout under a scratch root.
    const local = removal.replaceAll("/var/lib/dflash-sglang", `${root}/state`).replaceAll("/usr/local/lib/dflash-sglang", `${root}/helpers`).replaceAll("/etc/systemd/system", `${root}/units`);
    for (const d of ["state/u/stacks/a", "state/u/stacks/b", "helpers", "units"]) fs.mkdirSync(path.join(root, d), { recursive: true });
    execFileSync("bash", ["-c", local]);
    assert.deepEqual([fs.existsSync(`${root}/state/u/stacks/a`), fs.existsSync(`${root}/state/u/stacks/b`), fs.existsSync(`${root}/helpers`)], [false, true, true]);
    // A rename's first half: the old unit serves on until the new name's restart removes it.
    fs.writeFileSync(`${root}/units/u.service`, `[Service]\nExecStartPre=${root}/helpers/wait-gpus-free 0 1024 300\n`);
    fs.writeFileSync(`${root}/units/other.service`, "[Service]\nExecStart=/bin/true\n");
    execFileSync("bash", ["-c", local.replaceAll("/stacks/a", "/stacks/b")]);
    assert.deepEqual([fs.existsSync(`${root}/state/u/stacks/b`), fs.existsSync(`${root}/helpers`)], [false, true], "a unit file that names the helpers keeps them");
    fs.rmSync(`${root}/units/u.service`);
    execFileSync("bash", ["-c", local.replaceAll("/stacks/a", "/stacks/b")]);
    assert.deepEqual([fs.existsSync(`${root}/state`), fs.existsSync(`${root}/helpers`)], [false, false], "the last stack's removal takes everything");
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});


// srt/server_args.py: releases accept --speculative-dflash-draft-window-size, a deprecated
// alias hidden from --help; main has only --speculative-draft-window-size. The tool renders
// the canonical spelling; a host whose SGLang lacks it is told the older one.
test("preflight: a host without the canonical window flag is refused, naming the older spelling a flag map can use", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-preflight-"));
  try {
    const python = path.join(dir, "python3");
    fs.writeFileSync(python, `#!/bin/bash\nprintf '%s\\n' 'usage: sglang serve [-h]' '  --model-path MODEL_PATH' '  --speculative-algorithm SPECULATIVE_ALGORITHM'\n`, { mode: 0o755 });
    const script = renderPreflightScript({ label: "l", host: "h", stack: "s", unitName: "u", python, flags: ["--model-path", "--speculative-draft-window-size"], paths: [{ what: "model.path", path: dir }], gpus: [], bounds: BOUNDS });
    const r = spawnSync("bash", ["-c", script], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /does not accept --speculative-draft-window-size \(older SGLang releases spell it --speculative-dflash-draft-window-size and hide it from --help; a flag map can name that\)/);
    assert.doesNotMatch(r.stdout + r.stderr, /--model-path \(/, "a flag the host has is not named");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 26: after a destroy, /run/dflash-sglang/host.lock.note still named a stack and looked
// like a held lock. The note names the holder while the lock is held, and goes with it.
test("the host lock's note names the holder while held and is gone once the step exits; EXIT hooks run in order", () => {
  const run = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-lock-"));
  try {
    const r = inBash(transaction, `export SSH_CLIENT="10.0.0.5 40000 22"; run=${run}; lock_wait=1; lock; cat "$run/host.lock.note"; at_exit second; second() { echo "second hook ran; note: $(cat "$run/host.lock.note" 2>/dev/null || echo gone)"; }; exit 0`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^stack "b16t4-w2048" \(unit sglang-k26, from 10\.0\.0\.5, since \d{4}-/m);
    assert.match(r.stdout, /second hook ran; note: gone/, "the note's hook ran first, then the second");
    assert.ok(!fs.existsSync(path.join(run, "host.lock.note")), "no note left behind");
    assert.ok(fs.existsSync(path.join(run, "host.lock")), "the lock file itself stays (flock needs it; it holds nothing)");
  } finally {
    fs.rmSync(run, { recursive: true, force: true });
  }
});

// Issue 23: through sudo (host.become), the note also names the SSH user the operator came as.
test("the note of a step that came through sudo names the SSH user too", () => {
  const run = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-lock-"));
  try {
    const r = inBash(transaction, `export SSH_CLIENT="10.0.0.9 40000 22" SUDO_USER=deploy; run=${run}; lock_wait=1; lock; cat "$run/host.lock.note"; exit 0`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^stack "b16t4-w2048" \(unit sglang-k26, from 10\.0\.0\.9 as deploy, since \d{4}-/m);
  } finally {
    fs.rmSync(run, { recursive: true, force: true });
  }
});

// Issue 41, item 6: the lock was a 0644 file in a 0755 folder, which any local user could flock.
test("the lock's folder is made 0700 with 0600 files (the lock, its note, the rollout's note and claim), and an older version's rights are put right", () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-lock-"));
  try {
    const run = path.join(base, "run");
    const fresh = inBash(transaction, `umask 022; run=${run}; lock_wait=1; handover_s=45; lock; begin_rollout; stat -c '%a %n' "$run" "$run"/* | sed "s#$run#RUN#"`);
    assert.equal(fresh.code, 0, fresh.stderr);
    assert.deepEqual(fresh.stdout.trim().split("\n"), ["700 RUN", "600 RUN/host.lock", "600 RUN/host.lock.note", "600 RUN/rollout", "600 RUN/rollout.due"]);
    // An older version's folder: 0755, with 0644 files.
    const old = inBash(transaction, `chmod 0755 ${run} && chmod 0644 ${run}/*; run=${run}; lock_wait=1; lock; stat -c '%a %n' "$run" "$run"/* | sed "s#$run#RUN#"`);
    assert.equal(old.code, 0, old.stderr);
    assert.deepEqual(old.stdout.trim().split("\n"), ["700 RUN", "600 RUN/host.lock", "600 RUN/host.lock.note", "600 RUN/rollout", "600 RUN/rollout.due"]);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test("a lock held by a process that is not ours is named by its pid, user and command, even beside a stale note; our own holder by its note", () => {
  const run = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-lock-"));
  try {
    const foreign = (setup: string) =>
      inBash(transaction, `run=${run}; lock_wait=1; ${setup}; flock -o "$run/host.lock" sleep 20 >/dev/null 2>&1 & f=$!; until [ -n "$(lock_holders)" ]; do sleep 0.05; done; (lock); echo "rc=$?"; kill "$f"; rm -f "$run/host.lock.note"`);
    const bare = foreign(":");
    assert.match(bare.stdout, /^rc=3$/m);
    assert.match(bare.stderr, /^FAILED: the deployment lock of 127\.0\.0\.10 is held by pid (\d+) of user root \(flock -o \/\S+\/host\.lock sleep 20\), which is not a dflash-sglang deployment; waited 1 s for it \(safety\.lockWaitSeconds\)\. Nothing was changed\./m);
    // The note of a holder SIGKILLed earlier names a process that no longer holds the lock.
    const stale = foreign(`printf '%s\\npid %s\\n' 'stack "ghost" (unit sglang-k26, from 10.0.0.1, since then)' 999999 > "$run/host.lock.note"`);
    assert.match(stale.stderr, /held by pid \d+ of user root \(flock -o \S+ sleep 20\), which is not a dflash-sglang deployment/);
    assert.doesNotMatch(stale.stderr, /ghost/);
    // An older version's note (one line, no process) while root holds the lock: that version's holder.
    const older = foreign(`echo 'stack "older" (unit sglang-k26, from 10.0.0.1, since then)' > "$run/host.lock.note"`);
    assert.match(older.stderr, /FAILED: 127\.0\.0\.10 is being reconfigured by stack "older" \(unit sglang-k26/);
    // Our own holder (a transaction that holds it), named by its note.
    const ours = inBash(transaction, `export SSH_CLIENT="10.0.0.7 1 22"; run=${run}; lock_wait=1; (lock; sleep 3) >/dev/null 2>&1 & until grep -q '^pid ' "$run/host.lock.note" 2>/dev/null; do sleep 0.05; done; (stack=other; lock); echo "rc=$?"; wait`);
    assert.match(ours.stdout, /^rc=3$/m);
    assert.match(ours.stderr, /FAILED: 127\.0\.0\.10 is being reconfigured by stack "b16t4-w2048" \(unit sglang-k26, from 10\.0\.0\.7, since \d{4}-/);
  } finally {
    fs.rmSync(run, { recursive: true, force: true });
  }
});

// Issue 41, item 5: a step killed by SIGKILL (a power cut) never ran the EXIT hook that removes its copies.
test("taking the lock removes the copies of secrets an interrupted step left, of any unit and any stack; the live files stay", () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-secrets-"));
  try {
    const body = `run=${base}/run secrets_dir=${base}/etc state_root=${base}/lib lock_wait=1; mkdir -p $secrets_dir $state_root/other/last-good.secrets.dflash-tmp; ` +
      `touch $secrets_dir/other-unit.secrets.yaml.dflash-new $secrets_dir/sglang-k26.env.dflash-tmp $secrets_dir/sglang-k26.env $secrets_dir/other-unit.curl-headers; lock; ls -A $secrets_dir $state_root/other`;
    const r = inBash(transaction, body);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${base}/etc:\nother-unit.curl-headers\nsglang-k26.env\n\n${base}/lib/other:\n`);
    assert.match(r.stderr, /removed \S+\/etc\/other-unit\.secrets\.yaml\.dflash-new, a copy of a secret that an interrupted step left/);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test("a removal's check: every secret file of the unit (live, copies, the known-good's) is removed, or it fails naming those it could not remove", () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-secrets-"));
  try {
    const setup = `secrets_dir=${base}/etc state_root=${base}/lib; mkdir -p $secrets_dir $state_root/u/last-good.secrets; touch $secrets_dir/u.env $secrets_dir/u.curl-headers.dflash-new $secrets_dir/u.x.env $secrets_dir/v.env`;
    const removed = inBash(transaction, `${setup}; no_secrets_left u; echo "rc=$?"; ls -A $secrets_dir $state_root/u`);
    assert.equal(removed.stdout, `rc=0\n${base}/etc:\nu.x.env\nv.env\n\n${base}/lib/u:\n`, "another unit's files (u.x is not u) stay");
    const stuck = inBash(transaction, `${setup}; rm() { :; }; no_secrets_left u; echo "rc=$?"`);
    assert.equal(stuck.stdout, "rc=1\n");
    assert.equal(stuck.stderr, `FAILED: could not remove the secret files of u on 127.0.0.10: ${base}/etc/u.curl-headers.dflash-new ${base}/etc/u.env ${base}/lib/u/last-good.secrets; remove them by hand.\n`);
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

// Check before you stop: a server of ours under another unit name holds the GPUs from GPU 0.
test("another server of ours active on the node (or waiting for its GPUs in a recovery) is found by its unit file, named with its stack; this unit, a unit of no stack and a stopped one are not", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-units-"));
  try {
    fs.writeFileSync(path.join(dir, "sglang-k26.service"), "[Unit]\nX-DFlash-Stack=a\n");
    fs.writeFileSync(path.join(dir, "sglang-k26-renamed.service"), "[Unit]\nX-DFlash-Stack=b\n");
    fs.writeFileSync(path.join(dir, "sglang-other.service"), "[Unit]\nX-DFlash-Stack=c\n");
    fs.writeFileSync(path.join(dir, "nginx.service"), "[Unit]\nDescription=web\n");
    // A systemctl that says "active" for the renamed unit and nginx, "inactive" for the others.
    const systemctl = `case "$2" in sglang-k26-renamed.service|nginx.service) echo active;; *) echo inactive;; esac`;
    const body = (extra: string) => `live=${dir}/sglang-k26.service unit=sglang-k26.service; systemctl() { ${systemctl}; }; ${extra}`;
    const found = inBash(transaction, body(`other_server && other_stack "$(other_server)"`));
    assert.equal(found.stdout, "sglang-k26-renamed (stack b)\nb\n");
    fs.rmSync(path.join(dir, "sglang-k26-renamed.service"));
    assert.equal(inBash(transaction, body("other_server")).code, 1, "nginx names no stack; sglang-other is stopped");
    // Stopped, but its recovery waits for the GPUs to start it: it will hold them.
    const recovering = `live=${dir}/sglang-k26.service unit=sglang-k26.service; systemctl() { case "$2" in dflash-recover-sglang-other.service) echo active;; *) echo inactive;; esac; }; other_server`;
    assert.equal(inBash(transaction, recovering).stdout, "sglang-other (stack c)\n");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Campaign seed 3009 (issue 18): an engine killed while it proved a restart left its rollout
// note, which kept every other stack off the host for minutes though nobody proved anything.
test("a rollout note keeps other stacks off the host while its claim lasts (renewed by whoever proves it), and not once the claim runs out", () => {
  const run = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-run-"));
  try {
    // Claims count seconds since boot (issue 60: a step of the wall clock moves no claim).
    const UP = "$(cut -d. -f1 /proc/uptime)";
    const holder = (setup: string) => inBash(transaction, `run=${run}; ${setup}; rollout_holder`);
    const note = (s: string, validFor = 600) => `echo "${s} sglang-k26.service $(( ${UP} + ${validFor} )) stack \\"${s}\\" (unit sglang-k26, from 127.0.0.1, since now)" > ${run}/rollout; rm -f ${run}/rollout.due`;
    const due = (inSeconds: number, s = "other") => `echo "$(( ${UP} + ${inSeconds} )) ${s} sglang-k26.service" > ${run}/rollout.due`;
    // Claimed: the moments before the readiness step, or renewed by it.
    assert.match(holder(`${note("other")}; ${due(30)}`).stdout, /stack "other" .*proving its restart\)/);
    // The claim ran out: nobody proves it (its engine is gone).
    const gone = holder(`${note("other")}; ${due(-5)}`);
    assert.equal(gone.stdout, "");
    assert.match(gone.stderr, /the restart of stack other \(sglang-k26\) on 127\.0\.0\.10 has had no one proving it since \d{4}-\d\d-\d\dT[\d:]+Z \(its engine is gone\): not waiting for it/);
    // Claimed, the note holds past its own expiry (a long rollback); without a claim of its own
    // (an older script's note, or a claim left for another note) it counts until it expires.
    assert.match(holder(`${note("other", -1)}; ${due(30)}`).stdout, /proving its restart/);
    assert.match(holder(note("other")).stdout, /proving its restart/);
    assert.match(holder(`${note("other")}; ${due(-5, "third")}`).stdout, /proving its restart/);
    assert.equal(holder(`${note("other", -1)}; ${due(-5, "third")}`).stdout, "");
    // An older script's note and claim, in epoch seconds: they count until they expire, on the wall clock.
    const epochNote = (validFor: number) => `echo "other sglang-k26.service $(( $(date +%s) + ${validFor} )) stack \\"other\\" (unit sglang-k26, from 127.0.0.1, since now)" > ${run}/rollout; rm -f ${run}/rollout.due`;
    assert.match(holder(epochNote(600)).stdout, /proving its restart/);
    assert.equal(holder(epochNote(-1)).stdout, "");
    assert.match(holder(`${epochNote(-1)}; echo "$(( $(date +%s) + 30 )) other sglang-k26.service" > ${run}/rollout.due`).stdout, /proving its restart/);
    const epochGone = holder(`${epochNote(600)}; echo "$(( $(date +%s) - 5 )) other sglang-k26.service" > ${run}/rollout.due`);
    assert.equal(epochGone.stdout, "");
    assert.match(epochGone.stderr, /has had no one proving it since \d{4}-\d\d-\d\dT[\d:]+Z/);
    // This stack's own: nothing.
    assert.equal(holder(`${note("b16t4-w2048")}; ${due(30, "b16t4-w2048")}`).stdout, "");
    // begin_rollout claims the note for the handover to readiness; end_rollout takes both away.
    const begun = inBash(transaction, `run=${run}; handover_s=45; begin_rollout; read -r d ds du < ${run}/rollout.due; echo "$(( d - ${UP} )) $ds $du"; end_rollout; ls ${run}`);
    assert.match(begun.stdout.trim(), /^4[45] b16t4-w2048 sglang-k26\.service$/, begun.stderr);
    // \`prove\` renews the claim of this stack's note while its input is open, and ends when the input ends
    // or once the note has gone.
    const proved = inBash(
      transaction,
      // Each step awaits its condition ("@@taken": the claim is written; the end of the process),
      // the last bounded by 10 s: on a loaded machine nothing here is a race.
      `run=${run}; keeper_beat=0.2; keeper_grace=40; stack=mine; ${note("mine")}; ${due(-100, "mine")}; gone() { case "$(ps -p "$1" -o stat= 2>/dev/null)" in ""|Z*) return 0 ;; esac; return 1; }; ` +
        `main prove < <(sleep 1.5) > ${run}/out & p1=$!; until grep -q '^@@taken' ${run}/out 2>/dev/null; do sleep 0.05; done; read -r d _ < ${run}/rollout.due; echo "$(( d - ${UP} ))"; wait "$p1"; cat ${run}/out; ` +
        `(main prove < <(sleep 30 >/dev/null 2>&1) > ${run}/out2 & echo $! > ${run}/pid); until grep -q '^@@taken' ${run}/out2 2>/dev/null; do sleep 0.05; done; rm ${run}/rollout; ` +
        `for _ in $(seq 200); do gone "$(cat ${run}/pid)" && break; sleep 0.05; done; if gone "$(cat ${run}/pid)"; then echo ended; else echo still; fi`,
    );
    const lines = proved.stdout.trim().split("\n");
    assert.deepEqual(lines.slice(1), ["@@keeping", "@@taken", "ended"], proved.stderr);
    // A claim about keeper_grace (40 s) ahead, not the -100 it was: read right after it was written.
    assert.match(lines[0], /^(3[89]|40)$/);
  } finally {
    fs.rmSync(run, { recursive: true, force: true });
  }
});

// Issue 41, item 1: a wedged driver (nvidia-smi never answers) or a stuck `--help` held preflight,
// and so `up`, forever. Every host command has a bound; a hung one is named.
test("preflight: a hung nvidia-smi or `--help` is killed at its bound (timeouts.commandSeconds, helpSeconds) and named; nothing is staged", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-preflight-"));
  const stack = `hung-${process.pid}`;
  try {
    const help = "usage: sglang serve [-h] [--tp-size TP_SIZE]";
    const python = path.join(dir, "python");
    const answers = `#!/bin/bash\necho ${JSON.stringify(help)}\n`;
    const hangs = "#!/bin/bash\nexec sleep 600\n";
    const smiAnswers = "#!/bin/bash\nprintf '0, 0, 81559\\n1, 0, 81559\\n'\n";
    const checked = { label: "u (stack s)", host: "127.0.0.10", stack, unitName: "u", python, flags: ["--tp-size"], paths: [], gpus: [0, 1], bounds: { commandSeconds: 1, helpSeconds: 1 } };
    const run = (pythonText: string, smiText: string, script = renderPreflightScript(checked)) => {
      fs.writeFileSync(python, pythonText, { mode: 0o755 });
      fs.writeFileSync(path.join(dir, "nvidia-smi"), smiText, { mode: 0o755 });
      return spawnSync("bash", ["-s"], { input: script, encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    };
    const smi = run(answers, hangs);
    assert.equal(smi.status, 1, smi.stdout + smi.stderr);
    assert.match(smi.stderr, /^ {2}- nvidia-smi did not answer within 1 s \(timeouts\.commandSeconds\) and was killed: the GPU driver looks wedged\./m);
    const helpHung = run(hangs, smiAnswers);
    assert.equal(helpHung.status, 1, helpHung.stdout + helpHung.stderr);
    assert.match(helpHung.stderr, /^ {2}- `.*\/python -m sglang\.launch_server --help` did not answer within 1 s \(timeouts\.helpSeconds\) and was killed/m);
    const staging = run(answers, hangs, renderStageScript({ ...checked, unitText: "[Unit]\n", transaction, helpers: {} }));
    assert.equal(staging.status, 1);
    assert.match(staging.stderr, /nvidia-smi did not answer within 1 s/);
    assert.equal(fs.existsSync(stageDir("u", stack)), false, "nothing staged");
    assert.equal(run(answers, smiAnswers).status, 0, "both answering: preflight passes");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("GPU wait: a hung nvidia-smi reads as busy (killed at cmd_s), and the wait ends at its deadline", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-gpus-"));
  try {
    fs.writeFileSync(path.join(dir, "nvidia-smi"), "#!/bin/bash\nexec sleep 600\n", { mode: 0o755 });
    fs.writeFileSync(path.join(dir, "t.sh"), transaction);
    const w = spawnSync("bash", ["-c", `source ${dir}/t.sh; gpus=0,1 gpu_s=0 cmd_s=1 poll=0.01; wait_gpus`], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    assert.equal(w.status, 1, w.stdout + w.stderr);
    assert.match(w.stderr, /GPU 0: not listed by nvidia-smi, GPU 1: not listed by nvidia-smi; timeouts\.gpuReleaseSeconds/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The unit's own ExecStartPre read an empty or failed answer as "free" (issue 41, item 1).
test("the unit's wait-gpus-free: a failed, hung or empty nvidia-smi reads as busy; free GPUs pass; other GPUs do not count", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-helper-"));
  try {
    const helper = path.join(dir, "wait-gpus-free");
    fs.writeFileSync(helper, helperScripts()["wait-gpus-free"], { mode: 0o755 });
    const run = (smi: string, gpus = "4,5") => {
      fs.writeFileSync(path.join(dir, "nvidia-smi"), smi, { mode: 0o755 });
      return spawnSync(helper, [gpus, "1024", "0", "1"], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    };
    const rows = "#!/bin/bash\nprintf '0, 80000\\n4, 3\\n5, 0\\n'\n";
    assert.equal(run(rows).status, 0, "GPUs 4 and 5 are free; GPU 0's use does not count");
    assert.equal(run(rows, "0,4").status, 1);
    for (const smi of ["#!/bin/bash\nexit 9\n", "#!/bin/bash\nexec sleep 600\n", "#!/bin/bash\n", "#!/bin/bash\nprintf '4, [N/A]\\n5, 0\\n'\n"]) {
      const r = run(smi);
      assert.equal(r.status, 1, `${smi}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /GPU memory still in use after 0s: GPU 4/);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a systemctl that does not answer is killed at cmd_s and named; the unit then reads as running, never as gone", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-systemctl-"));
  try {
    fs.writeFileSync(path.join(dir, "t.sh"), transaction);
    fs.writeFileSync(path.join(dir, "systemctl"), "#!/bin/bash\nexec sleep 600\n", { mode: 0o755 });
    const r = spawnSync("bash", ["-c", `source ${dir}/t.sh; cmd_s=1; if running; then echo RUNNING; else echo GONE; fi`], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    assert.equal(r.stdout.trim(), "RUNNING");
    assert.match(r.stderr, /`systemctl show sglang-k26\.service -p ActiveState --value` did not answer within 1 s on 127\.0\.0\.10 \(timeouts\.commandSeconds\) and was killed/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// A group's ranks restart by themselves (render.ts, Restart=always); a step of ours that stops
// them holds that off on its node, or an old rank would start again and join the new ones.
test("a group's step holds systemd's restarts of its units off, in /run, and lets go at its end or at the install", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-hold-"));
  try {
    fs.writeFileSync(path.join(dir, "t.sh"), transaction);
    fs.writeFileSync(path.join(dir, "systemctl"), `#!/bin/bash
echo "$*" >> ${dir}/calls
`, { mode: 0o755 });
    const sh = (body: string) => spawnSync("bash", ["-c", `source ${dir}/t.sh; hold_root=${dir}/run; cmd_s=5; ${body}`], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    const calls = () => (fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n") : []);
    const hold = (u: string) => path.join(dir, "run", `${u}.d`, "50-dflash-hold.conf");
    // One node: nothing to hold (its unit has Restart=no).
    assert.equal(sh("group_size=1; hold_restarts sglang-k26.service; ls -A $hold_root 2>/dev/null | wc -l").stdout.trim(), "0");
    assert.deepEqual(calls(), []);
    // A group: both the unit and the one a rename replaces, read while the step runs; gone at its end.
    const r = sh(`group_size=2; replaced=old-name; hold_restarts "$unit" old-name.service && cat ${hold("sglang-k26.service")} ${hold("old-name.service")}`);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, "[Service]\nRestart=no\n[Service]\nRestart=no\n");
    assert.ok(!fs.existsSync(hold("sglang-k26.service")) && !fs.existsSync(hold("old-name.service")), "released at the step's exit");
    assert.ok(!fs.existsSync(path.join(dir, "run", "sglang-k26.service.d")), "its folder too");
    assert.deepEqual(calls(), ["daemon-reload", "daemon-reload"], "systemd reads the hold, then its release");
    // The install of the new unit drops the hold (the new rank restarts by itself), without a reload of its own.
    fs.rmSync(path.join(dir, "calls"));
    const i = sh(`group_size=2; hold_restarts "$unit"; drop_holds; [ -e ${hold("sglang-k26.service")} ] && echo HELD || echo FREE`);
    assert.equal(i.stdout.trim(), "FREE");
    assert.deepEqual(calls(), ["daemon-reload"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 41, item 9: a rollback whose install fails (a full disk) stopped the old server and said nothing of it.
test("a rollback that cannot install the previous configuration says HOST DOWN", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-restore-"));
  try {
    const state = path.join(dir, "state");
    // Its known-good generation (host/generations.sh).
    fs.mkdirSync(path.join(state, "generations", "1", "secrets"), { recursive: true });
    fs.writeFileSync(path.join(state, "generations", "1", "unit.service"), "[Unit]\n");
    fs.symlinkSync("generations/1", path.join(state, "known-good"));
    fs.writeFileSync(path.join(dir, "t.sh"), transaction);
    for (const cmd of ["systemctl", "nvidia-smi"]) fs.writeFileSync(path.join(dir, cmd), cmd === "nvidia-smi" ? "#!/bin/bash\nprintf '0, 0\\n1, 0\\n2, 0\\n3, 0\\n4, 0\\n5, 0\\n6, 0\\n7, 0\\n'\n" : "#!/bin/bash\nexit 0\n", { mode: 0o755 });
    const body = `source ${dir}/t.sh; state=${state}; secrets_dir=${dir}/secrets; install_unit() { echo "No space left on device" >&2; return 1; }; restore_known_good 0000; echo "rc=$?"`;
    const r = spawnSync("bash", ["-c", body], { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, timeout: 60_000 });
    assert.match(r.stdout, /^ROLLBACK FAILED, HOST DOWN: could not install and start the previous configuration of sglang-k26 on 127\.0\.0\.10/m, r.stdout + r.stderr);
    assert.match(r.stdout, /^rc=2$/m);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
