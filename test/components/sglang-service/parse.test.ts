// Parsers of what GPU hosts print, fed recorded-looking output.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { SGLANG_LINES, startupArgsLine } from "../../../simhost/sim/sglang/lines";
import {
  causeExcerpt,
  failureCause,
  journalLines,
  listenerPids,
  parseCurlWithStatus,
  parseMainAge,
  parseSystemctlShow,
  phaseFromEvidence,
  publicServerArgs,
  redactSecrets,
  splitSections,
  unitState,
} from "../../../components/sglang-service/parse";

const SYSTEMCTL_SHOW = `LoadState=loaded
ActiveState=activating
SubState=start-post
MainPID=4121
NRestarts=0
ExecMainStatus=0
ExecMainStartTimestampMonotonic=8123456789
InvocationID=5b0f2c8e4a1d4f1e9b7d2e6c3a9f8b10
StatusText=
Environment=SGLANG_DDTREE_MAX_TOPK=4 CUDA_DEVICE_ORDER=PCI_BUS_ID
ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --port=30001 ; ignore_errors=no ; start_time=[Sat 2025-11-29 08:30:02 UTC] ; stop_time=[n/a] ; pid=4121 ; code=(null) ; status=0/0 }
`;

test("systemctl show: key=value lines, values keep their own '=' signs", () => {
  const show = parseSystemctlShow(SYSTEMCTL_SHOW);
  assert.equal(show.ActiveState, "activating");
  assert.equal(show.Environment, "SGLANG_DDTREE_MAX_TOPK=4 CUDA_DEVICE_ORDER=PCI_BUS_ID");
  assert.equal(
    show.ExecStart,
    "{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --port=30001 ; ignore_errors=no ; start_time=[Sat 2025-11-29 08:30:02 UTC] ; stop_time=[n/a] ; pid=4121 ; code=(null) ; status=0/0 }",
  );
  assert.equal(show.StatusText, "", "an empty value is kept as empty");
  assert.equal(Object.keys(show).length, 11);
});

test("unit state from systemctl show, with 'unknown' and 0 for what is missing", () => {
  assert.deepEqual(unitState(parseSystemctlShow(SYSTEMCTL_SHOW)), {
    activeState: "activating",
    subState: "start-post",
    mainPid: 4121,
    nRestarts: 0,
    execMainStatus: 0,
    execMainStartTimestampMonotonic: 8123456789,
    loadState: "loaded",
  });
  // A unit that was never installed.
  assert.deepEqual(unitState(parseSystemctlShow("LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=\nExecMainStatus=203\n")), {
    activeState: "inactive",
    subState: "dead",
    mainPid: 0,
    nRestarts: 0,
    execMainStatus: 203,
    execMainStartTimestampMonotonic: 0,
    loadState: "not-found",
  });
});

const SS = [
  'LISTEN 0      2048         127.0.0.3:30000      0.0.0.0:*    users:(("python3",pid=4121,fd=25))',
  'LISTEN 0      4096              [::]:30000         [::]:*    users:(("sglang::schedul",pid=4188,fd=31),("python3",pid=4190,fd=26))',
  'LISTEN 0      128            0.0.0.0:22         0.0.0.0:*    users:(("sshd",pid=612,fd=3))',
  'LISTEN 0      511          127.0.0.1:3000       0.0.0.0:*    users:(("node",pid=999,fd=19))',
  'LISTEN 0      511          127.0.0.1:130000     0.0.0.0:*    users:(("odd",pid=998,fd=19))',
  "",
].join("\n");

test("ss -ltnpH: pids listening on the port, IPv4 and IPv6, two pids on one socket", () => {
  assert.deepEqual(listenerPids(SS, 30000), [4121, 4188, 4190]);
  assert.deepEqual(listenerPids(SS.split("\n")[0], 30000), [4121], "127.0.0.N:30000");
  assert.deepEqual(listenerPids(SS, 3000), [999], "port 3000 is not port 30000 and vice versa");
  assert.deepEqual(listenerPids(SS, 22), [612]);
  assert.deepEqual(listenerPids("", 30000), []);
});

test("sections split at @@section markers; text before the first marker is dropped", () => {
  const out = splitSections(`Warning: noise\n@@section show\nActiveState=active\nMainPID=4121\n@@section listen\n@@section info\n{"port": 30001}\n`);
  assert.deepEqual(out, { show: "ActiveState=active\nMainPID=4121", listen: "", info: '{"port": 30001}\n' });
  assert.deepEqual(splitSections("no markers\n"), {});
});

test("the readiness probe's age line: the main process's start on the host's clock and its age to a tenth; nothing without both", () => {
  assert.deepEqual(parseMainAge("1796558632.72 61.27\n"), { mainStartedAt: 1796558632.72 - 61.27, mainAgeSeconds: 61.3 });
  assert.deepEqual(parseMainAge("1796558632 61"), { mainStartedAt: 1796558571, mainAgeSeconds: 61 }, "whole seconds still read");
  assert.deepEqual(parseMainAge("1796558632.72 "), {}, "no main process (MainPID 0): no age");
  assert.deepEqual(parseMainAge(""), {});
  assert.deepEqual(parseMainAge(undefined), {});
  assert.deepEqual(parseMainAge("1796558632.72 -3"), {}, "not a number the probe prints");
  assert.deepEqual(parseMainAge("0 12.5"), {}, "a clock that could not be read");
  assert.deepEqual(parseMainAge("1796558632.72 61.27 9"), {});
});

const OOM_JOURNAL = `Nov 29 08:31:02 gpu-host-1 python3[4121]: [2025-11-29 08:31:02 TP3] Load weight begin. avail mem=78.91 GB
Nov 29 08:31:11 gpu-host-1 python3[4121]: [2025-11-29 08:31:11 TP3] Scheduler hit an exception: Traceback (most recent call last):
Nov 29 08:31:11 gpu-host-1 python3[4121]:   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 2312, in run_scheduler_process
Nov 29 08:31:11 gpu-host-1 python3[4121]:     scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)
Nov 29 08:31:11 gpu-host-1 python3[4121]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.05 GiB is free. Process 3890 has 77.9 GiB memory in use.
Nov 29 08:31:12 gpu-host-1 systemd[1]: sglang-k26.service: Main process exited, code=exited, status=1/FAILURE
Nov 29 08:31:12 gpu-host-1 systemd[1]: sglang-k26.service: Failed with result 'exit-code'.`;

test("failure cause: CUDA OOM in journal format names the GPU and the allocation", () => {
  const cause = failureCause(OOM_JOURNAL);
  assert.ok(cause !== undefined);
  assert.match(cause, /^CUDA out of memory on GPU 3 \(/);
  assert.match(cause, /Tried to allocate 2\.00 GiB/);
  // The older PyTorch wording, as `journalctl -o cat` prints it (no prefix).
  assert.match(failureCause("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 5; 79.15 GiB total capacity; 77.90 GiB already allocated)") ?? "", /^CUDA out of memory on GPU 5 /);
});

// sgl-project/sglang python/sglang/srt/server_args.py prepare_server_args: prog "sglang serve".
test("failure cause: `sglang serve: error:` for an unknown flag, a bad choice and a bad value, one line each", () => {
  const journal = `Nov 29 08:30:03 gpu-host-1 python3[4121]: usage: sglang serve [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]
Nov 29 08:30:03 gpu-host-1 python3[4121]: sglang serve: error: unrecognized arguments: --speculative-ddtree-budget 8
Nov 29 08:30:03 gpu-host-1 systemd[1]: sglang-k26.service: Main process exited, code=exited, status=2/INVALIDARGUMENT`;
  assert.equal(failureCause(journal), "the installed SGLang does not accept: --speculative-ddtree-budget 8");
  assert.equal(
    failureCause("usage: sglang serve [-h]\nsglang serve: error: argument --quantization: invalid choice: 'fp3' (choose from 'fp8', 'awq')"),
    "SGLang rejected its arguments: argument --quantization: invalid choice: 'fp3' (choose from 'fp8', 'awq')",
  );
  assert.equal(failureCause("sglang serve: error: argument --tp-size: invalid int value: 'eight'"), "SGLang rejected its arguments: argument --tp-size: invalid int value: 'eight'");
});

// Memory failures at load (srt/model_executor/model_runner.py; the memory pool set-up in
// model_runner_kv_cache_mixin.py / pool_configurator.py in newer trees).
test("failure cause: SGLang's own two out-of-memory wordings, one line each", () => {
  const pool = failureCause("Traceback (most recent call last):\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88") ?? "";
  assert.match(pool, /^out of GPU memory: no room left for the KV cache after the weights \(SGLang: "Not enough memory\. Please try to increase --mem-fraction-static"; Current value: mem_fraction_static=0\.88\)/);
  assert.equal(pool.includes("\n"), false);
  const old = failureCause("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.") ?? "";
  assert.match(old, /^out of GPU memory: no room left for the KV cache/);
  const unbalanced = failureCause("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=41.2, local_gpu_memory=94.5, local_gpu_memory * 0.9=85.05") ?? "";
  assert.equal(unbalanced, 'out of GPU memory: some GPUs have much less free memory than others, probably held by other processes (SGLang: "The memory capacity is unbalanced"; pre_model_load_memory=41.2, local_gpu_memory=94.5, local_gpu_memory * 0.9=85.05)');
});

test("failure cause: argparse rejecting flags the installed SGLang lacks (older builds: launch_server.py)", () => {
  const journal = `Nov 29 08:30:03 gpu-host-1 python3[4121]: usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]
Nov 29 08:30:03 gpu-host-1 python3[4121]: launch_server.py: error: unrecognized arguments: --speculative-ddtree-budget 8 --speculative-dflash-compact-cache
Nov 29 08:30:03 gpu-host-1 systemd[1]: sglang-k26.service: Main process exited, code=exited, status=2/INVALIDARGUMENT`;
  assert.equal(failureCause(journal), "the installed SGLang does not accept: --speculative-ddtree-budget 8 --speculative-dflash-compact-cache");
  assert.equal(
    failureCause("launch_server.py: error: argument --speculative-algorithm: invalid choice: 'DDTREE' (choose from 'EAGLE', 'DFLASH')"),
    "SGLang rejected its arguments: argument --speculative-algorithm: invalid choice: 'DDTREE' (choose from 'EAGLE', 'DFLASH')",
  );
});

test("failure cause: the last exception line of a traceback", () => {
  const journal = `Nov 29 08:30:40 gpu-host-1 python3[4121]: Traceback (most recent call last):
Nov 29 08:30:40 gpu-host-1 python3[4121]:   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/server_args.py", line 611, in __post_init__
Nov 29 08:30:40 gpu-host-1 python3[4121]: ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). window_size=8, block_size=16.
Nov 29 08:30:41 gpu-host-1 systemd[1]: sglang-k26.service: Main process exited, code=exited, status=1/FAILURE`;
  assert.equal(failureCause(journal), "ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). window_size=8, block_size=16.");
});

test("failure cause: GPUs still busy when ExecStartPre gave up", () => {
  const journal = "Nov 29 08:40:00 gpu-host-1 wait-gpus-free[5001]: GPU memory still in use after 300s: GPU 2: 40211 MiB used; \n";
  assert.equal(failureCause(journal), "GPU memory still in use after 300s: GPU 2: 40211 MiB used;");
});

test("failure cause: nothing recognisable gives undefined", () => {
  const journal = `Nov 29 08:30:02 gpu-host-1 systemd[1]: Starting sglang-k26.service - SGLang sglang-k26 (stack b8t4-w2048)...
Nov 29 08:30:09 gpu-host-1 python3[4121]: [2025-11-29 08:30:09] server_args=ServerArgs(model_path='/models/Kimi-K2.6', tp_size=8)
Nov 29 08:31:12 gpu-host-1 systemd[1]: sglang-k26.service: Main process exited, code=killed, status=9/KILL`;
  assert.equal(failureCause(journal), undefined);
  assert.equal(failureCause(""), undefined);
});

// steps.ts reads the journal with `-o cat` (no "host proc[pid]: " prefix), yet every line
// loses everything up to its first "]:", so an exception message with "]:" in it is lost.
test("failure cause: `journalctl -o cat` lines keep text containing ']:'", () => {
  const line = "AssertionError: expert weights missing for layers[3]: model.layers.3.mlp.experts.0.w1";
  assert.equal(failureCause(line), line);
});

test("failure cause: the unit's own readiness gate giving up", () => {
  const journal = "Loading safetensors checkpoint shards:  37% Completed | 23/62\nhttp://127.0.0.1:30000/health_generate not ready after 1860s (last status 000)";
  assert.equal(failureCause(journal), "the unit's readiness gate gave up: http://127.0.0.1:30000/health_generate not ready after 1860 s");
});

test("curl with -w '@@status': body and status apart; no answer is status 0", () => {
  assert.deepEqual(parseCurlWithStatus('{"a":1}\n@@status 200\n'), { body: '{"a":1}', status: 200 });
  assert.deepEqual(parseCurlWithStatus('{"detail":"Not Found"}\n@@status 404'), { body: '{"detail":"Not Found"}', status: 404 });
  assert.deepEqual(parseCurlWithStatus("\n@@status 000\n"), { body: "", status: 0 });
  assert.deepEqual(parseCurlWithStatus(""), { body: "", status: 0 });
});

// /server_info returns api_key, admin_api_key, ssl_keyfile_password in clear (issue #37457).
test("server args kept for state and outputs: the compared ones and a few descriptive ones, never a secret", () => {
  const info = { api_key: "sk-1", admin_api_key: "adm", ssl_keyfile_password: "pw", model_path: "/m", tp_size: 8, speculative_algorithm: "DDTREE", speculative_ddtree_topk: 4, served_model_name: "k", host: "127.0.0.1", internal_states: [{}], version: "0.5" };
  assert.deepEqual(publicServerArgs(info, ["model_path", "tp_size", "speculative_algorithm", "api_key"]), { model_path: "/m", served_model_name: "k", speculative_algorithm: "DDTREE", speculative_ddtree_topk: 4, tp_size: 8, version: "0.5" });
});

test("secrets are masked in journal text shown to users", () => {
  const line = "[2026-11-29 08:30:09] server_args=ServerArgs(model_path='/m', api_key='sk-abc,def', admin_api_key=None, ssl_keyfile_password=\"p'w\", hf_token=hf_abcdefghijkl, tp_size=8)";
  const out = redactSecrets(line);
  assert.equal(out, "[2026-11-29 08:30:09] server_args=ServerArgs(model_path='/m', api_key=<redacted>, admin_api_key=None, ssl_keyfile_password=<redacted>, hf_token=<redacted>, tp_size=8)");
  assert.equal(redactSecrets("Authorization: Bearer sk-xyz"), "Authorization: Bearer <redacted>");
  assert.equal(redactSecrets("token hf_ABCDEFGHIJKLmnop in a message"), "token hf_<redacted> in a message");
});

test("a secret flag that ends its line with a continuation: the next line's first word is masked, the backslash kept", () => {
  const unit = ["ExecStart=/usr/bin/python3 -m sglang.launch_server \\", "    --api-key \\", "    sk-next-line \\", "    --admin-api-key=adm \\", "    --ssl-keyfile-password\t\\", "  pw-next", "    --port 30000"].join("\n");
  assert.equal(
    redactSecrets(unit),
    ["ExecStart=/usr/bin/python3 -m sglang.launch_server \\", "    --api-key \\", "    <redacted> \\", "    --admin-api-key=<redacted> \\", "    --ssl-keyfile-password\t\\", "  <redacted>", "    --port 30000"].join("\n"),
  );
  // As a diff shows it (a leading - or +), and the same text masked twice is the same.
  assert.equal(redactSecrets("-     --api-key \\\n-     sk-x \\"), "-     --api-key \\\n-     <redacted> \\");
  assert.equal(redactSecrets(redactSecrets(unit)), redactSecrets(unit));
  // `--api-key=\` and `--api-key= \`, and lines with no word between flag and value (a bare
  // continuation, a blank line, a comment: systemd allows them inside a continuation).
  for (const between of [[], ["    \\"], [""], ["# the key:"], ["    ; note", "    \\"]]) {
    for (const flag of ["--api-key=\\", "--api-key= \\", "--admin-api-key \\"]) {
      const text = ["ExecStart=/usr/bin/python3 -m sglang.launch_server \\", `    ${flag}`, ...between, "    sk-hidden-1 \\", "    --port 30000"].join("\r\n");
      const out = redactSecrets(text);
      assert.doesNotMatch(out, /sk-hidden-1/, `${JSON.stringify(between)} ${flag}:\n${out}`);
      assert.match(out, /--port 30000/);
    }
  }
});

// SGLang main logs `server_args` as a dict (resolved_dict()), with launch_command the joined argv.
test("secrets are masked in SGLang main's dict start-up line, in JSON and in a logged command line", () => {
  const dict = "server_args={'model_path': '/m', 'api_key': 'sk-abc,d\\'ef', 'admin_api_key': None, 'ssl_keyfile_password': \"p'w\", 'tp_size': 8, 'launch_command': 'python3 -m sglang.launch_server --api-key sk-abc --admin-api-key=adm1 --port 30001'}";
  const out = redactSecrets(dict);
  assert.equal(out, "server_args={'model_path': '/m', 'api_key': '<redacted>', 'admin_api_key': None, 'ssl_keyfile_password': '<redacted>', 'tp_size': 8, 'launch_command': 'python3 -m sglang.launch_server --api-key <redacted> --admin-api-key=<redacted> --port 30001'}");
  assert.doesNotMatch(out, /sk-abc|adm1|p'w/);
  assert.equal(redactSecrets('{"api_key": "sk-json", "hf_token": null, "port": 1}'), '{"api_key": "<redacted>", "hf_token": null, "port": 1}');
});


// Wordings of SGLang main (issue 20): srt/model_executor/cuda_graph_runner.py (capture
// failure), srt/speculative/spec_info.py (unknown algorithm), server_args_config_parser.py
// (a --config key with a deprecated alias, sgl-project/sglang#36326).
test("failure cause: a CUDA graph capture failure, an unknown algorithm on main, a refused --config key", () => {
  const graph = failureCause("Traceback (most recent call last):\nException: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.\nPossible solutions: a smaller --mem-fraction-static") ?? "";
  assert.match(graph, /^CUDA graph capture failed \(CUDA out of memory\. Tried to allocate 2\.00 GiB\.\); lower model\.memFractionStatic/);
  assert.equal(failureCause("ValueError: Unknown speculative algorithm name: DDTREE"), "the installed SGLang does not know the speculative algorithm DDTREE: check speculative.algorithm and sglangBuild");
  assert.equal(failureCause("KeyError: 'DDTREE'"), "KeyError: 'DDTREE'", "an older release's enum lookup: the exception as it is");
  assert.match(failureCause("ValueError: Unsupported config option 'speculative-draft-window-size' with action 'DeprecatedAliasStoreAction'") ?? "", /^SGLang refused the key speculative-draft-window-size in its --config file/);
});

// The start-up line as each SGLang the simulator follows prints it (simhost/sim/sglang/lines.ts:
// srt/entrypoints/engine.py, a dataclass repr in the release, resolved_dict() on main).
test("masking: the start-up line of the release and of main, with every secret argument SGLang logs", () => {
  const args = { model_path: "/models/Kimi-K2.6", api_key: "sk-live-0123", admin_api_key: "adm-4567", ssl_keyfile_password: "pw-89", tp_size: 8, launch_command: "python3 -m sglang.launch_server --api-key sk-live-0123 --port 30001" };
  for (const line of SGLANG_LINES) {
    const out = redactSecrets(`[2026-12-01 10:00:00] ${startupArgsLine(line, args)}`);
    for (const secret of ["sk-live-0123", "adm-4567", "pw-89"]) assert.equal(out.includes(secret), false, `${line}: ${out}`);
    assert.match(out, /model_path.*Kimi-K2\.6/, "the rest stays readable");
  }
  // Python's repr quotes a value holding ' (and no ") with "; one holding both with ', escaped.
  for (const key of ["sk-it's-1", `sk-"q"'s-2`, 'sk-"q"-3']) {
    for (const line of SGLANG_LINES) {
      const out = redactSecrets(startupArgsLine(line, { api_key: key, port: 1 }));
      assert.equal(out.includes(key.slice(0, 5)) && /sk-(it|"q")/.test(out), false, `${line}: ${out}`);
      assert.match(out, /port.*1/);
    }
  }
  assert.equal(redactSecrets("authorization: bearer sk-lower"), "authorization: bearer <redacted>", "SGLang takes any case of bearer");
  assert.equal(redactSecrets("x-api-key: sk-header"), "x-api-key: <redacted>");
  // As a client's headers print: JSON and Python dict forms; nothing of the key is left.
  for (const text of ['{"x-api-key": "sk-header"}', "{'X-API-Key': 'sk-header'}", "x-api-key=sk-header"]) {
    const out = redactSecrets(text);
    assert.doesNotMatch(out, /sk-|header/, `${text} -> ${out}`);
    assert.match(out, /<redacted>/);
  }
});

// "Unbalanced" whether fatal (the default) or a warning before torch's OOM (the check switched
// off): the cause is memory another process holds (model_runner.py init_torch_distributed).
test("failure cause: an unbalanced warning followed by an OOM names the imbalance", () => {
  const journal = [
    "[2026-12-01 10:00:00 TP0] WARNING The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=41.20",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 3 has a total capacity of 94.50 GiB of which 2.00 GiB is free.",
  ].join("\n");
  assert.match(failureCause(journal) ?? "", /^out of GPU memory: some GPUs have much less free memory than others.*"The memory capacity is unbalanced".*, then CUDA out of memory on GPU 3$/);
  // A warning followed by another error: the later error is the cause, not the warning.
  const graph = failureCause([journal.split("\n")[0], "Exception: Capture cuda graph failed: out of resources"].join("\n")) ?? "";
  assert.match(graph, /^CUDA graph capture failed \(out of resources\)/);
});

// Issue 59: what real SGLang prints, read in its source.

// srt/model_executor/cuda_graph_runner.py wraps torch's own OOM text, "GPU N has a total capacity".
test("failure cause: a CUDA graph capture that ran out of memory is named as the graph's, not as a plain OOM", () => {
  const journal = `[2026-12-06 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 380, in __init__
Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 95.59 GiB of which 1.20 GiB is free.
Possible solutions:
1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)`;
  assert.match(failureCause(journal) ?? "", /^CUDA graph capture failed \(CUDA out of memory\. Tried to allocate 2\.00 GiB\. GPU 0 has a total capacity .*\); lower model\.memFractionStatic or add --cuda-graph-max-bs/);
});

/** A scheduler's traceback of `frames` frames ending in `error`, as rank `rank` prints it. */
const rankTraceback = (rank: number, frames: number, error: string) => [
  `[2026-12-06 10:00:0${rank} TP${rank}] Scheduler hit an exception: Traceback (most recent call last):`,
  ...Array.from({ length: frames }, (_, i) => [`  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/f${i}.py", line ${100 + i}, in f${i}`, `    f${i + 1}()`]).flat(),
  error,
];

// With TP 8 the failing rank prints its traceback, then every other rank its own (their
// collectives abort), then the main process its SIGQUIT line and NCCL its warnings: the cause is
// more than 40 lines before the end, and the last exception is a consequence.
test("failure cause: with TP 8, the first rank's exception, not the NCCL aborts after it", () => {
  const lines = [
    ...rankTraceback(3, 12, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 3 has a total capacity of 95.59 GiB of which 2.00 GiB is free."),
    ...[0, 1, 2, 4, 5, 6, 7].flatMap((r) => rankTraceback(r, 12, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5")),
    "[2026-12-06 10:00:09] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
    ...[0, 1, 2].map((r) => `[rank${r}]:[W1206 10:00:09.123456 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.`),
  ];
  assert.ok(lines.length - lines.findIndex((l) => l.startsWith("torch.OutOfMemoryError")) > 40);
  assert.match(failureCause(lines.join("\n")) ?? "", /^CUDA out of memory on GPU 3 \(Tried to allocate 8\.00 GiB/);
  // Shown beside the journal's last lines, which hold none of it.
  const excerpt = causeExcerpt(lines, 12);
  assert.equal(excerpt.length, 5);
  assert.match(excerpt[0], /TP3\] Scheduler hit an exception/);
  assert.match(excerpt[4], /^torch\.OutOfMemoryError/);
  assert.deepEqual(causeExcerpt(lines.slice(0, 30), 12), [], "within the last lines already");
  // Not a known kind: the first rank's exception line itself.
  const other = [...rankTraceback(0, 3, "RuntimeError: CUDA error: an illegal memory access was encountered"), ...rankTraceback(1, 3, "torch.distributed.DistBackendError: NCCL error in: x")];
  assert.equal(failureCause(other.join("\n")), "RuntimeError: CUDA error: an illegal memory access was encountered");
});

test("journal lines: `-o short-monotonic` keeps the host's monotonic time, other forms none", () => {
  assert.deepEqual(journalLines("[  812.345678] gpu-host-1 sglang-k26[4121]: [2026-12-06 10:00:00] The server is fired up and ready to roll!\n\nplain line"), [
    { text: "[2026-12-06 10:00:00] The server is fired up and ready to roll!", monotonic: 812.345678 },
    { text: "plain line" },
  ]);
});

// A crash 5 s after SGLang's own ready line, on a machine too loaded for the tool to have seen
// it ready: the phase comes from the journal, not from the tool's last look.
test("a failure's phase: from the host's journal when it shows a later phase than the tool's last look", () => {
  const journal = journalLines(
    [
      "[  100.000000] h sglang[1]: [2026-12-06 10:00:00 TP0] Load weight begin. avail mem=95.59 GB",
      "[  130.000000] h sglang[1]: INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
      "[  131.500000] h sglang[1]: [2026-12-06 10:00:31] The server is fired up and ready to roll!",
      "[  136.600000] h sglang[1]: [2026-12-06 10:00:36 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    ].join("\n"),
  );
  assert.equal(phaseFromEvidence("loading weights (port not open yet)", journal), 'serving, 5.1 s after becoming ready (SGLang logged "The server is fired up and ready to roll!"; the tool had not yet proved it)');
  assert.equal(phaseFromEvidence("starting (activating/start)", journal.slice(0, 2)), "warming up (SGLang's port had opened: uvicorn's \"Uvicorn running on\")");
  assert.equal(phaseFromEvidence("starting (activating/start)", journal.slice(0, 1)), 'loading weights (SGLang logged "Load weight begin")');
  // What the journal cannot show, or the tool already saw, stays.
  assert.equal(phaseFromEvidence("the first 10 s after becoming ready", journal), "the first 10 s after becoming ready");
  assert.equal(phaseFromEvidence("waiting for GPUs to be free (ExecStartPre)", []), "waiting for GPUs to be free (ExecStartPre)");
  assert.equal(phaseFromEvidence("serving, but with other arguments: tp_size=4 (want 8)", journal), "serving, but with other arguments: tp_size=4 (want 8)");
});
