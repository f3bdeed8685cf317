// The messages a user sees when a stack's configuration is wrong, pinned word for word,
// and the defaults and committed stacks that must keep parsing.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { z } from "zod";
import { BUILD_PRESETS, ConfigError, deploymentSchema, parseDeployment, replacedObjectNote } from "../../../components/sglang-service/schema";
import { projectConfig, stackConfig, stackNames, withTestAddress } from "./stackConfig";
import { gpuIndices } from "../../../components/sglang-service/render";

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
      "Fix it in stacks/Pulumi.b16t4-w2048.yaml (or the project config in Pulumi.yaml), e.g. `npx pulumi config set --path --stack b16t4-w2048 <key> <value>`.",
    ].join("\n"),
  );
});

test("a missing required section is reported by its key", () => {
  const raw = validRaw();
  delete raw.model;
  assert.deepEqual(problemLines(raw), ["  - dflash-sglang:model: is required"]);
});

test("an unknown key is named, with the section it is in and the keys that section knows", () => {
  const raw = validRaw();
  raw.speculative = { ...DDTREE, budgt: 8 };
  assert.deepEqual(problemLines(raw), ['  - dflash-sglang:speculative: speculative has unknown key(s) "budgt"; valid keys: algorithm, draftTokens, budget, topk, draftWindowSize, compactCache']);
  raw.speculative = DDTREE;
  raw.benchmark = { run: 2 };
  assert.deepEqual(problemLines(raw), [
    '  - dflash-sglang:benchmark: benchmark has unknown key(s) "run"; valid keys: enabled, runId, runs, warmupRuns, maxTokens, shortPromptTokens, longContextTokens, concurrency, coding, codingMaxTokens, timeoutSeconds',
  ]);
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
    "  - dflash-sglang:host.address: host.address is still the documented placeholder: set it to your GPU host (`npx pulumi config set --path host.address <addr>`)",
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
  assert.deepEqual(d.timeouts, { drainSeconds: 300, drainPolicy: "fail", stopSeconds: 120, gpuReleaseSeconds: 300, readySeconds: 1800, commandSeconds: 30, helpSeconds: 180, rebootSeconds: 900, gpuFreeMiB: 1024, pollMs: 250 });
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
  for (const draftWindowSize of [null, "2048", 0, 2.5, 10_000_001]) {
    assert.deepEqual(problemLines({ ...validRaw(), speculative: { ...DDTREE, draftWindowSize } }), ['  - dflash-sglang:speculative.draftWindowSize: speculative.draftWindowSize must be a whole number of tokens from 1 to 10000000 (e.g. 2048) or "none"'], String(draftWindowSize));
  }
  for (const sglangBuild of ["fork", 3, null, ["upstream"]]) {
    assert.deepEqual(problemLines({ ...validRaw(), sglangBuild }), [
      '  - dflash-sglang:sglangBuild: sglangBuild must be "upstream", "ddtree-fork", or {flags: {...}} naming each flag of your build (a flag name such as "--speculative-ddtree-budget", or null where the build lacks it; see flagMapSchema in components/sglang-service/schema.ts)',
    ], JSON.stringify(sglangBuild));
  }
});

test("a value with the form of one alternative of a union is checked as that alternative: {flags: ...} names the flag", () => {
  assert.deepEqual(problemLines({ ...validRaw(), sglangBuild: { flags: { budget: 3 } } }), [
    '  - dflash-sglang:sglangBuild.flags.budget: sglangBuild.flags.budget must be a flag name such as "--speculative-ddtree-budget", or null where the build lacks it',
  ]);
  assert.deepEqual(problemLines({ ...validRaw(), sglangBuild: { flags: { algorithm: "--algo" } } }), [
    '  - dflash-sglang:sglangBuild.flags.algorithm: sglangBuild.flags.algorithm must be "--speculative-algorithm" (every build spells it so)',
  ]);
  assert.deepEqual(problemLines({ ...validRaw(), sglangBuild: { flag: {} } }), [
    "  - dflash-sglang:sglangBuild.flags: is required",
    '  - dflash-sglang:sglangBuild: sglangBuild has unknown key(s) "flag"; valid keys: flags',
  ]);
});

test("an enum says which values it takes", () => {
  const raw = validRaw();
  const cases: [string, string, Raw, string][] = [
    ["speculative", "algorithm", { ...DDTREE, algorithm: "EAGLE" }, 'speculative.algorithm must be one of "DFLASH", "DDTREE", or null (no speculative decoding)'],
    ["timeouts", "drainPolicy", { drainPolicy: "wait" }, 'timeouts.drainPolicy must be one of "fail", "proceed"'],
    ["model", "quantization", { ...raw.model, quantization: "int4" }, 'model.quantization must be one of "fp8", "awq", "gptq", "compressed-tensors", "moe_wna16", "w8a8_fp8", "modelopt_fp4"'],
  ];
  for (const [section, key, value, message] of cases) {
    assert.deepEqual(problemLines({ ...raw, [section]: value }), [`  - dflash-sglang:${section}.${key}: ${message}`]);
  }
});

// Every key of the schema, walked from the schema itself so that a key added later is
// covered too: a value of the wrong type gets a message that names the key and says
// what is valid, never zod's generic text.
interface Leaf {
  path: string[];
  /** The key the message must name (the list's or the mapping's for their entries). */
  named: string;
  kind: string;
  nullable: boolean;
}

function leaves(schema: z.ZodType, path: string[], named: string, nullable = false): Leaf[] {
  const def = schema.def as unknown as { type: string; innerType: z.ZodType; element: z.ZodType; valueType: z.ZodType; options: z.ZodType[]; shape: Record<string, z.ZodType> };
  const here: Leaf = { path, named, kind: def.type, nullable };
  switch (def.type) {
    case "default":
    case "optional":
      return leaves(def.innerType, path, named, nullable);
    case "nullable":
      return leaves(def.innerType, path, named, true);
    case "object":
      return [here, ...Object.entries(def.shape).flatMap(([key, child]) => leaves(child, [...path, key], key))];
    case "array":
      return [here, ...leaves(def.element, [...path, "0"], named)];
    case "record":
      return [here, ...leaves(def.valueType, [...path, "SOME_NAME"], named)];
    case "union":
      // The alternatives share the union's path; a mapping alternative adds keys under it.
      return [here, ...def.options.filter((o) => o.def.type === "object").flatMap((o) => leaves(o, path, named).slice(1))];
    default:
      return [here];
  }
}

function wrongValues(leaf: Leaf): unknown[] {
  const nullIfInvalid = leaf.nullable ? [] : [null];
  switch (leaf.kind) {
    case "string":
      return [42, ...nullIfInvalid];
    case "number":
      return ["12", ...nullIfInvalid];
    case "boolean":
      return ["yes", ...nullIfInvalid];
    case "enum":
      return [42, "NOT-AN-OPTION", ...nullIfInvalid];
    case "literal":
      return ["--something-else", ...nullIfInvalid];
    case "union":
      return [true, "2048x", ...nullIfInvalid];
    case "array":
    case "record":
    case "object":
      return ["text", 12, ...nullIfInvalid];
    default:
      throw new Error(`no wrong value for a ${leaf.kind} at ${leaf.path.join(".")}: teach this test the new kind`);
  }
}

/** validRaw() with `value` at `path`, the containers on the way made valid. */
function withValueAt(path: string[], value: unknown): Raw {
  const raw = validRaw();
  raw.nodes = [structuredClone(raw.host)];
  if (path[0] === "sglangBuild" && path.length > 1) raw.sglangBuild = { flags: { ...BUILD_PRESETS["ddtree-fork"] } };
  let at: Raw = raw;
  for (const [i, key] of path.slice(0, -1).entries()) {
    at[key] ??= path[i + 1] === "0" ? [] : {};
    at = at[key];
  }
  at[path[path.length - 1]] = value;
  return raw;
}

const GENERIC = /Invalid (input|option|element|key|string|number)|Too (small|big)|Unrecognized key|expected [a-z]+, received|Required/;

test("every key refuses a wrong-typed value with a message that names it and says what is valid", () => {
  const all = leaves(deploymentSchema, [], "").filter((l) => l.path.length > 0);
  assert.ok(all.length > 60, `the walk found only ${all.length} keys`);
  for (const leaf of all) {
    for (const value of wrongValues(leaf)) {
      const what = `${leaf.path.join(".")} = ${JSON.stringify(value)}`;
      const lines = problemLines(withValueAt(leaf.path, value));
      for (const line of lines) assert.doesNotMatch(line, GENERIC, what);
      const own = lines.filter((l) => l.startsWith(`  - dflash-sglang:${leaf.path.join(".")}: `));
      assert.ok(own.length > 0, `${what}: a problem at the key, got\n${lines.join("\n")}`);
      // The value's own problem comes first; cross-field rules may add more at the key.
      const message = own[0].slice(own[0].indexOf(": ") + 2);
      assert.match(message, / must /, `${what}: says what is valid`);
      assert.ok(message.includes(leaf.named), `${what}: the message names ${leaf.named}: ${message}`);
    }
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
  assert.match(problemLines({ ...raw, nodes: [{ ...raw.host, address: "-oProxyCommand=x" }], model: { ...raw.model, tpSize: 16 } }).join("\n"), /dflash-sglang:nodes\.0\.address: nodes\[N\]\.address must not begin with "-"/);
  assert.match(problemLines({ ...raw, service: { ...raw.service, listenAddress: "-h" } }).join("\n"), /dflash-sglang:service\.listenAddress: service\.listenAddress must not begin with "-"/);
  assert.match(problemLines({ ...raw, model: { ...raw.model, servedModelName: "--api-key=x" } }).join("\n"), /dflash-sglang:model\.servedModelName: model\.servedModelName must not begin with "-"/);
  // Still accepted: names, IPv4, IPv6.
  for (const address of ["gpu-01.lab", "10.0.0.5", "fe80::1%eth0", "::1"]) parseDeployment({ ...raw, host: { ...raw.host, address } }, STACK);
});

// A secret as a plain setting would be in the unit, the stack file and state in clear.
test("a secret in model.extraArgs or service.environment is refused, naming the secret setting to use instead", () => {
  const raw = validRaw();
  raw.model = { ...raw.model, extraArgs: ["--cuda-graph-max-bs", "8", "--api-key", "sk-1", "--admin-api-key=adm"] };
  raw.service = { ...(raw.service ?? {}), environment: { HF_TOKEN: "hf_x", WANDB_API_KEY: "w", SGLANG_LOG_LEVEL: "info" } };
  assert.deepEqual(problemLines(raw), [
    "  - dflash-sglang:model.extraArgs.2: model.extraArgs must not carry --api-key: its value would be in the unit file, the stack file and state in clear. Set the secret apiKey instead (npx pulumi config set --secret apiKey ...)",
    "  - dflash-sglang:model.extraArgs.4: model.extraArgs must not carry --admin-api-key: its value would be in the unit file, the stack file and state in clear. This tool has no secret setting for it yet; leave it out",
    "  - dflash-sglang:service.environment.HF_TOKEN: service.environment.HF_TOKEN looks like a secret: it would be in the unit file, the stack file and state in clear. Set the secret hfToken instead (npx pulumi config set --secret hfToken ...)",
    "  - dflash-sglang:service.environment.WANDB_API_KEY: service.environment.WANDB_API_KEY looks like a secret: it would be in the unit file, the stack file and state in clear. This tool passes only hfToken and apiKey as secrets; leave it out",
  ]);
});

// Issue 59: SGLang's drain counts and its ready line are logger.info (srt/managers/
// tokenizer_manager.py, srt/entrypoints/http_server.py): a level above info hides what the tool reads.
test("a --log-level above info in model.extraArgs is refused, saying what it would hide; info and debug pass", () => {
  const raw = validRaw();
  for (const words of [["--log-level", "warning"], ["--log-level=ERROR"], ["--log-level", "Critical"]]) {
    const lines = problemLines({ ...raw, model: { ...raw.model, extraArgs: ["--cuda-graph-max-bs", "8", ...words] } });
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], /^ {2}- dflash-sglang:model\.extraArgs\.2: model\.extraArgs sets --log-level \w+, which hides SGLang's INFO lines this tool reads: the drain's "Remaining number of requests N" .*Leave --log-level out \(info\) or set info or debug/);
  }
  for (const words of [["--log-level", "info"], ["--log-level=debug"], ["--log-level-http", "warning"]]) parseDeployment({ ...raw, model: { ...raw.model, extraArgs: words } }, STACK);
});

// Issue 26, item 4: setting only host.address per stack dropped Pulumi.yaml's whole host
// ("host.hostKey is required") without saying why.
test("a key Pulumi.yaml sets but the stack's own section lacks: the message says the section replaced the project's whole", () => {
  const raw = validRaw();
  raw.host = { address: "10.0.0.5" };
  const project = { host: { address: "gpu-host.example.invalid", user: "root", privateKeyPath: "/root/.ssh/id_ed25519", hostKey: "ssh-ed25519 AAAA" } };
  let message = "";
  try {
    parseDeployment(raw, "b16t4-w2048", project);
  } catch (e) {
    message = (e as Error).message;
  }
  assert.match(message, /^ {2}- dflash-sglang:host\.hostKey: is required \(Pulumi\.yaml sets host\.hostKey, but stacks\/Pulumi\.b16t4-w2048\.yaml sets dflash-sglang:host itself, which replaces Pulumi\.yaml's whole host: Pulumi merges no objects\. Set it in the stack too: `npx pulumi config set --path --stack b16t4-w2048 host\.hostKey <value>`\)$/m);
  // A key the project does not set either: no such note.
  assert.equal(replacedObjectNote(["model", "path"], project, "s"), "");
  assert.equal(replacedObjectNote(["host"], project, "s"), "", "a whole section");
});

// Issue 23: hosts where root cannot log in.
test("host.become and nodes[N].become: \"sudo\" or left out; anything else, or a misspelt key, is refused naming what is valid", () => {
  const raw = validRaw();
  assert.equal(parseDeployment(raw, STACK).host.become, undefined, "root by default: no become");
  const d = parseDeployment({ ...raw, host: { ...raw.host, user: "ubuntu", become: "sudo" }, nodes: [{ ...raw.host, user: "admin", become: "sudo" }], model: { ...raw.model, tpSize: 16 } }, STACK);
  assert.deepEqual([d.host.user, d.host.become, d.nodes[0].user, d.nodes[0].become], ["ubuntu", "sudo", "admin", "sudo"]);
  assert.deepEqual(problemLines({ ...raw, host: { ...raw.host, become: "su" } }), [
    '  - dflash-sglang:host.become: host.become must be one of "sudo" (run the host steps as root through sudo -n), or left out when the user is root',
  ]);
  assert.deepEqual(problemLines({ ...raw, host: { ...raw.host, become: true } }), [
    '  - dflash-sglang:host.become: host.become must be one of "sudo" (run the host steps as root through sudo -n), or left out when the user is root',
  ]);
  assert.deepEqual(problemLines({ ...raw, host: { ...raw.host, becomeMethod: "sudo" } }), [
    '  - dflash-sglang:host: host has unknown key(s) "becomeMethod"; valid keys: address, port, user, become, privateKeyPath, hostKey',
  ]);
  assert.match(problemLines({ ...raw, nodes: [{ ...raw.host, become: "doas" }], model: { ...raw.model, tpSize: 16 } }).join("\n"), /dflash-sglang:nodes\.0\.become: nodes\[N\]\.become must be one of "sudo"/);
});

// Issue 41, item 7: the GPU waits used GPUs 0..tp-1 whatever CUDA_VISIBLE_DEVICES chose.
test("CUDA_VISIBLE_DEVICES chooses the GPUs the waits watch; one that names fewer GPUs than a node needs, or no GPU index, is refused", () => {
  const raw = validRaw();
  const withVisible = (value: string, tpSize = 4) => ({ ...raw, model: { ...(raw.model as object), tpSize }, service: { ...(raw.service ?? {}), environment: { CUDA_VISIBLE_DEVICES: value } } });
  assert.deepEqual(gpuIndices(parseDeployment(withVisible("4,5,6,7"), STACK)), [4, 5, 6, 7]);
  assert.deepEqual(gpuIndices(parseDeployment(withVisible("7,6,5,4,3"), STACK)), [7, 6, 5, 4], "the first tpSize of them, in CUDA's order");
  assert.deepEqual(gpuIndices(parseDeployment({ ...raw, model: { ...(raw.model as object), tpSize: 4 } }, STACK)), [0, 1, 2, 3]);
  assert.deepEqual(problemLines(withVisible("4,5")), [
    "  - dflash-sglang:service.environment.CUDA_VISIBLE_DEVICES: service.environment.CUDA_VISIBLE_DEVICES lists 2 GPU(s) (4,5) but each node needs 4 (model.tpSize 4 over 1 node(s)); list at least that many",
  ]);
  assert.match(problemLines(withVisible("GPU-8f3a,GPU-1b2c")).join("\n"), /CUDA_VISIBLE_DEVICES is "GPU-8f3a,GPU-1b2c"; it must be a comma list of GPU indices as nvidia-smi numbers them/);
  assert.match(problemLines(withVisible("4,4,5,6")).join("\n"), /it must be each GPU index once/);
});
