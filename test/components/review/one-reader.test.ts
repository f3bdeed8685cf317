// One reader of the configuration (issue 58): the subset of YAML that this tool and Pulumi's
// reader (Go yaml.v3) read alike, and the refusal of everything outside it, naming the file,
// the line, the column and what to write instead. The subset is checked against the engine
// itself in one-reader-engine.test.ts.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { AmbiguousYaml, projectOutsideConfig, readConfigYaml, refuseAmbiguousYaml } from "../../../components/review/one-reader";
import { REPO_ROOT } from "../../../lib/pulumi-env";

const refusal = (text: string): AmbiguousYaml | undefined => {
  try {
    refuseAmbiguousYaml(text, "stacks/Pulumi.x.yaml");
    return undefined;
  } catch (e) {
    assert.ok(e instanceof AmbiguousYaml, String(e));
    return e;
  }
};

// Each: the text, the line and column refused, and words of the reason.
const REFUSED: [string, string, number, number, RegExp][] = [
  ["a lone CR in a comment (a line break to Go: a hidden key)", "config:\n  dflash-sglang:speculative:\n    budget: 16 # note\r  dflash-sglang:host: {address: 10.9.9.9}\n", 3, 22, /carriage return \(CR\).*LF line endings/],
  ["CRLF line endings", "config:\r\n  a: 1\r\n", 1, 8, /carriage return/],
  ["NEL in a comment", "config: # x\u0085  nodeargs: --import=x\n", 1, 12, /NEL \(U\+0085\)/],
  ["U+2028 in a comment", "config: # x\u2028main: evil\n", 1, 12, /LINE SEPARATOR \(U\+2028\)/],
  ["U+2029 in a comment", "config: # x\u2029main: evil\n", 1, 12, /PARAGRAPH SEPARATOR \(U\+2029\)/],
  ["a byte-order mark inside", "config:\n  a: 1\n\uFEFFb: 2\n", 3, 1, /byte-order mark/],
  ["a control character", "config:\n  a: \u0007\n", 2, 6, /control character/],
  ["a byte that is not UTF-8", "config:\n  a: \uFFFD\n", 2, 6, /not UTF-8/],
  ["an octal-looking number (384 to Go, 600 to YAML 1.2)", "config:\n  dflash-sglang:timeouts:\n    drainSeconds: 0600\n", 3, 19, /"0600" is a number that YAML readers read differently.*plain decimal/],
  ["a number with _", "config:\n  a: 1_000\n", 2, 6, /"1_000"/],
  ["a hexadecimal number", "config:\n  a: 0x1F\n", 2, 6, /"0x1F"/],
  ["YAML 1.1's sexagesimal", "config:\n  a: 1:30\n", 2, 6, /"1:30"/],
  ["a plus sign", "config:\n  a: +5\n", 2, 6, /"\+5"/],
  ["infinity", "config:\n  a: .inf\n", 2, 6, /"\.inf"/],
  ["an exponent out of range", "config:\n  a: 1e400\n", 2, 6, /"1e400"/],
  ["more digits than JSON keeps", "config:\n  a: 12345678901234567\n", 2, 6, /more digits/],
  ["a date (a time to Go)", "config:\n  a: 2001-12-14\n", 2, 6, /is a date to Pulumi's YAML reader/],
  ["YAML 1.1's yes", "config:\n  a: yes\n", 2, 6, /"yes" reads as a boolean in YAML 1.1/],
  ["a merge key", "config:\n  dflash-sglang:timeouts:\n    <<: {drainSeconds: 1}\n", 3, 5, /merge key \(<<\)/],
  ["an anchor", "config:\n  dflash-sglang:host: &h {address: a}\n", 2, 23, /anchor \(&h\)/],
  ["an alias", "config:\n  a: 1\n  b: *h\n", 3, 6, /alias \(\*h\)/],
  ["a tag", "config:\n  a: !!str 5\n", 2, 6, /a tag/],
  ["an explicit key", "config:\n  ? a\n  : 1\n", 2, 3, /explicit key/],
  ["a second document", "config:\n  a: 1\n---\nconfig:\n  a: 2\n", 3, 1, /second YAML document/],
  ["a directive", "%YAML 1.1\n---\nconfig: {}\n", 1, 1, /directive/],
  ["a tab that indents", "config:\n\ta: 1\n", 2, 1, /Tabs are not allowed|a tab/],
  ["a tab in a value", "config:\n  a: \"x\ty\"\n", 2, 8, /a tab/],
  ["a block value with a keep indicator", "config:\n  a: |+\n    x\n\n", 2, 6, /indentation or keep/],
  ["no line break at the end (a block value ends differently)", "config:\n  a: |\n    x", 3, 6, /does not end with a line break/],
  ["a flow value ending with a colon (text to Go, a key to YAML 1.2)", "config:\n  a: [--enable-x:, z]\n", 2, 7, /followed by ":" and no space/],
  ["a comment line inside a value over several lines (a hidden list entry)", "config:\n  a:\n    - x\n    -\n#tuned\n      y\n    - z\n", 6, 7, /a comment or a list entry among them/],
  ["a key that is a number", "config:\n  1: a\n", 2, 3, /key "1" is not text/],
  ["a duplicate key", "config:\n  a: 1\n  a: 2\n", 3, 3, /unique/],
];

for (const [what, text, line, column, reason] of REFUSED) {
  test(`refused: ${what}, naming the file, line and column`, () => {
    const e = refusal(text);
    assert.ok(e, "refused");
    assert.deepEqual([e.file, e.line, e.column], ["stacks/Pulumi.x.yaml", line, column]);
    assert.match(e.reason, reason);
    assert.match(e.message, /^stacks\/Pulumi\.x\.yaml:\d+:\d+: .*; nothing was previewed or changed$/s);
  });
}

test("read: the forms both readers agree on", () => {
  const text = [
    "# a comment, with a tab\tand # signs",
    "config:",
    "  dflash-sglang:speculative:",
    "    algorithm: DDTREE   # trailing comment",
    "    budget: 16",
    "    ratio: 0.85",
    "    small: -3",
    "    big: 1e5",
    "    enabled: true",
    "    disabled: false",
    "    none: null",
    "  dflash-sglang:sglangBuild: 0.5.19",
    '  dflash-sglang:octal: "0600"',
    "  dflash-sglang:quoted: 'it''s'",
    '  dflash-sglang:escaped: "a\\tb\\u2028c"',
    '  dflash-sglang:model: {extraArgs: ["--cuda-graph-max-bs", "8"], path: /m}',
    "  dflash-sglang:hostKey: |-",
    "    ssh-ed25519 AAAA",
    "  dflash-sglang:list:",
    "    - a#b",
    "    - 'x: y'",
    "",
  ].join("\n");
  const config = (readConfigYaml(text, "f") as { config: Record<string, unknown> }).config;
  assert.deepEqual(config["dflash-sglang:speculative"], { algorithm: "DDTREE", budget: 16, ratio: 0.85, small: -3, big: 100000, enabled: true, disabled: false, none: null });
  assert.equal(config["dflash-sglang:sglangBuild"], "0.5.19");
  assert.equal(config["dflash-sglang:octal"], "0600");
  assert.equal(config["dflash-sglang:quoted"], "it's");
  assert.equal(config["dflash-sglang:escaped"], "a\tb\u2028c");
  assert.deepEqual(config["dflash-sglang:model"], { extraArgs: ["--cuda-graph-max-bs", "8"], path: "/m" });
  assert.equal(config["dflash-sglang:hostKey"], "ssh-ed25519 AAAA");
  assert.deepEqual(config["dflash-sglang:list"], ["a#b", "x: y"]);
});

test("every configuration file the project commits is read, none refused", () => {
  const files = ["Pulumi.yaml", ...fs.readdirSync(path.join(REPO_ROOT, "stacks")).filter((f) => f.endsWith(".yaml")).map((f) => `stacks/${f}`)];
  assert.ok(files.length > 3);
  for (const f of files) assert.doesNotThrow(() => readConfigYaml(fs.readFileSync(path.join(REPO_ROOT, f), "utf8"), f), f);
});

test("Pulumi.yaml outside its config: every byte but the config entry's, comments inside it included", () => {
  const project = "name: p # the name\nruntime: nodejs\n# before config\nconfig:\n  a: 1\n  # inside\n  b: 2\nmain: x\n";
  assert.equal(projectOutsideConfig(project, "P"), "name: p # the name\nruntime: nodejs\n# before config\nmain: x\n");
  assert.equal(projectOutsideConfig(project.replace("a: 1", "a: 2").replace("# inside", "# changed"), "P"), projectOutsideConfig(project, "P"));
  // Any byte outside it is a difference: a comment, a space, a key's order.
  for (const other of [project.replace("# the name", "# a name"), project.replace("runtime: nodejs", "runtime:  nodejs"), project.replace("main: x\n", "").replace("name: p", "main: x\nname: p")]) {
    assert.notEqual(projectOutsideConfig(other, "P"), projectOutsideConfig(project, "P"), other);
  }
  assert.equal(projectOutsideConfig("name: p\n", "P"), "name: p\n");
  assert.throws(() => projectOutsideConfig("name: p\nconfig: # x\rmain: y\n", "P"), /P:2:12: a carriage return/);
});
