// Issue 63, item 1: a typo in model.extraArgs (`--mem-fraciton-static`) was refused with
// "Set sglangBuild to the build installed on the host", on a host that ran that build. A flag
// only model.extraArgs names is the user's word: preflight names it as model.extraArgs', with
// the nearest flag the host's --help lists (host/closest.awk, the rule of closest() in
// simhost/command-line.ts), and the fix is to correct model.extraArgs; the sglangBuild advice
// stays for the flags the tool derives. Preflight runs in bash against a fake `python` whose
// --help lists every flag the tool derives for the stack (the host runs that build).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseDeployment } from "../../../components/sglang-service/schema";
import { extraArgsFlags, launchFlags, NO_SECRETS } from "../../../components/sglang-service/render";
import { preflightInput, renderPreflightScript } from "../../../components/sglang-service/script";
import { hostFile } from "../../../components/sglang-service/hostScript";
import { closest } from "../../../simhost/command-line";
import { testStackConfig } from "./stackConfig";

function deployment(extraArgs: string[]) {
  const raw = testStackConfig("b8t4-w2048");
  raw.model = { ...(raw.model as object), extraArgs };
  return parseDeployment(raw, "b8t4-w2048");
}

/** Runs the stand-alone preflight of `d` against a host whose --help lists `listed`. */
function preflight(d: ReturnType<typeof deployment>, listed: string[]): { status: number | null; stdout: string; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-extra-args-"));
  try {
    const help = ["usage: sglang serve [-h]", ...listed.map((f) => `  ${f} VALUE   some help text`)].join("\n");
    fs.writeFileSync(path.join(dir, "help.txt"), `${help}\n`);
    fs.writeFileSync(path.join(dir, "python"), `#!/bin/bash\n[ "$*" = "-m sglang.launch_server --help" ] && cat ${JSON.stringify(path.join(dir, "help.txt"))}\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(dir, "nvidia-smi"), "#!/bin/bash\nfor i in 0 1 2 3 4 5 6 7; do echo \"$i, 0, 81559\"; done\n", { mode: 0o755 });
    const checked = { ...preflightInput(d, "b8t4-w2048", "sglang-k26 (stack b8t4-w2048)", "127.0.0.10", NO_SECRETS), python: path.join(dir, "python"), paths: [] };
    const r = spawnSync("bash", ["-s"], { input: renderPreflightScript(checked), encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test("only the flags model.extraArgs alone names are the user's", () => {
  const d = deployment(["--mem-fraciton-static", "0.8", "--enable-metrics", "--cuda-graph-max-bs=8"]);
  assert.deepEqual(extraArgsFlags(d), ["--cuda-graph-max-bs", "--mem-fraciton-static"], "--enable-metrics is the tool's too");
  assert.deepEqual(extraArgsFlags(deployment([])), []);
});

test("preflight: a typo in model.extraArgs is named as model.extraArgs', with the nearest flag of the host's --help, and the fix is to correct model.extraArgs", () => {
  const d = deployment(["--mem-fraciton-static", "0.8", "--no-such-thing-at-all"]);
  const tools = launchFlags(d).filter((f) => !extraArgsFlags(d).includes(f));
  // The host runs the build the stack names: every flag the tool derives is listed.
  const r = preflight(d, [...tools, "--mem-fraction-static", "--cuda-graph-max-bs"]);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  const problems = r.stderr.split("\n").filter((l) => l.startsWith("  - "));
  assert.deepEqual(problems, [
    "  - model.extraArgs: --mem-fraciton-static is not a flag of the SGLang on 127.0.0.10 (did you mean --mem-fraction-static?). Correct model.extraArgs: it passes its words to the server as they are.",
    "  - model.extraArgs: --no-such-thing-at-all is not a flag of the SGLang on 127.0.0.10 (its --help lists no such flag). Correct model.extraArgs (it passes its words to the server as they are), or install an SGLang that has the flag.",
  ]);
  assert.doesNotMatch(r.stderr, /sglangBuild|DDTree|simulated host/);
});

test("preflight: a flag the tool derives keeps the sglangBuild advice beside a typo of model.extraArgs", () => {
  const d = deployment(["--mem-fraciton-static", "0.8"]);
  const tools = launchFlags(d).filter((f) => !extraArgsFlags(d).includes(f) && f !== "--speculative-ddtree-budget");
  const r = preflight(d, [...tools, "--mem-fraction-static", "--speculative-ddtree-budgets"]);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /^ {2}- model\.extraArgs: --mem-fraciton-static is not a flag of the SGLang on 127\.0\.0\.10 \(did you mean --mem-fraction-static\?\)\. Correct model\.extraArgs/m);
  assert.match(r.stderr, /^ {2}- the installed SGLang does not accept --speculative-ddtree-budget \(checked against its --help\)\. Set sglangBuild to the build installed on the host/m);
  assert.doesNotMatch(r.stderr, /does not accept [^\n]*--mem-fraciton-static/, "the typo is not offered a build");
});

test("host/closest.awk answers as closest() does (the one rule of 'did you mean', on the host and here)", () => {
  const awk = hostFile("closest.awk");
  const flags = ["--mem-fraction-static", "--max-running-requests", "--cuda-graph-max-bs", "--context-length", "--tp-size", "--tp", "--port", "--host", "--speculative-ddtree-budget", "--speculative-draft-window-size", "--enable-metrics", "--quantization"];
  const words = ["--mem-fraciton-static", "--mem-fraction", "--tp-size-x", "--tp-sise", "--prot", "--cuda-graph-maxbs", "--speculative-ddtree-budgte", "--zzzzzzzzzzzz", "--contxt-length", "--h", "--enable-metric", "--quantisation", "--speculative-draft-windowsize", "-", "", "--cuda-graph-max-batch-size", "--speculative-draft-window-length", "--max-running-reqs-total"];
  // And generated ones: each word mutated at random (a fixed seed), against shuffled candidates.
  let seed = 63;
  const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  for (let k = 0; k < 150; k++) {
    const w = flags[rand(flags.length)].split("");
    for (let e = rand(5); e > 0; e--) {
      const at = rand(w.length + 1);
      const c = "abcdefgrst-"[rand(11)];
      [() => w.splice(at, 1), () => w.splice(at, 0, c), () => (w[at] = c)][rand(3)]();
    }
    words.push(w.join(""));
  }
  for (const word of words) {
    const candidates = [...flags].sort(() => rand(3) - 1);
    const r = spawnSync("awk", [awk], { input: `${candidates.join("\n")}\n`, encoding: "utf8", env: { ...process.env, word } });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), closest(word, candidates) ?? "", `${JSON.stringify(word)} among ${candidates.join(" ")}`);
  }
});
