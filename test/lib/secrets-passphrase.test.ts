// The passphrase rules of lib/secrets-passphrase.ts, pure, and the committed stack files
// checked by them: no stack in stacks/ may hold secrets that open with the empty passphrase.
// (Salts made by the real Pulumi CLI, and the wrapper's behaviour: test/scripts/pulumi-secrets.test.ts.)
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { REPO_ROOT } from "../../lib/pulumi-env";
import { emptyPassphraseRefusal, MalformedSaltError, missingPassphrase, parseEncryptionSalt, projectOf, renderLeakReport, stacksWithEmptyPassphrase } from "../../lib/secrets-passphrase";

const noFile = (): string => {
  throw new Error("ENOENT: no such file");
};

test("an empty passphrase is refused, set or in a file; a real one, or none (Pulumi then asks), is not", () => {
  assert.match(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE: "" }, noFile) ?? "", /^refused: PULUMI_CONFIG_PASSPHRASE is set but empty\. .*PULUMI_CONFIG_PASSPHRASE_FILE.*change-secrets-provider/);
  assert.match(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE_FILE: "/p" }, () => "\n") ?? "", /^refused: PULUMI_CONFIG_PASSPHRASE_FILE=\/p is empty\./);
  assert.match(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE_FILE: "/p" }, noFile) ?? "", /^refused: PULUMI_CONFIG_PASSPHRASE_FILE=\/p cannot be read \(ENOENT/);
  assert.match(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "/p" }, () => "x") ?? "", /PULUMI_CONFIG_PASSPHRASE is set but empty/);
  assert.equal(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE: "correct horse" }, noFile), undefined);
  assert.equal(emptyPassphraseRefusal({ PULUMI_CONFIG_PASSPHRASE_FILE: "/p" }, () => "correct horse\n"), undefined);
  assert.equal(emptyPassphraseRefusal({}, noFile), undefined);
});

test("a sweep on real hosts without a passphrase is refused before anything; one set (or in a file) is enough", () => {
  assert.match(missingPassphrase({}) ?? "", /export PULUMI_CONFIG_PASSPHRASE \(or PULUMI_CONFIG_PASSPHRASE_FILE\)/);
  assert.equal(missingPassphrase({ PULUMI_CONFIG_PASSPHRASE: "x" }), undefined);
  assert.equal(missingPassphrase({ PULUMI_CONFIG_PASSPHRASE_FILE: "/p" }), undefined);
});

test("an encryptionsalt that is not Pulumi's format is an error saying what was expected", () => {
  assert.throws(() => parseEncryptionSalt("v2:abc"), (e: unknown) => e instanceof MalformedSaltError && /expected v1:<salt>:v1:<nonce>:<sealed>/.test((e as Error).message));
  assert.throws(() => parseEncryptionSalt("v1:AAAA:v1:AAAA:AA=="), /too short/);
});

test("the project Pulumi uses is the nearest folder with Pulumi.yaml, its stack files in its stackConfigDir", () => {
  assert.deepEqual(projectOf(path.join(REPO_ROOT, "components", "sglang-service")), { projectDir: REPO_ROOT, stacksDir: path.join(REPO_ROOT, "stacks") });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "project-of-"));
  try {
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: p\nruntime: nodejs\n");
    assert.deepEqual(projectOf(dir), { projectDir: dir, stacksDir: dir });
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test("the leak report names each stack's file and the rotation steps, a new key among them", () => {
  const text = renderLeakReport([{ stack: "b16t4-w2048", file: path.join(REPO_ROOT, "stacks", "Pulumi.b16t4-w2048.yaml") }], REPO_ROOT);
  assert.match(text, /EMPTY passphrase/);
  assert.match(text, /^ {2}b16t4-w2048: stacks\/Pulumi\.b16t4-w2048\.yaml$/m);
  assert.match(text, /PULUMI_CONFIG_PASSPHRASE= npx pulumi stack change-secrets-provider passphrase --stack STACK/);
  assert.match(text, /config set --secret --stack STACK apiKey NEW-KEY/);
  assert.equal(renderLeakReport([], REPO_ROOT), "");
});

test("the committed stack files hold no secret that opens with the empty passphrase, and no secret in plain text", () => {
  const stacksDir = path.join(REPO_ROOT, "stacks");
  const leaks = stacksWithEmptyPassphrase(stacksDir, undefined);
  assert.deepEqual(leaks.map((l) => path.relative(REPO_ROOT, l.file)), [], renderLeakReport(leaks, REPO_ROOT));
  for (const name of fs.readdirSync(stacksDir)) {
    const config = (YAML.parse(fs.readFileSync(path.join(stacksDir, name), "utf8"))?.config ?? {}) as Record<string, unknown>;
    for (const key of ["apiKey", "hfToken", "sshPrivateKey"]) {
      const value = config[`dflash-sglang:${key}`];
      if (value === undefined) continue;
      assert.ok(typeof value === "object" && value !== null && "secure" in value, `stacks/${name}: dflash-sglang:${key} is in plain text; set it with npx pulumi config set --secret`);
    }
  }
});
