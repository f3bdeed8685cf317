// Issue 41, item 5: secrets leave no copy. A restart killed (SIGKILL, as a power cut ends it)
// after it read the rotated API key left `*.dflash-new` copies beside the live files: only its
// EXIT hook removed them, the rename that followed removed the old name's files by name, and
// destroy reported success with the key still on the host. Now every step that takes the host
// lock first removes the copies an interrupted step left (any stack, any unit), and a removal
// checks that no secret file of its unit is left.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as hosts from "../../../simhost/hosts";
import { readRepoStackConfig, simHostConfig, simWorkspace, SimWorkspace } from "../../../lib/workspace";
import { hostShell } from "../../support/hostShell";
import { secretPatterns } from "../../../lib/secret-forms";
import { shellQuote } from "../../../components/sglang-service/render";

const HOST = `copies-${process.pid}`;
const FIRST = "sglang-k26";
const SECOND = "sglang-k26-renamed";
const ROTATED = `sk-rotated-${process.pid}`;
let host: hosts.HostInfo;
let ws: SimWorkspace;

const { sh } = hostShell(() => host, FIRST);

before(async () => {
  host = await hosts.start(HOST, { sglang: { profile: "ddtree-fork", loadSeconds: 2, warmupSeconds: 0.3 } });
  ws = simWorkspace({
    main: {
      ...readRepoStackConfig("b8t4-w2048"),
      ...simHostConfig(host, FIRST),
      "dflash-sglang:safety": { stableSeconds: 1 },
      "dflash-sglang:timeouts": { readySeconds: 30, pollMs: 250, gpuReleaseSeconds: 60 },
      "dflash-sglang:benchmark": { enabled: false },
    },
  });
  const stack = await ws.stack("main");
  await stack.setConfig("dflash-sglang:apiKey", { value: `sk-first-${process.pid}`, secret: true });
  assert.equal((await stack.up()).summary.result, "succeeded");
});

after(async () => {
  await hosts.stop(HOST);
  ws?.cleanup();
});

test("a restart killed after it read a rotated key, then a rename, then destroy: no copy of the key is left on the host", async () => {
  const stack = await ws.stack("main");
  // The restart sits in its GPU wait (after it read the secrets) when it is killed.
  hosts.fault(HOST, JSON.stringify({ gpuReleaseDelaySeconds: 30 }));
  await stack.setConfig("dflash-sglang:apiKey", { value: ROTATED, secret: true });
  let output = "";
  let killing: Promise<string> | undefined;
  try {
    await stack
      .up({
        onOutput: (s) => {
          output += s;
          // SIGKILL to every process of the restart's host step: its EXIT hook does not run.
          if (!killing && /waiting for GPU memory to be released/.test(output)) {
            killing = sh(`for u in $(systemctl list-units --no-legend --plain 'dflash-step-${FIRST}-restart-*' | cut -d' ' -f1); do systemctl kill --signal=SIGKILL "$u"; done; sleep 1; ls /etc/dflash-sglang`);
          }
        },
      })
      .catch(() => undefined);
  } finally {
    hosts.fault(HOST, "{}");
  }
  assert.ok(killing, `the restart's GPU wait was never seen; up output:\n${output.slice(-3000)}`);
  assert.match(await killing, /\.dflash-new/, "the killed restart left its copies (the sequence's starting point)");

  // A rename of the unit, then destroy.
  ws.setStackConfig("main", "service", { ...(simHostConfig(host, SECOND)["dflash-sglang:service"] as object) });
  assert.equal((await stack.up()).summary.result, "succeeded");
  assert.equal(await sh("ls /etc/dflash-sglang | grep -c 'dflash-new' || true"), "0", "the rename's steps removed the copies the killed restart left");
  await stack.destroy();
  assert.equal(await sh("ls -A /etc/dflash-sglang 2>/dev/null; true"), "", "no secret file is left after destroy");
  // In every encoding it can take there (plain, JSON, URL, base64 as the restart's stdin carries it).
  const patterns = [...new Set(secretPatterns(ROTATED).map((p) => p.text))].map((t) => `-e ${shellQuote(t)}`).join(" ");
  assert.equal(await sh(`grep -rlF -D skip ${patterns} /etc /var/lib /run /usr/local/lib 2>/dev/null; true`), "", "the rotated key is nowhere on the host");
});
