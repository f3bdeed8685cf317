// The messages a user sees when a stack's configuration is wrong, pinned word for word,
// and the defaults and committed stacks that must keep parsing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { ConfigError, parseDeployment } from "../../../components/sglang-service/schema";
import { projectConfig, stackConfig, stackNames, withTestAddress } from "./stackConfig";

const STACK = "b8t4-w2048";
const DDTREE = { algorithm: "DDTREE", budget: 8, topk: 4, draftWindowSize: 2048, compactCache: true };

type Raw = Record<string, any>;

/** Project config with a usable address and a valid DDTREE speculative section. */
function validRaw(): Raw {
  return withTestAddress({ ...projectConfig(), speculative: DDTREE });
}

/** The ConfigError's message, failing the test if parsing succeeds or throws anything else. */
function configError(raw: Raw, stack = STACK): string {
  let thrown: unknown;
  try {
    parseDeployment(raw, stack);
  } catch (e) {
    thrown = e;
  }
  assert.ok(thrown instanceof ConfigError, `expected a ConfigError, got ${thrown === undefined ? "a parsed deployment" : String(thrown)}`);
  const message = thrown.message;
  assert.ok(message.includes(`"${stack}"`), `message names the stack: ${message}`);
  return message;
}

/** The per-problem lines of the message ("  - dflash-sglang:<key>: <what to do>"). */
function problemLines(raw: Raw, stack = STACK): string[] {
  const lines = configError(raw, stack)
    .split("\n")
    .filter((l) => l.startsWith("  - "));
  for (const l of lines) assert.match(l, /^ {2}- dflash-sglang:[A-Za-z]/, "each problem names its config key");
  return lines;
}

test("the whole message names the stack, says nothing changed, and how to fix it", () => {
  const raw = validRaw();
  delete raw.model.path;
  assert.equal(
    configError(raw, "b16t4-w2048"),
    [
      'Invalid configuration for stack "b16t4-w2048" (nothing was changed on any host):',
      "  - dflash-sglang:model.path: is required",
      "Fix it in stacks/Pulumi.b16t4-w2048.yaml (or the project config in Pulumi.yaml), e.g. `npm run pulumi -- config set --path --stack b16t4-w2048 <key> <value>`.",
    ].join("\n"),
  );
});

test("a missing required section is reported by its key", () => {
  const raw = validRaw();
  delete raw.model;
  assert.deepEqual(problemLines(raw), ["  - dflash-sglang:model: is required"]);
});

test("an unknown key is named, with the section it is in", () => {
  const raw = validRaw();
  raw.speculative = { ...DDTREE, budgt: 8 };
  assert.deepEqual(problemLines(raw), ['  - dflash-sglang:speculative: has unknown key(s) "budgt"']);
});

test("topk above budget", () => {
  const raw = validRaw();
  raw.speculative = { ...DDTREE, budget: 4, topk: 6 };
  assert.deepEqual(problemLines(raw), ["  - dflash-sglang:speculative.topk: speculative.topk (6) must be <= speculative.budget (4): lower topk or raise budget"]);
});

test("a draft window smaller than the draft tokens per step", () => {
  const raw = validRaw();
  raw.speculative = { ...DDTREE, draftWindowSize: 8 };
  assert.deepEqual(problemLines(raw), ['  - dflash-sglang:speculative.draftWindowSize: speculative.draftWindowSize (8) must be >= the draft tokens per step (16), or "none"']);
  raw.speculative = { ...DDTREE, draftTokens: 32, draftWindowSize: 24 };
  assert.deepEqual(problemLines(raw), ['  - dflash-sglang:speculative.draftWindowSize: speculative.draftWindowSize (24) must be >= the draft tokens per step (32), or "none"']);
});

test("compactCache without a draft window", () => {
  const raw = validRaw();
  raw.speculative = { ...DDTREE, draftWindowSize: "none", compactCache: true };
  assert.deepEqual(problemLines(raw), ['  - dflash-sglang:speculative.compactCache: speculative.compactCache needs a draft window (speculative.draftWindowSize), not "none"']);
});

test("DDTREE on the upstream build: every option the build lacks is named", () => {
  const raw = validRaw();
  raw.sglangBuild = "upstream";
  assert.deepEqual(problemLines(raw), [
    '  - dflash-sglang:speculative.algorithm: the "upstream" SGLang build has no DDTREE (it knows DFLASH): set sglangBuild to "ddtree-fork" or a flag map for your build',
    '  - dflash-sglang:speculative.budget: the "upstream" SGLang build has no DDTree budget flag',
    '  - dflash-sglang:speculative.topk: the "upstream" SGLang build has no way to set DDTree topk',
    '  - dflash-sglang:speculative.compactCache: the "upstream" SGLang build has no compact cache flag: set sglangBuild to "ddtree-fork"',
  ]);
});

test("the committed placeholder address is rejected with the command that sets it", () => {
  const raw: Raw = { ...projectConfig(), speculative: DDTREE };
  assert.match(String(raw.host.address), /\.invalid$/, "Pulumi.yaml still ships the placeholder");
  assert.deepEqual(problemLines(raw), [
    "  - dflash-sglang:host.address: host.address is still the documented placeholder: set it to your GPU host (`npm run pulumi -- config set --path host.address <addr>`)",
  ]);
  raw.host = { ...raw.host, address: "GPU-HOST.INVALID" };
  assert.equal(problemLines(raw).length, 1, "the check ignores case");
});

test("a host key that is not an SSH public key line", () => {
  const expected = ['  - dflash-sglang:host.hostKey: host.hostKey must be an SSH public key line such as "ssh-ed25519 AAAA..." (see `ssh-keyscan -t ed25519 HOST`)'];
  for (const hostKey of ["AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholder", "ssh-ed25519", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", "gpu-host ssh-ed25519 AAAAC3Nza"]) {
    const raw = validRaw();
    raw.host.hostKey = hostKey;
    assert.deepEqual(problemLines(raw), expected, hostKey);
  }
  const ok = validRaw();
  ok.host.hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOx7 root@gpu-host-1";
  assert.equal(parseDeployment(ok, STACK).host.hostKey, ok.host.hostKey, "a trailing comment is allowed");
});

test("a newline in model.extraArgs is rejected at its index", () => {
  const raw = validRaw();
  raw.model.extraArgs = ["--cuda-graph-max-bs", "8\nExecStartPre=/bin/rm -rf /"];
  assert.deepEqual(problemLines(raw), ["  - dflash-sglang:model.extraArgs.1: model.extraArgs entry must not contain newlines or control characters"]);
});

test("budget with algorithm DFLASH", () => {
  const raw = validRaw();
  raw.speculative = { algorithm: "DFLASH", budget: 8 };
  assert.deepEqual(problemLines(raw), ["  - dflash-sglang:speculative.budget: speculative.budget only applies to DDTREE: remove it or set speculative.algorithm to DDTREE"]);
});

test("DDTREE without budget and topk (also what omitting speculative gives)", () => {
  const expected = [
    "  - dflash-sglang:speculative.budget: DDTREE needs speculative.budget (the tree's node budget, e.g. 8)",
    "  - dflash-sglang:speculative.topk: DDTREE needs speculative.topk (e.g. 4)",
  ];
  const raw = validRaw();
  raw.speculative = { algorithm: "DDTREE" };
  assert.deepEqual(problemLines(raw), expected);
  delete raw.speculative;
  assert.deepEqual(problemLines(raw), expected);
});

test("problems in different sections are all listed in one error", () => {
  const raw = validRaw();
  delete raw.model.path;
  raw.host.hostKey = "nope";
  raw.service = { port: 0 };
  assert.deepEqual(
    problemLines(raw).map((l) => l.slice(0, l.indexOf(": "))),
    ["  - dflash-sglang:host.hostKey", "  - dflash-sglang:service.port", "  - dflash-sglang:model.path"],
  );
});

// parseDeployment promises "one ConfigError listing every problem", but zod skips the
// cross-field checks (superRefine) while any field is invalid, so a user fixes one batch,
// reruns, and only then learns about topk > budget.
test("cross-field problems are listed together with field problems", () => {
  const raw = validRaw();
  delete raw.model.path;
  raw.speculative = { ...DDTREE, topk: 9 };
  assert.deepEqual(
    problemLines(raw).map((l) => l.slice(0, l.indexOf(": "))),
    ["  - dflash-sglang:model.path", "  - dflash-sglang:speculative.topk"],
  );
});

test("undefined keys count as absent (how Pulumi config hands over unset keys)", () => {
  const raw = validRaw();
  raw.timeouts = undefined;
  raw.service = undefined;
  assert.equal(parseDeployment(raw, STACK).timeouts.readySeconds, 1800);
});

test("defaults: ssh port 22 as root, unit sglang, ddtree-fork build, timeouts", () => {
  const d = parseDeployment(
    {
      host: { address: "127.0.0.10", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOx7" },
      model: { path: "/models/m", drafterPath: "/models/m-dflash" },
      speculative: { algorithm: "DFLASH" },
    },
    STACK,
  );
  assert.equal(d.host.port, 22);
  assert.equal(d.host.user, "root");
  assert.deepEqual(d.service, {
    unitName: "sglang",
    python: "/usr/bin/python3",
    workingDirectory: "/",
    runAs: "root",
    environment: {},
    listenAddress: "127.0.0.1",
    port: 30000,
    distInitPort: 5757,
  });
  assert.deepEqual(d.nodes, [], "one node unless more are listed");
  assert.equal(d.model.tpSize, 8);
  assert.equal(d.model.trustRemoteCode, false);
  assert.deepEqual(d.model.extraArgs, []);
  assert.equal(d.sglangBuild, "ddtree-fork");
  assert.equal(d.speculative.draftWindowSize, "none");
  assert.equal(d.speculative.compactCache, false);
  assert.deepEqual(d.timeouts, { drainSeconds: 300, drainPolicy: "fail", stopSeconds: 120, gpuReleaseSeconds: 300, readySeconds: 1800, gpuFreeMiB: 1024, pollMs: 250 });
});

test("Pulumi.yaml holds the shared config under the dflash-sglang namespace", () => {
  assert.deepEqual(Object.keys(projectConfig()).sort(), ["host", "model", "service", "sglangBuild"]);
});

test("the stacks folder has stack files", () => {
  assert.ok(stackNames().length > 0, "no stacks/Pulumi.<stack>.yaml found");
});

for (const stack of stackNames()) {
  test(`stack ${stack}: Pulumi.yaml + stacks/Pulumi.${stack}.yaml parse once host.address is set`, () => {
    const raw = stackConfig(stack);
    assert.ok(raw.speculative, "the stack file sets dflash-sglang:speculative");
    const d = parseDeployment(withTestAddress(raw), stack);
    assert.equal(d.host.address, "127.0.0.10");
    assert.deepEqual(d.speculative, { ...d.speculative, ...(raw.speculative as Raw) }, "the stack's speculative settings are used as written");
    assert.equal(d.service.unitName, (projectConfig().service as Raw).unitName, "project config fills in what the stack file leaves out");
  });
}

test("a union says what is valid: the draft window and the SGLang build", () => {
  for (const draftWindowSize of [null, "2048", 0, 2.5]) {
    assert.deepEqual(problemLines({ ...validRaw(), speculative: { ...DDTREE, draftWindowSize } }), ['  - dflash-sglang:speculative.draftWindowSize: speculative.draftWindowSize must be a positive whole number of tokens (e.g. 2048) or "none"'], String(draftWindowSize));
  }
  for (const sglangBuild of ["fork", { flags: { budget: 3 } }]) {
    const [line] = problemLines({ ...validRaw(), sglangBuild });
    assert.match(line, /^ {2}- dflash-sglang:sglangBuild: sglangBuild must be "upstream", "ddtree-fork", or \{flags: \{\.\.\.\}\} naming each flag/, JSON.stringify(sglangBuild));
  }
});

// Issue 12, scenario 6: a value that reaches ssh's command line as its destination, or an
// argv word of the server, must not be able to pass as an option (`-oProxyCommand=...`).
test("values that reach a command line cannot begin with '-': host.user, host.address, the nodes, listenAddress, servedModelName", () => {
  const pwn = "-oProxyCommand=touch /tmp/pwned";
  const raw = validRaw();
  assert.deepEqual(problemLines({ ...raw, host: { ...raw.host, user: pwn } }), [
    '  - dflash-sglang:host.user: host.user must be a plain user name (letters, digits, "_", "." and "-", not beginning with "-")',
  ]);
  assert.deepEqual(problemLines({ ...raw, host: { ...raw.host, address: pwn } }), [
    '  - dflash-sglang:host.address: host.address must not begin with "-" (it would be read as a command-line option)',
    "  - dflash-sglang:host.address: host.address must be a host name or an IP address (letters, digits, '.', '-', ':', '[', ']', '%')",
  ]);
  assert.match(problemLines({ ...raw, nodes: [{ ...raw.host, address: "-oProxyCommand=x" }], model: { ...raw.model, tpSize: 16 } }).join("\n"), /dflash-sglang:nodes\.0\.address: host\.address must not begin with "-"/);
  assert.match(problemLines({ ...raw, service: { ...raw.service, listenAddress: "-h" } }).join("\n"), /dflash-sglang:service\.listenAddress: service\.listenAddress must not begin with "-"/);
  assert.match(problemLines({ ...raw, model: { ...raw.model, servedModelName: "--api-key=x" } }).join("\n"), /dflash-sglang:model\.servedModelName: model\.servedModelName must not begin with "-"/);
  // Still accepted: names, IPv4, IPv6.
  for (const address of ["gpu-01.lab", "10.0.0.5", "fe80::1%eth0", "::1"]) parseDeployment({ ...raw, host: { ...raw.host, address } }, STACK);
});
