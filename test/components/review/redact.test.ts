import { test } from "node:test";
import * as assert from "node:assert/strict";
import { maskSecrets } from "../../../components/review/redact";
import { maskedBackend } from "../../../components/review/review";
import { configChanges } from "../../../components/review/change";

test("unit lines: a secret flag's value on the next line, secret-named variables, URL passwords", () => {
  const text = ["    -     --api-key \\", "    -     sk-live-abcdef \\", "    + Environment=AWS_SECRET_ACCESS_KEY=AKIAxyz OPENAI_API_KEY=sk-1 PORT=1", "    + Environment=DATABASE_URL=postgres://u:pw@db/x"].join("\n");
  const masked = maskSecrets(text);
  for (const secret of ["sk-live-abcdef", "AKIAxyz", "sk-1", ":pw@"]) assert.ok(!masked.includes(secret), `${secret} in:\n${masked}`);
  assert.match(masked, /PORT=1/);
});

test("a backend URL's password is masked up to its last @; signatures too", () => {
  assert.equal(maskedBackend("postgres://pulumi:p@ss:w/rd@db:5432/pulumi?sslmode=require"), "postgres://pulumi:***@db:5432/pulumi?sslmode=require");
  assert.equal(maskedBackend("azblob://c?sig=abc&x=1"), "azblob://c?sig=***&x=1");
  assert.equal(maskedBackend("file:///tmp/state"), "file:///tmp/state");
  assert.equal(maskedBackend(undefined), "the default backend");
});

test("settings named like secrets, or carrying a secret flag, never show their value", () => {
  const words = configChanges({}, { service: { environment: { HF_TOKEN: "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH" } }, model: { extraArgs: ["--api-key=sk-live-0123456789abcdefghij"] }, host: { privateKeyPath: "/root/.ssh/k" } }).map((c) => c.words);
  const all = words.join(" ");
  assert.ok(!all.includes("hf_abcdefgh") && !all.includes("sk-live-0123"), all);
  assert.ok(words.includes("service.environment.HF_TOKEN set"), all);
  assert.ok(words.includes("host.privateKeyPath none -> /root/.ssh/k"), all);
});

// Issue 36: what the masking missed.
test("a URL password holding @, credential headers, and a secret flag split from its value in a list are masked", () => {
  const cases: [string, string][] = [
    ["Environment=DATABASE_URL=postgres://u:p@ss@w0rd@db:5432/x", "p@ss@w0rd"],
    ["ExecStartPre=curl -H 'x-api-key: sk-hdr-0123456789' http://127.0.0.1/", "sk-hdr-0123456789"],
    ["X-Api-Key:sk-hdr-abcdef", "sk-hdr-abcdef"],
    ["Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"],
    ['model.extraArgs ["--api-key","sk-split-0123456789"]', "sk-split-0123456789"],
    ["extraArgs: ['--admin-password', 'hunter2-long-value']", "hunter2-long-value"],
  ];
  for (const [text, secret] of cases) {
    const masked = maskSecrets(text);
    assert.ok(!masked.includes(secret), `${secret} in ${masked}`);
    assert.match(masked, /<redacted>|\*\*\*/);
  }
  // A YAML list: the flag one item, its value the next.
  const yaml = maskSecrets("    extraArgs:\n      - --api-key\n      - sk-yaml-0123456789\n      - --port\n      - 30000");
  assert.ok(!yaml.includes("sk-yaml-0123456789"), yaml);
  assert.match(yaml, /- 30000/, "the next flag's value stays");
  // The host keeps its name; a URL without a password is left as it is.
  assert.equal(maskSecrets("postgres://u:p@ss@db/x"), "postgres://u:***@db/x");
  assert.equal(maskSecrets("see https://example.invalid/a@b"), "see https://example.invalid/a@b");
  // Through configChanges, a split flag in extraArgs is never printed.
  const words = configChanges({}, { model: { extraArgs: ["--api-key", "sk-live-split-0123456789"] } }).map((c) => c.words).join(" ");
  assert.ok(!words.includes("sk-live-split"), words);
});
